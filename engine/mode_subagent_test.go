package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A sub-agent works for its delegating session's client, so that session's approval mode
// governs its tool calls too: under accept_edits, a sub-agent's edit is not asked about.
func TestApprovalModeCoversSubagents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.Policy.Approver = askButReads{} })
	s := h.create()
	if err := s.SetApprovalMode(context.Background(), engine.ModeAcceptEdits); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "d", Name: "delegate_task", Args: []string{`{"goal":"write the notes"}`}}),
		openaitest.ToolCalls(openaitest.Call{ID: "w", Name: "write_file", Args: []string{`{"path":"notes.txt","content":"by the sub-agent\n"}`}}),
		openaitest.Text("written"),
		openaitest.Text("the sub-agent wrote the notes"),
	)
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "delegate the notes"})
	if err != nil {
		t.Fatal(err)
	}
	// delegate_task is not an edit: accept_edits leaves the policy's question standing.
	req := next(t, sub, engine.EvRequestOpen).Data.(engine.Request)
	if req.Payload["tool"] != "delegate_task" {
		t.Fatalf("first request: %+v", req)
	}
	if err := s.Answer(req.ID, map[string]any{"choice": engine.ChoiceOnce}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := sub.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == engine.EvRequestOpen {
			q := ev.Data.(engine.Request)
			_ = s.Answer(q.ID, map[string]any{"choice": engine.ChoiceDeny})
			t.Fatalf("the sub-agent's edit was asked about under accept_edits: %+v", q.Payload)
		}
		if ev.Type == engine.EvMessageComplete && ev.TurnID == adm.TurnID {
			break
		}
	}
	if b, _ := os.ReadFile(filepath.Join(h.cwd, "notes.txt")); string(b) != "by the sub-agent\n" {
		t.Fatalf("notes.txt = %q", b)
	}
}
