package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
)

// askButReads allows read_file and asks for every other tool.
type askButReads struct{}

func (askButReads) Approve(_ context.Context, in policy.ApprovalInput) (policy.ApprovalDecision, error) {
	if in.Tool == "read_file" {
		return policy.ApprovalDecision{Decision: policy.Allow}, nil
	}
	return policy.ApprovalDecision{Decision: policy.Ask, Reason: "ask"}, nil
}

// TestApprovalModes: under a policy that asks for everything but reads, default asks, accept_edits
// answers edits itself but still asks for commands, and read_only denies every tool that can
// change something while reads run. The mode is stored with the session.
func TestApprovalModes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.Policy.Approver = askButReads{} })
	s := h.create()
	if s.ApprovalMode() != engine.ModeDefault {
		t.Fatalf("initial mode %q", s.ApprovalMode())
	}
	if err := s.SetApprovalMode(context.Background(), "yolo"); !errors.Is(err, engine.ErrUnknownMode) {
		t.Fatalf("unknown mode: %v", err)
	}
	writeFile(t, filepath.Join(h.cwd, "notes.txt"), "old\n")

	// accept_edits: the write runs without a request; the command is still asked (and times
	// out into a deny, since nobody answers here).
	if err := s.SetApprovalMode(context.Background(), engine.ModeAcceptEdits); err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "w", Name: "write_file", Args: []string{`{"path":"notes.txt","content":"new\n"}`}}), openaitest.Text("written"))
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "edit"})
	if err != nil {
		t.Fatal(err)
	}
	tc := next(t, sub, engine.EvToolComplete).Data.(engine.ToolComplete)
	if tc.Blocked || tc.Result.IsError {
		t.Fatalf("accept_edits: write blocked: %+v", tc.Result)
	}
	if _, err := s.Wait(ctxT(t), adm.TurnID); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(h.cwd, "notes.txt")); string(b) != "new\n" {
		t.Fatalf("file %q", b)
	}
	if got := s.OpenRequests(); len(got) != 0 {
		t.Fatalf("requests open: %v", got)
	}
	h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "c", Name: "terminal", Args: []string{`{"command":"echo hi"}`}}), openaitest.Text("asked"))
	sub2 := s.Subscribe(s.LastSeq())
	defer sub2.Close()
	adm, err = s.Submit(ctxT(t), engine.Prompt{Text: "run"})
	if err != nil {
		t.Fatal(err)
	}
	req := next(t, sub2, engine.EvRequestOpen).Data.(engine.Request)
	if req.Kind != engine.KindApproval {
		t.Fatalf("accept_edits must still ask for commands: %+v", req)
	}
	if err := s.Answer(req.ID, map[string]any{"choice": engine.ChoiceOnce}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(ctxT(t), adm.TurnID); err != nil {
		t.Fatal(err)
	}

	// read_only, after a reload from the store: reads run, writes and commands are denied
	// without a request.
	if err := s.SetApprovalMode(context.Background(), engine.ModeReadOnly); err != nil {
		t.Fatal(err)
	}
	rec, err := h.st.GetSession(context.Background(), s.ID())
	if err != nil || rec.Meta["approval_mode"] != engine.ModeReadOnly {
		t.Fatalf("mode not stored: %v %v", rec.Meta, err)
	}
	h.srv.Enqueue(openaitest.ToolCalls(
		openaitest.Call{ID: "r", Name: "read_file", Args: []string{`{"path":"notes.txt"}`}},
		openaitest.Call{ID: "w2", Name: "write_file", Args: []string{`{"path":"notes.txt","content":"gone\n"}`}},
		openaitest.Call{ID: "t2", Name: "terminal", Args: []string{`{"command":"touch made"}`}},
	), openaitest.Text("read only"))
	h.run(s, "try")
	byID := map[string]store.Row{}
	for _, r := range mustRows(t, s) {
		if r.Role == "tool" {
			byID[r.ToolCallID] = r
		}
	}
	if r := byID["r"]; !strings.Contains(r.Content, "new") {
		t.Fatalf("read_only: read result %q", r.Content)
	}
	for _, id := range []string{"w2", "t2"} {
		if r := byID[id]; !strings.Contains(r.Content, "read-only mode") {
			t.Fatalf("read_only: %s result %q", id, r.Content)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(h.cwd, "notes.txt")); string(b) != "new\n" {
		t.Fatalf("read_only wrote the file: %q", b)
	}
	if _, err := os.Stat(filepath.Join(h.cwd, "made")); err == nil {
		t.Fatal("read_only ran the command")
	}
	if got := s.OpenRequests(); len(got) != 0 {
		t.Fatalf("read_only asked: %v", got)
	}
}
