package replay_test

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
	"github.com/hermes-go/hermes/engine/model/replay"
)

var update = flag.Bool("update", false, "rewrite testdata/anthropic_tool_turn.json from a live recording against the fake Messages API")

const anthropicFixture = "testdata/anthropic_tool_turn.json"

// anthropicScript is a tool-using turn with extended thinking, an overload retried, and a
// mid-stream overloaded_error.
func anthropicScript(srv *anthropictest.Server) []model.Request {
	srv.Enqueue(
		anthropictest.Response{
			Thinking: []string{"The user wants ", "the files."}, Signature: "EqQBCkgIARABGAIiQL",
			Text:  []string{"Let me look."},
			Calls: []anthropictest.Call{{ID: "toolu_01A", Name: "terminal", Args: []string{`{"command"`, `: "ls ü"}`}}},
			Usage: &anthropictest.Usage{Input: 310, CacheWrite: 1200, Output: 64},
		},
		anthropictest.HTTPError(529, "overloaded_error", "Overloaded"),
		anthropictest.Response{Text: []string{"Two files: ", "a.go and b.go."}, Usage: &anthropictest.Usage{Input: 40, CacheRead: 1200, CacheWrite: 380, Output: 12}},
		anthropictest.Response{Text: []string{"cut ", "short"}, FaultAt: 5, Fault: anthropictest.FaultError},
	)
	sys := model.Message{Role: "system", Content: "be brief"}
	call := model.Message{Role: "assistant", Content: "Let me look.", Reasoning: "The user wants the files.",
		Thinking:  []model.ThinkingBlock{{Text: "The user wants the files.", Signature: "EqQBCkgIARABGAIiQL"}},
		ToolCalls: []model.ToolCall{{ID: "toolu_01A", Name: "terminal", Arguments: `{"command": "ls ü"}`}}}
	return []model.Request{
		{Model: "claude-sonnet-4-5", Messages: []model.Message{sys, {Role: "user", Content: "what is here?"}}},
		{Model: "claude-sonnet-4-5", Messages: []model.Message{sys, {Role: "user", Content: "what is here?"}, call, {Role: "tool", ToolCallID: "toolu_01A", Name: "terminal", Content: "a.go\nb.go"}}},
		{Model: "claude-sonnet-4-5", Messages: []model.Message{sys, {Role: "user", Content: "again"}}},
	}
}

func newAnthropic(base string, hc *http.Client) *anthropic.Client {
	return anthropic.New(anthropic.Config{BaseURL: base, APIKey: secretKey, HTTPClient: hc, ThinkingBudget: 1024, Backoff: func(int) time.Duration { return 0 }})
}

// An Anthropic session recorded through the SDK replays chunk for chunk and error for error,
// and the committed fixture is exactly what recording produces.
func TestAnthropicRecordReplay(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	reqs := anthropicScript(srv)
	rec := replay.NewRecorder(nil)
	rec.Provider = "anthropic"
	live := newAnthropic(srv.URL(), &http.Client{Transport: rec})
	var lives []outcome
	for _, r := range reqs {
		lives = append(lives, run(live.Stream(t.Context(), r)))
	}
	var me *model.Error
	if !errors.As(lives[2].err, &me) || me.Type != "overloaded_error" {
		t.Fatalf("the third call should fail mid-stream: %v", lives[2].err)
	}
	path := filepath.Join(t.TempDir(), "c.json")
	if err := rec.Save(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secretKey) || !strings.Contains(string(data), `"provider": "anthropic"`) || !strings.Contains(string(data), "event: message_start") {
		t.Fatalf("cassette:\n%s", data)
	}
	if *update {
		if err := os.WriteFile(anthropicFixture, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixture, err := os.ReadFile(anthropicFixture)
	if err != nil {
		t.Fatal(err)
	}
	// The pieces follow the reads the client happened to make; the bytes must be the same.
	if a, b := wireOf(t, fixture), wireOf(t, data); a != b {
		t.Errorf("%s is not what recording produces now (go test -run TestAnthropicRecordReplay -update rewrites it)\nfixture %s\nnow     %s", anthropicFixture, a, b)
	}
	for name, c := range map[string][]byte{"recording": data, "fixture": fixture} {
		cas, err := replay.Parse(c, name)
		if err != nil {
			t.Fatal(err)
		}
		p := replay.New(cas)
		for i, r := range reqs {
			assertSameOutcome(t, name+" call "+string(rune('1'+i)), lives[i], run(p.Stream(t.Context(), r)))
		}
		if p.Remaining() != 0 {
			t.Errorf("%s: %d interactions unplayed", name, p.Remaining())
		}
		if o := run(p.Stream(t.Context(), reqs[0])); !errors.Is(o.err, replay.ErrExhausted) {
			t.Errorf("%s: past the end: %v", name, o.err)
		}
	}
}

// wireOf renders a cassette with each body joined, independent of how reads split it.
func wireOf(t *testing.T, data []byte) string {
	t.Helper()
	c, err := replay.Parse(data, "x")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, it := range c.Interactions {
		b.WriteString(string(it.Request))
		fmt.Fprintf(&b, "\n%d %v %q\n", it.Response.Status, it.Response.Headers, it.Response.Error)
		for _, p := range it.Response.Body {
			b.Write(p)
		}
	}
	return b.String()
}
