package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
)

// eventFailingStore is a failingStore whose event appends can be failed too.
type eventFailingStore struct{ *failingStore }

func (f eventFailingStore) AppendEvents(ctx context.Context, sid string, fence store.Fence, evs []store.StoredEvent) error {
	if err := f.check("AppendEvents"); err != nil {
		return err
	}
	return f.Store.AppendEvents(ctx, sid, fence, evs)
}

// dangerousMarkerCall is a terminal call the approval policy asks about, which leaves a
// marker file in dir when it runs.
func dangerousMarkerCall(dir string) openaitest.Response {
	cmd := `rm -rf ./scratch; echo ran >> ` + filepath.Join(dir, "marker")
	return openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"` + cmd + `"}`}})
}

// wantNotRun fails when the marker call ran.
func wantNotRun(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "marker")); err == nil {
		t.Fatal("the call ran")
	}
}

// A call that must be asked about is not asked about, and does not run, when its checkpoint
// (the assistant's call, stored so another process could adopt the turn at the approval)
// cannot be stored: the call is blocked and the turn fails on the store.
func TestApprovalCheckpointNotStored(t *testing.T) {
	t.Parallel()
	h, fs := newFailingHarness(t)
	s := h.create()
	h.srv.Enqueue(dangerousMarkerCall(h.cwd), openaitest.Text("after"))
	fs.arm(only("AppendRows", 2)) // the user row passes; the checkpoint fails
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	out := h.run(s, "go")
	wantStoreFailure(t, s, out)
	wantNotRun(t, h.cwd)
	var blocked bool
	for _, ev := range mustEvents(t, s) {
		if ev.TurnID != out.TurnID {
			continue
		}
		switch d := ev.Data.(type) {
		case engine.Request:
			t.Fatalf("a request was opened for a call whose checkpoint was not stored: %+v", d)
		case engine.ToolComplete:
			blocked = d.Blocked || strings.Contains(d.Result.Content, "could not be recorded before asking for approval")
			if !strings.Contains(d.Result.Content, "could not be recorded before asking for approval") {
				t.Fatalf("tool result %q, want the checkpoint's failure named", d.Result.Content)
			}
		}
	}
	if !blocked {
		t.Fatal("no tool.completed for the blocked call")
	}
}

// An approval whose answer cannot be stored (the session's event log refuses it) does not run
// the call: a process that took the session over would find it still waiting and ask again.
// The call is blocked and the turn fails on the store.
func TestApprovalAnswerNotStored(t *testing.T) {
	t.Parallel()
	var fs eventFailingStore
	h := newHarness(t, func(c *engine.Config) {
		fs = eventFailingStore{&failingStore{Store: c.Store}}
		c.Store = fs
	})
	s := h.create()
	h.srv.Enqueue(dangerousMarkerCall(h.cwd), openaitest.Text("after"))
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	req := next(t, sub, engine.EvRequestOpen).Data.(engine.Request)
	fs.arm(func(op string, _ int) bool { return op == "AppendEvents" })
	if err := s.Answer(req.ID, map[string]any{"choice": engine.ChoiceOnce}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Wait(ctxT(t), adm.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != engine.StatusFailed || out.ExitReason != "store_error" || !strings.Contains(out.Error, "record the approval") {
		t.Fatalf("outcome %+v, want failed with store_error naming the approval's record", out)
	}
	wantNotRun(t, h.cwd)
	rows := mustRows(t, s)
	if last := rows[len(rows)-1]; last.Role != "tool" || !strings.Contains(last.Content, "the approval could not be recorded") {
		t.Fatalf("last row %+v, want the blocked call's result", last)
	}
}

// heldRows holds the next history read, once armed, until its context ends.
type heldRows struct {
	store.Store
	armed   atomic.Bool
	entered chan struct{}
}

func (h *heldRows) Rows(ctx context.Context, sid string, q store.RowQuery) ([]store.Row, error) {
	if h.armed.CompareAndSwap(true, false) {
		close(h.entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.Store.Rows(ctx, sid, q)
}

// A turn interrupted while it reads its history ends cancelled, as any interrupted turn: not
// failed with a store error (over HTTP, a 502) because the read was cut.
func TestInterruptDuringHistoryRead(t *testing.T) {
	t.Parallel()
	var hr *heldRows
	h := newHarness(t, func(c *engine.Config) {
		hr = &heldRows{Store: c.Store, entered: make(chan struct{})}
		c.Store = hr
	})
	s := h.create()
	h.srv.Enqueue(openaitest.Text("never asked"))
	hr.armed.Store(true)
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	<-hr.entered
	s.Interrupt("user")
	out, err := s.Wait(ctxT(t), adm.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != engine.StatusCancelled || out.ExitReason == "store_error" || !out.Interrupted {
		t.Fatalf("outcome %+v, want cancelled by the interrupt", out)
	}
}
