package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// listCounter counts the listings of the "always" approvals.
type listCounter struct {
	store.Store
	lists atomic.Int64
}

func (l *listCounter) ListKV(ctx context.Context, prefix string) (map[string][]byte, error) {
	if prefix == "approval/always/" {
		l.lists.Add(1)
	}
	return l.Store.ListKV(ctx, prefix)
}

// toolTurn runs a turn of one terminal call and reports whether it asked for an approval (it
// is denied then) and the tool's result.
func toolTurn(t *testing.T, h *enginetest.Harness, s *engine.Session, command string, answer string) (asked bool) {
	t.Helper()
	h.Server.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"` + command + `"}`}}), openaitest.Text("done"))
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	adm, err := s.Submit(enginetest.Context(t), engine.Prompt{Text: "run " + command})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := sub.Next(enginetest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		if ev.TurnID != adm.TurnID {
			continue
		}
		if q, ok := ev.Data.(engine.Request); ok && ev.Type == engine.EvRequestOpen {
			asked = true
			if err := s.Answer(q.ID, map[string]any{"choice": answer}); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Type == engine.EvMessageComplete {
			break
		}
	}
	if _, err := s.Wait(enginetest.Context(t), adm.TurnID); err != nil {
		t.Fatal(err)
	}
	return asked
}

// The "always" approvals are listed from the store once and then kept while the store's watch
// says nothing changed: a tool call does not read them again. An "always" given through another
// engine on the same store counts at the next call here, and so does one taken away.
func TestAlwaysApprovalsCachedAndCurrent(t *testing.T) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	counted := &listCounter{Store: shared}
	a, b := onStore(t, counted), onStore(t, shared)
	sa, sb := a.Create(), b.Create()

	for i := range 3 {
		if toolTurn(t, a, sa, "ls", engine.ChoiceDeny) {
			t.Fatalf("turn %d: a harmless command asked for approval", i)
		}
	}
	if n := counted.lists.Load(); n != 1 {
		t.Fatalf("three tool calls listed the always approvals %d times, want once", n)
	}

	if !toolTurn(t, b, sb, "git push --force origin one", engine.ChoiceAlways) {
		t.Fatal("a forced push was not asked about")
	}
	if toolTurn(t, a, sa, "git push --force origin two", engine.ChoiceDeny) {
		t.Fatal("approved always through the other engine, the pattern was asked about again here")
	}
	if n := counted.lists.Load(); n != 2 {
		t.Fatalf("the always approvals were listed %d times after one changed, want 2", n)
	}

	kv, err := shared.ListKV(enginetest.Context(t), "approval/always/")
	if err != nil || len(kv) != 1 {
		t.Fatalf("stored always approvals: %v %v, want one", kv, err)
	}
	for k := range kv {
		if err := shared.DeleteKV(enginetest.Context(t), k); err != nil {
			t.Fatal(err)
		}
	}
	if !toolTurn(t, a, sa, "git push --force origin three", engine.ChoiceDeny) {
		t.Fatal("the always approval was taken away from the store, but this engine still ran the call unasked")
	}
}
