package engine_test

import (
	"context"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
)

// gatedCreate holds CreateSession until released, so a test can act while a lazy session's
// record is being written.
type gatedCreate struct {
	store.Store
	entered, release chan struct{}
}

func (g *gatedCreate) CreateSession(ctx context.Context, rec store.Session) (store.Session, error) {
	close(g.entered)
	<-g.release
	return g.Store.CreateSession(ctx, rec)
}

// A mode chosen while a lazy session's first prompt is writing its record is neither lost
// from the live session nor from the store.
func TestApprovalModeSetWhileLazySessionIsStored(t *testing.T) {
	t.Parallel()
	var gate *gatedCreate
	h := newHarness(t, func(c *engine.Config) {
		gate = &gatedCreate{Store: c.Store, entered: make(chan struct{}), release: make(chan struct{})}
		c.Store = gate
	})
	h.srv.Enqueue(openaitest.Text("hello"))
	s, err := h.eng.Create(context.Background(), engine.CreateOptions{Source: "test", Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	type submitted struct {
		adm engine.Admission
		err error
	}
	done := make(chan submitted, 1)
	go func() {
		adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "hi"})
		done <- submitted{adm, err}
	}()
	<-gate.entered
	if err := s.SetApprovalMode(context.Background(), engine.ModeReadOnly); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	sub := <-done
	if sub.err != nil {
		t.Fatal(sub.err)
	}
	if _, err := s.Wait(ctxT(t), sub.adm.TurnID); err != nil {
		t.Fatal(err)
	}
	if got := s.ApprovalMode(); got != engine.ModeReadOnly {
		t.Fatalf("live session's mode %q, want read_only", got)
	}
	rec, err := h.st.GetSession(context.Background(), s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Meta["approval_mode"] != engine.ModeReadOnly {
		t.Fatalf("stored mode %q, want read_only (meta %v)", rec.Meta["approval_mode"], rec.Meta)
	}
}
