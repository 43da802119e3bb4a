package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// anthropicHarness is the engine harness with an "anthropic" provider on a fake Messages API
// as the default model, next to the harness's fake OpenAI endpoint.
func anthropicHarness(t *testing.T, retries int, fallback ...string) (*enginetest.Harness, *anthropictest.Server) {
	t.Helper()
	srv := anthropictest.New(t)
	h := enginetest.New(t, enginetest.Options{Memory: true, Configure: func(c *engine.Config) {
		c.Providers["anthropic"] = anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "k", MaxRetries: retries, ThinkingBudget: 1024, Backoff: func(int) time.Duration { return 0 }})
		c.DefaultModel = "anthropic:claude-sonnet-4-5"
		c.FallbackModels = fallback
	}})
	return h, srv
}

func events(s *engine.Session) []engine.Event {
	evs, _ := s.EventsSince(0)
	return evs
}

func TestAnthropicToolRoundTrip(t *testing.T) {
	t.Parallel()
	h, srv := anthropicHarness(t, -1)
	srv.Enqueue(
		anthropictest.Response{
			Thinking: []string{"I should ", "look."}, Signature: "sig-1",
			Calls: []anthropictest.Call{{Name: "terminal", Args: []string{`{"command":`, `"echo round trip"}`}}},
			Usage: &anthropictest.Usage{Input: 1000, CacheWrite: 2000, Output: 100},
		},
		anthropictest.Response{Text: []string{"It printed ", "round trip."}, Usage: &anthropictest.Usage{Input: 200, CacheRead: 2000, CacheWrite: 900, Output: 50}},
	)
	s := h.Create()
	out := h.Run(s, "run it")
	if out.Status != engine.StatusCompleted || out.Text != "It printed round trip." {
		t.Fatalf("outcome %+v", out)
	}
	if out.ExitReason != "text_response(finish_reason=stop)" {
		t.Errorf("exit reason %q", out.ExitReason)
	}
	// Price: claude-sonnet-4-5 at $3 in, $15 out, $0.30 cache read, $3.75 cache write.
	want := (1000*3 + 2000*3.75 + 100*15 + 200*3 + 2000*0.3 + 900*3.75 + 50*15) / 1e6
	if math.Abs(out.Usage.CostUSD-want) > 1e-12 {
		t.Errorf("turn cost %v, want %v", out.Usage.CostUSD, want)
	}
	if out.Usage.CachedTokens != 2000 || out.Usage.CacheWriteTokens != 2900 || out.Usage.PromptTokens != 3000+3100 {
		t.Errorf("usage %+v", out.Usage)
	}
	rec := s.Record()
	if math.Abs(rec.Usage.CostUSD-want) > 1e-12 || rec.Usage.CacheWriteTokens != 2900 {
		t.Errorf("session usage %+v, want cost %v", rec.Usage, want)
	}
	var reasoning strings.Builder
	var started, completed int
	for _, ev := range events(s) {
		switch ev.Type {
		case engine.EvReasoningDelta:
			reasoning.WriteString(ev.Text)
		case engine.EvToolStart:
			started++
		case engine.EvToolComplete:
			completed++
		}
	}
	if reasoning.String() != "I should look." || started != 1 || completed != 1 {
		t.Errorf("reasoning %q, tool.start %d, tool.complete %d", reasoning.String(), started, completed)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var second struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	body := string(reqs[1].Body)
	for _, want := range []string{`"signature":"sig-1"`, `"type":"tool_use"`, `"type":"tool_result"`, "round trip"} {
		if !strings.Contains(body, want) {
			t.Errorf("second request lacks %s: %s", want, body)
		}
	}
}

// A call that fails after a tool ran in the turn is retried (the request is the same, nothing
// of its answer arrived) and the tool is not run again.
func TestRetryAfterToolNeverRunsItTwice(t *testing.T) {
	t.Parallel()
	h, srv := anthropicHarness(t, 2)
	srv.Enqueue(
		anthropictest.ToolUse(anthropictest.Call{Name: "terminal", Args: []string{`{"command":"echo ran >> count.txt"}`}}),
		anthropictest.HTTPError(529, "overloaded_error", "Overloaded"),
		anthropictest.Response{Status: 429, Error: anthropictest.APIError{Type: "rate_limit_error", Message: "slow down"}},
		anthropictest.Text("done"),
	)
	s := h.Create()
	out := h.Run(s, "count")
	if out.Status != engine.StatusCompleted || out.Text != "done" {
		t.Fatalf("outcome %+v", out)
	}
	data, err := os.ReadFile(filepath.Join(h.Cwd, "count.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("ran\n")); n != 1 {
		t.Errorf("the tool ran %d times", n)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	if !bytes.Equal(reqs[1].Body, reqs[2].Body) || !bytes.Equal(reqs[2].Body, reqs[3].Body) {
		t.Error("the retries did not resend the same request")
	}
	if !strings.Contains(string(reqs[3].Body), `"tool_result"`) {
		t.Error("the retried request lost the tool result")
	}
}

// A stream that fails after its tool call arrived is not retried and its tool never runs: the
// message is incomplete, and a second answer would call the tool again.
func TestFailureAfterToolCallStreamedIsNotRetried(t *testing.T) {
	t.Parallel()
	h, srv := anthropicHarness(t, 2)
	// message_start, ping, content_block_start, two input_json_delta, content_block_stop: 6
	// events, then overloaded_error instead of message_delta and message_stop.
	srv.Enqueue(
		anthropictest.Response{Calls: []anthropictest.Call{{Name: "terminal", Args: []string{`{"command":"echo ran >> count.txt"}`}}}, FaultAt: 6, Fault: anthropictest.FaultError},
		anthropictest.ToolUse(anthropictest.Call{Name: "terminal", Args: []string{`{"command":"echo ran >> count.txt"}`}}),
		anthropictest.Text("never"),
	)
	s := h.Create()
	out := h.Run(s, "count")
	if out.Status != engine.StatusFailed || !strings.Contains(out.Error, "overloaded_error") {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := os.Stat(filepath.Join(h.Cwd, "count.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the tool ran: %v", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (no retry after the answer started)", n)
	}
}

func TestRetryBudgetSpentThenFallback(t *testing.T) {
	t.Parallel()
	t.Run("no fallback", func(t *testing.T) {
		t.Parallel()
		h, srv := anthropicHarness(t, 1)
		srv.Enqueue(anthropictest.HTTPError(529, "overloaded_error", "Overloaded"), anthropictest.HTTPError(529, "overloaded_error", "Overloaded"))
		out := h.Run(h.Create(), "hi")
		if out.Status != engine.StatusFailed || !strings.Contains(out.Error, "gave up after 2 attempts: retry budget spent") {
			t.Fatalf("outcome %+v", out)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		t.Parallel()
		h, srv := anthropicHarness(t, 1, "anthropic:claude-sonnet-4-5", "openai:gpt-4.1")
		srv.Enqueue(anthropictest.HTTPError(529, "overloaded_error", "Overloaded"), anthropictest.HTTPError(529, "overloaded_error", "Overloaded"))
		h.Server.Enqueue(openaitest.Response{Text: []string{"from the fallback"}, Usage: &model.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000, TotalTokens: 2_000_000}})
		s := h.Create()
		out := h.Run(s, "hi")
		if out.Status != engine.StatusCompleted || out.Text != "from the fallback" {
			t.Fatalf("outcome %+v", out)
		}
		if math.Abs(out.Usage.CostUSD-10) > 1e-9 { // gpt-4.1: $2 in + $8 out per million
			t.Errorf("cost %v, want the fallback model's price 10", out.Usage.CostUSD)
		}
		var notice string
		for _, ev := range events(s) {
			if si, ok := ev.Data.(engine.StatusInfo); ok && ev.Type == engine.EvStatus && si.Kind == "model_fallback" {
				notice = si.Text
			}
		}
		if !strings.Contains(notice, "anthropic:claude-sonnet-4-5 failed") || !strings.Contains(notice, "trying openai:gpt-4.1") || !strings.Contains(notice, "529") {
			t.Errorf("fallback event text %q", notice)
		}
		if len(srv.Requests()) != 2 {
			t.Errorf("primary got %d requests, want 2 (the fallback list repeats it: skipped)", len(srv.Requests()))
		}
		if s.Record().Model != "anthropic:claude-sonnet-4-5" {
			t.Errorf("the session moved to %s", s.Record().Model)
		}
	})
}

func TestModelCatalogueChecks(t *testing.T) {
	t.Parallel()
	h, _ := anthropicHarness(t, -1)
	ctx := context.Background()
	_, err := h.Engine.Create(ctx, engine.CreateOptions{Model: "anthropic:gpt-5.5"})
	var mm *engine.ModelMismatchError
	if !errors.Is(err, engine.ErrInvalidModel) || !errors.As(err, &mm) {
		t.Fatalf("err = %v", err)
	}
	if mm.Provider != "anthropic" || mm.Owner != "openai" || len(mm.Suggestions) == 0 || len(mm.Suggestions) > 5 {
		t.Errorf("mismatch %+v", mm.Mismatch)
	}
	// A bare name resolves on the default provider: refused there too.
	if _, err := h.Engine.Create(ctx, engine.CreateOptions{Model: "gpt-5.5"}); !errors.As(err, &mm) {
		t.Errorf("bare gpt-5.5 on an anthropic default: %v", err)
	}
	for in, want := range map[string]string{
		"claude-sonnet-4":           "anthropic:claude-sonnet-4-0",
		"anthropic:claude-next-7":   "anthropic:claude-next-7",
		"openai:gpt-4.1":            "openai:gpt-4.1",
		"anthropic:private-model-1": "anthropic:private-model-1",
	} {
		got, _, err := h.Engine.ResolveModel(in)
		if err != nil || got != want {
			t.Errorf("ResolveModel(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	s := h.Create()
	m, err := s.SetModel(ctx, "claude-sonnet-4")
	if err != nil || m != "anthropic:claude-sonnet-4-0" {
		t.Errorf("/model claude-sonnet-4 = %s, %v", m, err)
	}
	if _, err := s.SetModel(ctx, "openai:claude-opus-4-5"); !errors.As(err, &mm) || mm.Owner != "anthropic" {
		t.Errorf("openai:claude-opus-4-5 = %v", err)
	}
	if h.Engine.Catalog() == nil || len(h.Engine.Catalog().Models("anthropic")) == 0 {
		t.Error("no catalogue")
	}
}

// A model name with a space or a control character is refused wherever a name is resolved:
// it would be stored as is and printed as a line of its own.
func TestModelNameWithSpaceOrControlRefused(t *testing.T) {
	t.Parallel()
	h, _ := anthropicHarness(t, -1)
	ctx := context.Background()
	s := h.Create()
	before := s.Record().Model
	for _, name := range []string{"anthropic:claude sonnet", "anthropic:claude\x00x", "openai:gpt-4.1 extra", "anthropic:claude-sonnet-4\nforged 1", "anthropic:a\tb", "openai:gpt\u00a0x", "anthropic:x\u0085y"} {
		if _, _, err := h.Engine.ResolveModel(name); !errors.Is(err, engine.ErrInvalidModel) {
			t.Errorf("ResolveModel(%q): %v", name, err)
		}
		if _, err := h.Engine.Create(ctx, engine.CreateOptions{Model: name}); !errors.Is(err, engine.ErrInvalidModel) {
			t.Errorf("create with %q: %v", name, err)
		}
		if _, err := s.SetModel(ctx, name); !errors.Is(err, engine.ErrInvalidModel) {
			t.Errorf("set model %q: %v", name, err)
		}
	}
	if s.Record().Model != before {
		t.Errorf("the session's model became %q", s.Record().Model)
	}
	// Surrounding spaces are trimmed, as before.
	if m, _, err := h.Engine.ResolveModel("  openai:gpt-4.1 "); err != nil || m != "openai:gpt-4.1" {
		t.Errorf("trimmed name: %s, %v", m, err)
	}
}
