package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/tool"
)

// fakeWindow is the fake model's context window in its tokens (a quarter of a request body's
// bytes); the built-in tools' schemas alone take a few thousand of them.
const fakeWindow = 12000

// summariser answers a compaction request with a short summary and anything else with a short
// reply naming the last user message, so every request of a long session has an answer.
func summariser(t *testing.T) func(openaitest.Request) openaitest.Response {
	return func(r openaitest.Request) openaitest.Response {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Errorf("request body: %v", err)
			return openaitest.Text("?")
		}
		last := body.Messages[len(body.Messages)-1]
		text, _ := last.Content.(string)
		if last.Role == "user" && strings.HasPrefix(text, "Summarise the conversation so far") {
			return openaitest.Text("The user sent numbered prompts; all were acknowledged.")
		}
		return openaitest.Text("ack " + clipTo(text, 12))
	}
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// longSession runs 40 turns of large prompts against a model with a small window and checks
// that every turn completes, compaction happened more than once, every row ever written is
// still in the store with its content, and a rewind to a row still active works.
func longSession(t *testing.T, threshold float64) {
	h := enginetest.New(t, enginetest.Options{
		Server: []openaitest.Option{openaitest.WithContextWindow(fakeWindow), openaitest.WithResponder(summariser(t))},
		Configure: func(c *engine.Config) {
			c.ContextWindows = map[string]int{"openai:fake-agent": fakeWindow}
			c.CompactThreshold = threshold
		},
	})
	s := h.Create()
	seen := map[uint64]string{}
	compactingSeen := 0
	for i := range 40 {
		seq := s.LastSeq()
		prompt := fmt.Sprintf("prompt %02d: %s", i, strings.Repeat(fmt.Sprintf("line %d of a large prompt. ", i), 250))
		out := h.Run(s, prompt)
		if !out.Completed {
			t.Fatalf("turn %d: %s %s: %s", i, out.Status, out.ExitReason, out.Error)
		}
		evs, _ := s.EventsSince(seq)
		for _, ev := range evs {
			if si, ok := ev.Data.(engine.StatusInfo); ok && ev.Type == engine.EvStatus && si.Kind == "compacting" {
				compactingSeen++
			}
		}
		rows, err := h.Store.Rows(enginetest.Context(t), s.ID(), store.RowQuery{IncludeArchived: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			seen[r.ID] = r.Content
		}
		ci := s.Context()
		if ci.Max != fakeWindow || ci.Used <= 0 || ci.Percent != (100*ci.Used+ci.Max/2)/ci.Max {
			t.Fatalf("turn %d: context %+v", i, ci)
		}
	}
	refused := 0
	for _, r := range h.Server.Requests() {
		if openaitest.RequestTokens(r.Body) > fakeWindow {
			refused++
		}
	}
	if threshold >= 0 && refused != 0 {
		t.Fatalf("%d requests crossed the window: compaction came too late", refused)
	}
	if threshold < 0 && refused < 2 {
		t.Fatalf("%d requests refused as too long: the test did not reach the window", refused)
	}
	ci := s.Context()
	if ci.Compressions < 2 || compactingSeen < 2 {
		t.Fatalf("compactions %d, compacting statuses %d: want at least 2", ci.Compressions, compactingSeen)
	}
	bd, err := s.ContextBreakdown(enginetest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	byID, sum := map[string]int{}, 0
	for _, c := range bd.Categories {
		byID[c.ID] = c.Tokens
		sum += c.Tokens
	}
	if sum != bd.EstimatedTotal || byID["system"] <= 0 || byID["tools"] <= 0 || byID["summary"] <= 0 || byID["messages"] <= 0 || bd.Max != fakeWindow {
		t.Fatalf("context breakdown %+v", bd)
	}
	all, err := h.Store.Rows(enginetest.Context(t), s.ID(), store.RowQuery{IncludeArchived: true})
	if err != nil {
		t.Fatal(err)
	}
	have := map[uint64]string{}
	for _, r := range all {
		have[r.ID] = r.Content
	}
	for id, c := range seen {
		if have[id] != c {
			t.Fatalf("row %d lost or changed after compaction", id)
		}
	}
	for i := range 40 {
		want := fmt.Sprintf("prompt %02d: ", i)
		found := false
		for _, r := range all {
			found = found || (r.Role == "user" && strings.HasPrefix(r.Content, want))
		}
		if !found {
			t.Fatalf("the user row of turn %d is not in the store", i)
		}
	}
	active, err := s.History(enginetest.Context(t), store.RowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(active) >= len(all) || active[0].DisplayKind != "summary" {
		t.Fatalf("active transcript %d rows of %d, first %q: want a summary heading fewer rows", len(active), len(all), active[0].DisplayKind)
	}
	var target uint64
	for _, r := range active {
		if r.Role == "user" {
			target = r.ID
			break
		}
	}
	adm, err := s.Submit(enginetest.Context(t), engine.Prompt{Text: "again, shorter", Truncate: &engine.Truncate{BeforeRowID: target, Confirm: true}})
	if err != nil {
		t.Fatalf("rewind to row %d: %v", target, err)
	}
	out, err := s.Wait(enginetest.Context(t), adm.TurnID)
	if err != nil || !out.Completed {
		t.Fatalf("turn after rewind: %+v %v", out, err)
	}

	// A rewind to an early row a compaction archived: the transcript becomes what stood before
	// that row (turns 0–4, or a summary and the last of them), then the new prompt.
	var early uint64
	for _, r := range all {
		if r.Role == "user" && strings.HasPrefix(r.Content, "prompt 05: ") {
			early = r.ID
			break
		}
	}
	adm, err = s.Submit(enginetest.Context(t), engine.Prompt{Text: "from turn five again", Truncate: &engine.Truncate{BeforeRowID: early, Confirm: true}})
	if err != nil {
		t.Fatalf("rewind to archived row %d: %v", early, err)
	}
	if out, err := s.Wait(enginetest.Context(t), adm.TurnID); err != nil || !out.Completed {
		t.Fatalf("turn after the rewind to an archived row: %+v %v", out, err)
	}
	active, err = s.History(enginetest.Context(t), store.RowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, r := range active {
		if r.Role == "user" {
			users = append(users, clipTo(r.Content, 10))
		}
	}
	if len(users) < 2 || users[len(users)-1] != "from turn " || users[len(users)-2] != "prompt 04:" || adm.UserRowID != active[len(active)-2].ID {
		t.Fatalf("after the rewind to turn 5 the user rows are %q (new row %d)", users, adm.UserRowID)
	}
	for _, r := range active[:len(active)-2] {
		if r.Role == "user" && r.Content >= "prompt 05" && strings.HasPrefix(r.Content, "prompt ") {
			t.Fatalf("a later turn survived the rewind: %q", clipTo(r.Content, 20))
		}
	}
	if _, err := s.Submit(enginetest.Context(t), engine.Prompt{Text: "x", Truncate: &engine.Truncate{BeforeRowID: active[0].ID, Confirm: true}}); !errors.Is(err, engine.ErrTruncateStale) && !errors.Is(err, engine.ErrTruncateEmpty) {
		t.Fatalf("rewind to a non-user row: %v", err)
	}
}

func TestLongSessionCompactsBeforeTheWindow(t *testing.T) { longSession(t, 0) }

// With automatic compaction off, every overflow reaches the provider, which refuses it with
// context_length_exceeded; the turn compacts harder and retries, and still completes.
func TestLongSessionRecoversFromContextLengthExceeded(t *testing.T) { longSession(t, -1) }

// dumpTool returns 5 MB of numbered lines: a tool whose whole output the store keeps.
type dumpTool struct{}

func (dumpTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "dump", Description: "prints a lot", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}

func (dumpTool) Call(context.Context, tool.Call, *tool.Env) (tool.Result, error) {
	return tool.Result{Content: bigOutput}, nil
}

var bigOutput = func() string {
	var b strings.Builder
	for i := 0; b.Len() < 5<<20; i++ {
		fmt.Fprintf(&b, "output line %07d\n", i)
	}
	return b.String()
}()

var markerCallID = regexp.MustCompile(`read_tool_output tool \(call_id "([^"]+)", offset (\d+)\)`)

// toolUser drives each turn: call toolName, read a range of its cut output back with
// read_tool_output, answer; compaction requests get a summary.
func toolUser(t *testing.T, toolName, args string, reads *[]string) func(openaitest.Request) openaitest.Response {
	return func(r openaitest.Request) openaitest.Response {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
				Name    string `json:"name"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Errorf("request body: %v", err)
			return openaitest.Text("?")
		}
		last := body.Messages[len(body.Messages)-1]
		text, _ := last.Content.(string)
		switch {
		case last.Role == "user" && strings.HasPrefix(text, "Summarise the conversation so far"):
			return openaitest.Text("Each prompt ran a tool with a large output and read part of it back.")
		case last.Role == "user":
			return openaitest.ToolCalls(openaitest.Call{Name: toolName, Args: []string{args}})
		case last.Role == "tool" && markerCallID.MatchString(text):
			m := markerCallID.FindStringSubmatch(text)
			return openaitest.ToolCalls(openaitest.Call{Name: engine.ToolOutputName, Args: []string{fmt.Sprintf(`{"call_id":%q,"offset":%s,"limit":200}`, m[1], m[2])}})
		case last.Role == "tool":
			*reads = append(*reads, text)
			return openaitest.Text("read it")
		}
		t.Errorf("unexpected last message %s", last.Role)
		return openaitest.Text("?")
	}
}

// toolSession runs turns that each run a tool printing 5 MB on a small window: every turn
// completes, no request crosses the window, and the model reads the rest back from the store.
func toolSession(t *testing.T, toolName, args string, turns int) (*enginetest.Harness, *engine.Session, []string) {
	var reads []string
	h := enginetest.New(t, enginetest.Options{
		Server: []openaitest.Option{openaitest.WithContextWindow(fakeWindow), openaitest.WithResponder(toolUser(t, toolName, args, &reads))},
		Configure: func(c *engine.Config) {
			c.ContextWindows = map[string]int{"openai:fake-agent": fakeWindow}
			c.ToolOutputBudget = 8000
			c.Tools.Add(dumpTool{})
		},
	})
	s := h.Create()
	for i := range turns {
		out := h.Run(s, fmt.Sprintf("turn %d: run it", i))
		if !out.Completed {
			t.Fatalf("turn %d: %s %s: %s", i, out.Status, out.ExitReason, out.Error)
		}
	}
	for _, r := range h.Server.Requests() {
		if n := openaitest.RequestTokens(r.Body); n > fakeWindow {
			t.Fatalf("a request of %d tokens crossed the window of %d", n, fakeWindow)
		}
	}
	if len(reads) != turns {
		t.Fatalf("%d reads of the rest for %d turns", len(reads), turns)
	}
	if s.Context().Compressions < 2 {
		t.Fatalf("compactions %d: want at least 2", s.Context().Compressions)
	}
	return h, s, reads
}

// Ten turns (50 MB stored) keep the test light; the 40-turn run is the terminal one below.
func TestToolOutputOverBudgetIsStoredWholeAndReadable(t *testing.T) {
	h, s, reads := toolSession(t, "dump", `{}`, 10)
	rows, err := h.Store.Rows(enginetest.Context(t), s.ID(), store.RowQuery{IncludeArchived: true})
	if err != nil {
		t.Fatal(err)
	}
	whole := 0
	for _, r := range rows {
		if r.Role == "tool" && r.ToolName == "dump" && r.Content == bigOutput {
			whole++
		}
	}
	if whole < 10 {
		t.Fatalf("%d stored dump results hold the whole 5 MB output, want 10", whole)
	}
	// The marker names the offset where the head the model saw ends; the read returns the
	// 200 bytes stored from there.
	off := 8000 * 2 / 3
	want := fmt.Sprintf("of %d of the output of dump", len(bigOutput))
	head, got, ok := strings.Cut(reads[0], "]\n")
	if !ok || !strings.Contains(head, want) || got != bigOutput[off:off+200] {
		t.Fatalf("read_tool_output returned %q, want %q after a header saying %q", clipTo(reads[0], 300), bigOutput[off:off+200], want)
	}
}

// The terminal keeps 50 000 bytes of the 5 MB itself (head and tail); the budget cuts that to
// 8000 for the model.
func TestTerminalPrintingFiveMegabytes(t *testing.T) {
	toolSession(t, "terminal", `{"command":"head -c 5242880 /dev/zero | tr '\\0' x"}`, 40)
}
