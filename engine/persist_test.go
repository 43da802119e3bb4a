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

func (f *failingStore) AppendRowsUsage(ctx context.Context, id string, fence store.Fence, rows []store.Row, u store.Usage) ([]store.Row, store.Session, error) {
	if err := f.check("AppendRowsUsage"); err != nil {
		return nil, store.Session{}, err
	}
	return f.Store.AppendRowsUsage(ctx, id, fence, rows, u)
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
		fs.arm(only("AppendRowsUsage", 1)) // the user row passes; the answer and the usage fail
		out := h.run(s, "hi")
		wantStoreFailure(t, s, out)
		if out.Text != "" || !strings.HasPrefix(out.Error, "save transcript: ") {
			t.Fatalf("outcome %+v, want no answer text and the transcript's write named", out)
		}
		// One write: neither the answer's row nor the turn's usage is stored.
		if rows := mustRows(t, s); len(rows) != 1 || rows[0].Role != "user" {
			t.Fatalf("rows %+v, want the user row only", rows)
		}
		if u := s.Record().Usage; u.APICalls != 0 || u.InputTokens != 0 {
			t.Fatalf("usage %+v stored with the answer's write refused", u)
		}
	})
	t.Run("usage", func(t *testing.T) {
		h, fs := newFailingHarness(t)
		s := h.create()
		h.srv.Enqueue(openaitest.HTTPError(400, openaitest.APIError{Message: "bad request"}))
		fs.arm(only("AppendRowsUsage", 1)) // a turn with no row to end with: the usage only
		out := h.run(s, "hi")
		wantStoreFailure(t, s, out)
		if !strings.HasPrefix(out.Error, "save usage: ") {
			t.Fatalf("outcome %+v, want the usage's write named", out)
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
	fs.arm(only("AppendRows", 1)) // the queued prompt's row fails (the first turn's answer is stored with its usage)
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

// countingStore counts the transcript and session-record writes made through it.
type countingStore struct {
	store.Store
	mu     sync.Mutex
	counts map[string]int
}

func (c *countingStore) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[op]++
}

func (c *countingStore) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = nil
	return out
}

func (c *countingStore) AppendRows(ctx context.Context, id string, f store.Fence, rows []store.Row) ([]store.Row, error) {
	c.count("AppendRows")
	return c.Store.AppendRows(ctx, id, f, rows)
}

func (c *countingStore) AppendRowsUsage(ctx context.Context, id string, f store.Fence, rows []store.Row, u store.Usage) ([]store.Row, store.Session, error) {
	c.count("AppendRowsUsage")
	return c.Store.AppendRowsUsage(ctx, id, f, rows, u)
}

func (c *countingStore) UpdateSession(ctx context.Context, id string, ifVersion uint64, fn func(*store.Session) error) (store.Session, error) {
	c.count("UpdateSession")
	return c.Store.UpdateSession(ctx, id, ifVersion, fn)
}

// TestWarmTurnWrites: a warm text turn writes its transcript and usage in two writes, the
// prompt's row as it is admitted and the answer's row with the turn's usage as it ends (over
// the home's store process each write is a round trip); the usage is stored with the answer.
func TestWarmTurnWrites(t *testing.T) {
	t.Parallel()
	var cs *countingStore
	h := newHarness(t, func(c *engine.Config) {
		cs = &countingStore{Store: c.Store}
		c.Store = cs
	})
	s := h.create()
	for i := range 3 {
		h.srv.Enqueue(openaitest.Text("answer"))
		cs.take()
		out := h.run(s, "hi")
		if out.Status != engine.StatusCompleted {
			t.Fatalf("turn %d: %+v", i, out)
		}
		if got := cs.take(); got["AppendRows"] != 1 || got["AppendRowsUsage"] != 1 || got["UpdateSession"] != 0 {
			t.Fatalf("turn %d wrote %v, want one AppendRows (the prompt) and one AppendRowsUsage (the answer and usage)", i, got)
		}
	}
	if u := s.Record().Usage; u.APICalls != 3 {
		t.Fatalf("usage %+v, want 3 API calls over the three turns", u)
	}
	if rows := mustRows(t, s); len(rows) != 6 || rows[5].Role != "assistant" || rows[5].Content != "answer" {
		t.Fatalf("rows %+v", rows)
	}
}
