package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/tool"
)

// chunkTool returns 10 KB: within the output budget, so each call grows the context by about
// 2500 of the fake model's tokens.
type chunkTool struct{}

func (chunkTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "chunk", Description: "prints 10 KB", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}

func (chunkTool) Call(context.Context, tool.Call, *tool.Env) (tool.Result, error) {
	return tool.Result{Content: strings.Repeat("0123456789abcdef chunk line\n", 10240/28)}, nil
}

type chatBody struct {
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
}

func decode(t *testing.T, r openaitest.Request) (first, last string, lastRole string) {
	var b chatBody
	if err := json.Unmarshal(r.Body, &b); err != nil || len(b.Messages) == 0 {
		t.Errorf("request body: %v", err)
		return "", "", ""
	}
	for _, m := range b.Messages {
		if m.Role == "user" {
			first, _ = m.Content.(string)
			break
		}
	}
	l := b.Messages[len(b.Messages)-1]
	last, _ = l.Content.(string)
	return first, last, l.Role
}

// noWindowCrossed fails when a request the fake model received was over its window.
func noWindowCrossed(t *testing.T, h *enginetest.Harness) {
	t.Helper()
	for _, r := range h.Server.Requests() {
		if n := openaitest.RequestTokens(r.Body); n > fakeWindow {
			t.Fatalf("a request of %d tokens crossed the window of %d", n, fakeWindow)
		}
	}
}

// A delegated sub-agent runs the same turn: its own session compacts when the tool results of
// its one long turn cross the threshold of its window, and it completes.
func TestSubagentCompactsWhenItsWindowIsCrossed(t *testing.T) {
	var childCalls atomic.Int32
	h := enginetest.New(t, enginetest.Options{
		Server: []openaitest.Option{openaitest.WithContextWindow(fakeWindow), openaitest.WithResponder(func(r openaitest.Request) openaitest.Response {
			first, last, role := decode(t, r)
			switch {
			case role == "user" && strings.HasPrefix(last, "Summarise the conversation so far"):
				return openaitest.Text("The sub-agent printed several chunks.")
			case strings.HasPrefix(first, "CHILD GOAL"):
				if childCalls.Add(1) <= 6 {
					return openaitest.ToolCalls(openaitest.Call{Name: "chunk", Args: []string{`{}`}})
				}
				return openaitest.Text("child done")
			case role == "user":
				return openaitest.ToolCalls(openaitest.Call{Name: "delegate_task", Args: []string{`{"goal":"CHILD GOAL: print six chunks"}`}})
			}
			return openaitest.Text("parent done: " + clipTo(last, 40))
		})},
		Configure: func(c *engine.Config) {
			c.ContextWindows = map[string]int{"openai:fake-agent": fakeWindow}
			c.Tools.Add(chunkTool{})
		},
	})
	s := h.Create()
	seq := s.LastSeq()
	out := h.Run(s, "delegate the chunks")
	if !out.Completed || !strings.Contains(out.Text, "child done") {
		t.Fatalf("parent turn: %s %s %q: %s", out.Status, out.ExitReason, out.Text, out.Error)
	}
	evs, _ := s.EventsSince(seq)
	childID := ""
	for _, ev := range evs {
		if si, ok := ev.Data.(engine.SubagentInfo); ok && ev.Type == engine.EvSubagentStart {
			childID = si.ChildID
		}
	}
	if childID == "" {
		t.Fatal("no subagent.start")
	}
	child, err := h.Engine.Open(enginetest.Context(t), childID)
	if err != nil {
		t.Fatal(err)
	}
	if ci := child.Context(); ci.Compressions < 1 || ci.Max != fakeWindow {
		t.Fatalf("child context %+v: want at least one compaction against the window %d", ci, fakeWindow)
	}
	if ci := s.Context(); ci.Compressions != 0 {
		t.Fatalf("the parent compacted (%+v); only the child's window was crossed", ci)
	}
	cevs, _ := child.EventsSince(0)
	kinds := map[string]int{}
	for _, ev := range cevs {
		if si, ok := ev.Data.(engine.StatusInfo); ok && ev.Type == engine.EvStatus && ev.TurnID != "" {
			kinds[si.Kind]++
		}
	}
	if kinds["compacting"] < 1 || kinds["compacted"] < 1 {
		t.Fatalf("child statuses of its turn %v: want compacting and compacted", kinds)
	}
	noWindowCrossed(t, h)
}

// A prompt queued while a turn runs becomes the follow-up turn, which compacts before its
// model call when the queued text crosses the threshold.
func TestQueuedFollowUpCompacts(t *testing.T) {
	h := enginetest.New(t, enginetest.Options{
		Server: []openaitest.Option{openaitest.WithContextWindow(fakeWindow), openaitest.WithResponder(summariser(t))},
		Configure: func(c *engine.Config) {
			c.ContextWindows = map[string]int{"openai:fake-agent": fakeWindow}
			c.Policy.Busy = policy.Defaults{BusyMode: policy.Queue}
		},
	})
	s := h.Create()
	if out := h.Run(s, "first: "+strings.Repeat("a line of the first prompt. ", 200)); !out.Completed {
		t.Fatalf("first turn: %+v", out)
	}
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	g := openaitest.NewGate()
	h.Server.Enqueue(openaitest.Response{Text: []string{"second done"}, FaultAt: 1, Gate: g})
	if _, err := s.Submit(enginetest.Context(t), engine.Prompt{Text: "second: " + strings.Repeat("a line of the second prompt. ", 200)}); err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	adm, err := s.Submit(enginetest.Context(t), engine.Prompt{Text: "queued: " + strings.Repeat("a line of the queued prompt. ", 700)})
	if err != nil || adm.Status != engine.AdmitQueued {
		t.Fatalf("queue: %+v %v", adm, err)
	}
	before := s.Context().Compressions
	g.Release()
	followUp := ""
	var outs []engine.Outcome
	statuses := map[string][]string{} // turn id → status kinds
	for len(outs) < 2 {
		ev, err := sub.Next(enginetest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		switch d := ev.Data.(type) {
		case engine.TurnStart:
			if strings.HasPrefix(d.Prompt, "queued:") {
				followUp = ev.TurnID
			}
		case engine.StatusInfo:
			statuses[ev.TurnID] = append(statuses[ev.TurnID], d.Kind)
		case engine.Outcome:
			outs = append(outs, d)
		}
	}
	for _, o := range outs {
		if !o.Completed {
			t.Fatalf("turn %s: %s %s: %s", o.TurnID, o.Status, o.ExitReason, o.Error)
		}
	}
	if followUp == "" || outs[1].TurnID != followUp {
		t.Fatalf("the queued prompt did not run as the follow-up turn (%q, %+v)", followUp, outs)
	}
	if got := strings.Join(statuses[followUp], ","); !strings.Contains(got, "compacting") || !strings.Contains(got, "compacted") {
		t.Fatalf("follow-up turn statuses %q: want compacting then compacted", got)
	}
	if s.Context().Compressions <= before {
		t.Fatalf("compressions %d, %d before the follow-up", s.Context().Compressions, before)
	}
	noWindowCrossed(t, h)
}

// compactPolicy is a compact hook written in Go: it records its inputs and answers with fn.
type compactPolicy struct {
	mu  sync.Mutex
	ins []policy.CompactInput
	fn  func(policy.CompactInput) (policy.CompactDecision, error)
}

func (p *compactPolicy) Compact(_ context.Context, in policy.CompactInput) (policy.CompactDecision, error) {
	p.mu.Lock()
	p.ins = append(p.ins, in)
	p.mu.Unlock()
	return p.fn(in)
}

func (p *compactPolicy) inputs() []policy.CompactInput {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]policy.CompactInput(nil), p.ins...)
}

// compactHarness runs on the small window with the compact hook p; summaries are asked with
// prompts the responder records.
func compactHarness(t *testing.T, p *compactPolicy, threshold float64, prompts *[]string) (*enginetest.Harness, *engine.Session) {
	var mu sync.Mutex
	h := enginetest.New(t, enginetest.Options{
		Server: []openaitest.Option{openaitest.WithContextWindow(fakeWindow), openaitest.WithResponder(func(r openaitest.Request) openaitest.Response {
			_, last, role := decode(t, r)
			if role == "user" && (strings.HasPrefix(last, "Summarise the conversation so far") || strings.HasPrefix(last, "CUSTOM")) {
				mu.Lock()
				*prompts = append(*prompts, last)
				mu.Unlock()
				return openaitest.Text("summary")
			}
			return openaitest.Text("ack")
		})},
		Configure: func(c *engine.Config) {
			c.ContextWindows = map[string]int{"openai:fake-agent": fakeWindow}
			c.CompactThreshold = threshold
			c.Policy.Compact = p
		},
	})
	return h, h.Create()
}

// The hook sees every model call's context (reason threshold) and may lower the threshold
// and replace the summarisation prompt; its decision is recorded as policy.decision.
func TestCompactHookOverridesThresholdAndPrompt(t *testing.T) {
	p := &compactPolicy{fn: func(in policy.CompactInput) (policy.CompactDecision, error) {
		return policy.CompactDecision{Compact: in.Over(0.3), Threshold: 0.3, Prompt: "CUSTOM summary prompt"}, nil
	}}
	var prompts []string
	h, s := compactHarness(t, p, 0.9, &prompts)
	seq := s.LastSeq()
	for i := range 6 {
		if out := h.Run(s, fmt.Sprintf("turn %d: %s", i, strings.Repeat("words of a middling prompt. ", 60))); !out.Completed {
			t.Fatalf("turn %d: %+v", i, out)
		}
	}
	ins := p.inputs()
	if len(ins) < 6 {
		t.Fatalf("%d hook calls for 6 turns", len(ins))
	}
	for _, in := range ins {
		if in.SessionID != s.ID() || in.Model != "openai:fake-agent" || in.ContextMax != fakeWindow || in.ContextUsed <= 0 ||
			in.Threshold != 0.9 || in.Reason != policy.CompactThreshold || in.Percent != (100*in.ContextUsed+fakeWindow/2)/fakeWindow {
			t.Fatalf("hook input %+v", in)
		}
		if float64(in.ContextUsed) > 0.9*fakeWindow {
			t.Fatalf("context %d reached the configured threshold: the hook's 0.3 was not applied", in.ContextUsed)
		}
	}
	if s.Context().Compressions < 1 || len(prompts) < 1 {
		t.Fatalf("compressions %d, summary requests %d: the hook's threshold 0.3 never compacted", s.Context().Compressions, len(prompts))
	}
	for _, pr := range prompts {
		if !strings.HasPrefix(pr, "CUSTOM summary prompt") {
			t.Fatalf("summary asked with %q, want the hook's prompt", clipTo(pr, 60))
		}
	}
	evs, _ := s.EventsSince(seq)
	decisions := 0
	for _, ev := range evs {
		if d, ok := ev.Data.(engine.PolicyDecision); ok && d.Hook == "compact" {
			decisions++
			if d.Decision != "compact" || !strings.Contains(d.Reason, "threshold 0.3") || d.Error != "" {
				t.Fatalf("policy.decision %+v", d)
			}
		}
	}
	if decisions < 1 {
		t.Fatal("no policy.decision for the hook's compaction")
	}
}

// A failing hook falls back to the configured rule (a policy.decision with the error); a hook
// that refuses to compact an overflowing request fails the turn with context_exceeded.
func TestCompactHookFailsClosedAndMayRefuse(t *testing.T) {
	p := &compactPolicy{fn: func(policy.CompactInput) (policy.CompactDecision, error) {
		return policy.CompactDecision{}, errors.New("policy.js:3: compact hook: boom")
	}}
	var prompts []string
	h, s := compactHarness(t, p, 0, &prompts)
	seq := s.LastSeq()
	for i := range 12 {
		if out := h.Run(s, fmt.Sprintf("turn %d: %s", i, strings.Repeat("words of a larger prompt. ", 220))); !out.Completed {
			t.Fatalf("turn %d: %+v", i, out)
		}
	}
	if s.Context().Compressions < 1 || len(prompts) < 1 || !strings.HasPrefix(prompts[0], "Summarise the conversation so far") {
		t.Fatalf("compressions %d, prompts %d: the configured rule did not take over", s.Context().Compressions, len(prompts))
	}
	evs, _ := s.EventsSince(seq)
	failed := 0
	for _, ev := range evs {
		if d, ok := ev.Data.(engine.PolicyDecision); ok && d.Hook == "compact" && strings.Contains(d.Error, "boom") {
			failed++
		}
	}
	if failed < 12 {
		t.Fatalf("%d policy.decision events with the hook's error for at least 12 calls", failed)
	}
	noWindowCrossed(t, h)

	// Automatic compaction off and a hook that never compacts: the overflow is refused by the
	// provider and the turn fails saying so.
	never := &compactPolicy{fn: func(in policy.CompactInput) (policy.CompactDecision, error) {
		return policy.CompactDecision{Threshold: in.Threshold}, nil
	}}
	h2, s2 := compactHarness(t, never, -1, &prompts)
	var out engine.Outcome
	for i := range 20 {
		out = h2.Run(s2, fmt.Sprintf("turn %d: %s", i, strings.Repeat("words of a larger prompt. ", 220)))
		if !out.Completed {
			break
		}
	}
	if out.Completed || out.ExitReason != "context_exceeded" || !strings.Contains(out.Error, "declined to compact") {
		t.Fatalf("last turn %s %s: %s; want context_exceeded declined by the policy", out.Status, out.ExitReason, out.Error)
	}
	last := never.inputs()[len(never.inputs())-1]
	if last.Reason != policy.CompactOverflow {
		t.Fatalf("last hook input %+v: want reason overflow", last)
	}
}
