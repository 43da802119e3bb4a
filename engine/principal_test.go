package engine_test

import (
	"context"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// TestPrincipalInherited: a session records its principal durably, and its branches and
// sub-agents belong to the same principal.
func TestPrincipalInherited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "delegate_task", Args: []string{`{"goal":"count the files"}`}}),
		openaitest.Text("there are 0 files"),
		openaitest.Text("done"),
	)
	s, err := h.eng.Create(context.Background(), engine.CreateOptions{Source: "test", Principal: "key_owner"})
	if err != nil {
		t.Fatal(err)
	}
	if out := h.run(s, "delegate it"); out.Status != engine.StatusCompleted {
		t.Fatalf("outcome: %+v", out)
	}
	rec, err := h.st.GetSession(ctxT(t), s.ID())
	if err != nil || rec.Principal != "key_owner" {
		t.Fatalf("stored %+v %v", rec, err)
	}
	tree := h.eng.SpawnTree(s.ID())
	if len(tree.Children) != 1 {
		t.Fatalf("spawn tree %+v", tree)
	}
	child, err := h.st.GetSession(ctxT(t), tree.Children[0].SessionID)
	if err != nil || child.Principal != "key_owner" {
		t.Fatalf("sub-agent %+v %v", child, err)
	}
	b, err := h.eng.Branch(ctxT(t), s.ID(), engine.BranchOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Record().Principal != "key_owner" {
		t.Fatalf("branch %+v", b.Record())
	}
	p := engine.Principal{ID: "key_other"}
	if p.Sees("key_owner") || !p.Sees("key_other") || engine.LocalOwner.Sees("key_owner") || !engine.LocalOwner.Sees("") {
		t.Fatal("Sees")
	}
	if !(engine.Principal{ID: "key_admin", Admin: true}).Sees("key_owner") {
		t.Fatal("the admin does not see")
	}
}
