package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
)

var errInjected = errors.New("injected store failure")

// failingStore fails the operations its policy picks; the others pass through. The policy
// sees the operation's name and how many times it has been called (from 1) since armed.
type failingStore struct {
	store.Store
	mu     sync.Mutex
	armed  bool
	counts map[string]int
	fail   func(op string, n int) bool
}

func (f *failingStore) check(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return nil
	}
	if f.counts == nil {
		f.counts = map[string]int{}
	}
	f.counts[op]++
	if f.fail(op, f.counts[op]) {
		return fmt.Errorf("%s: %w", op, errInjected)
	}
	return nil
}

// arm starts failing from now on (setup writes before it pass).
func (f *failingStore) arm(fail func(op string, n int) bool) {
	f.mu.Lock()
	f.armed, f.fail = true, fail
	f.mu.Unlock()
}

func (f *failingStore) AppendRows(ctx context.Context, id string, fence store.Fence, rows []store.Row) ([]store.Row, error) {
	if err := f.check("AppendRows"); err != nil {
		return nil, err
	}
	return f.Store.AppendRows(ctx, id, fence, rows)
}

func (f *failingStore) UpdateSession(ctx context.Context, id string, ifVersion uint64, fn func(*store.Session) error) (store.Session, error) {
	if err := f.check("UpdateSession"); err != nil {
		return store.Session{}, err
	}
	return f.Store.UpdateSession(ctx, id, ifVersion, fn)
}

func (f *failingStore) PutKV(ctx context.Context, key string, value []byte) error {
	if err := f.check("PutKV"); err != nil {
		return err
	}
	return f.Store.PutKV(ctx, key, value)
}

func newFailingHarness(t *testing.T) (*harness, *failingStore) {
	var fs *failingStore
	h := newHarness(t, func(c *engine.Config) {
		fs = &failingStore{Store: c.Store}
		c.Store = fs
	})
	return h, fs
}

// only fails the nth call of op.
func only(op string, nth int) func(string, int) bool {
	return func(o string, n int) bool { return o == op && n == nth }
}

// wantStoreFailure asserts a turn failed on the injected write: a failed outcome with the
// store_error reason, and an error event of the turn that names the failure.
func wantStoreFailure(t *testing.T, s *engine.Session, out engine.Outcome) {
	t.Helper()
	if out.Status != engine.StatusFailed || out.ExitReason != "store_error" || !strings.Contains(out.Error, errInjected.Error()) || out.Completed {
		t.Fatalf("outcome %+v, want failed with store_error", out)
	}
	for _, ev := range mustEvents(t, s) {
		if ev.Type == engine.EvError && ev.TurnID == out.TurnID && strings.Contains(fmt.Sprintf("%+v", ev.Data), errInjected.Error()) {
			return
		}
	}
	t.Fatalf("no error event for turn %s naming the store failure", out.TurnID)
}

func TestPersistFailureFailsTheTurn(t *testing.T) {
	t.Parallel()
	t.Run("answer row", func(t *testing.T) {
		h, fs := newFailingHarness(t)
		s := h.create()
		h.srv.Enqueue(openaitest.Text("hello"))
		fs.arm(only("AppendRows", 2)) // the user row passes, the answer fails
		wantStoreFailure(t, s, h.run(s, "hi"))
	})
	t.Run("usage", func(t *testing.T) {
		h, fs := newFailingHarness(t)
		s := h.create()
		h.srv.Enqueue(openaitest.Text("hello"))
		fs.arm(only("UpdateSession", 1))
		out := h.run(s, "hi")
		wantStoreFailure(t, s, out)
		if out.Text != "hello" {
			t.Fatalf("the answer's text is kept: %+v", out)
		}
	})
	t.Run("partial answer after a provider failure", func(t *testing.T) {
		h, fs := newFailingHarness(t)
		s := h.create()
		h.srv.Enqueue(openaitest.Response{Text: []string{"partial ", "answer"}, FaultAt: 2, Fault: openaitest.FaultDisconnect})
		fs.arm(only("AppendRows", 2))
		wantStoreFailure(t, s, h.run(s, "hi"))
	})
	t.Run("always approval", func(t *testing.T) {
		h, fs := newFailingHarness(t)
		s := h.create()
		h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"git push --force origin x"}`}}), openaitest.Text("ok"))
		fs.arm(only("PutKV", 2)) // the first is the held marker of the session's lease
		sub := s.Subscribe(s.LastSeq())
		defer sub.Close()
		adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
		if err != nil {
			t.Fatal(err)
		}
		req := next(t, sub, engine.EvRequestOpen).Data.(engine.Request)
		if err := s.Answer(req.ID, map[string]any{"choice": engine.ChoiceAlways}); err != nil {
			t.Fatal(err)
		}
		out, err := s.Wait(ctxT(t), adm.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		wantStoreFailure(t, s, out)
		if h.srv.Pending() != 1 {
			t.Fatalf("the turn went on after the approval was not saved (%d responses left)", h.srv.Pending())
		}
	})
}

// Outside a turn, a verb returns the failed write to its caller.
func TestCompressReturnsUsageWriteFailure(t *testing.T) {
	t.Parallel()
	h, fs := newFailingHarness(t)
	s := h.create()
	for _, a := range []string{"A1", "A2", "A3"} {
		h.srv.Enqueue(openaitest.Text(a))
		h.run(s, "Q"+a[1:])
	}
	h.srv.Enqueue(openaitest.Text("summary"))
	fs.arm(only("UpdateSession", 1))
	if _, err := s.Compress(ctxT(t), ""); !errors.Is(err, errInjected) {
		t.Fatalf("compress: %v, want the usage write's failure", err)
	}
}

// TestRunQueuedPromptNotSaved: a queued prompt whose user row cannot be written never starts;
// its Follow ends with the failed outcome the turn was given instead of waiting forever.
func TestRunQueuedPromptNotSaved(t *testing.T) {
	t.Parallel()
	var fs *failingStore
	h := newHarness(t, func(c *engine.Config) {
		fs = &failingStore{Store: c.Store}
		c.Store = fs
		c.Policy.Busy = policy.Defaults{BusyMode: policy.Queue}
	})
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g})
	s := h.create()
	if _, err := s.Submit(ctxT(t), engine.Prompt{Text: "a"}); err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "b"})
	if err != nil || adm.Status != engine.AdmitQueued {
		t.Fatalf("queue: %+v %v", adm, err)
	}
	defer f.Close()
	fs.arm(only("AppendRows", 2)) // the first turn's answer passes, the queued prompt's row fails
	g.Release()
	var evs []engine.Event
	for ev, err := range f.Events(ctxT(t)) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	last := evs[len(evs)-1]
	out, ok := last.Data.(engine.Outcome)
	if last.Type != engine.EvMessageComplete || !ok || out.Status != engine.StatusFailed || out.ExitReason != "store_error" || out.TurnID == "" {
		t.Fatalf("last event %s %+v, want the failed outcome of the turn that never started", last.Type, last.Data)
	}
}
