package runs

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// laneCalls records what a lane asked of the surface; a callback a test does not set fails it.
type laneCalls struct {
	mu           sync.Mutex
	start, stops []string
}

func (c *laneCalls) add(to *[]string, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*to = append(*to, id)
}

func (c *laneCalls) get(of *[]string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), *of...)
}

// lanes starts the lanes of l; they are stopped (and waited for) when the test ends.
func lanes(t *testing.T, l *Ledger, h LaneFuncs) (*Lanes, context.CancelFunc) {
	t.Helper()
	unexpected := func(what string) func(Record) {
		return func(rec Record) { t.Errorf("unexpected %s of %s (%s)", what, rec.RunID, rec.Status) }
	}
	if h.Start == nil {
		h.Start = unexpected("start")
	}
	if h.Watch == nil {
		h.Watch = unexpected("watch")
	}
	if h.Local == nil {
		h.Local = func(rec Record) (bool, <-chan struct{}) { unexpected("local")(rec); return false, nil }
	}
	if h.StopQueued == nil {
		h.StopQueued = func(rec Record) bool { unexpected("stop")(rec); return false }
	}
	ctx, cancel := context.WithCancel(context.Background())
	ls := NewLanes(ctx, l, slog.New(slog.NewTextHandler(io.Discard, nil)), h)
	t.Cleanup(func() { cancel(); ls.Wait() })
	return ls, cancel
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func admit(t *testing.T, l *Ledger, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := l.Admit(context.Background(), newRec(id, "s1")); err != nil {
			t.Fatal(err)
		}
	}
}

// A session's runs start one after another in admission order, each once; the worker exits
// when the FIFO is empty and a later admission starts a new one.
func TestLanesStartInOrder(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		l := open(t, st)
		var calls laneCalls
		started := make(chan string, 10)
		ls, cancel := lanes(t, l, LaneFuncs{Start: func(rec Record) {
			calls.add(&calls.start, rec.RunID)
			if _, err := l.Claim(ctx, rec.RunID); err != nil {
				t.Error(err)
			}
			if _, err := l.Settle(ctx, rec.RunID, Completed, nil, false); err != nil {
				t.Error(err)
			}
			started <- rec.RunID
		}})
		admit(t, l, "run_a", "run_b", "run_c")
		ls.Kick("s1")
		for range 3 {
			recv(t, started, "a start")
		}
		admit(t, l, "run_d")
		ls.Kick("s1")
		recv(t, started, "the start of a run admitted later")
		cancel()
		ls.Wait()
		if got := calls.get(&calls.start); len(got) != 4 || got[0] != "run_a" || got[1] != "run_b" || got[2] != "run_c" || got[3] != "run_d" {
			t.Fatalf("started %v, want run_a..run_d in order, each once", got)
		}
		if ls.Busy("s1") {
			t.Fatal("a stopped lane is still busy")
		}
		if head, ok, err := l.Head(ctx, "s1"); err != nil || ok {
			t.Fatalf("FIFO head %s, %v: want none", head.RunID, err)
		}
	})
}

// A head another live process admitted or runs is watched, never started here; once it
// settles there, a wake-up moves the lane on.
func TestLanesWatchAnotherProcess(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		other, here := open(t, st), open(t, st)
		watched := make(chan Record, 10)
		ls, _ := lanes(t, here, LaneFuncs{Watch: func(rec Record) { watched <- rec }})
		admit(t, other, "run_x")
		ls.Kick("s1")
		if rec := recv(t, watched, "the queued head watched"); rec.RunID != "run_x" || rec.Status != Queued {
			t.Fatalf("watched %s %s, want run_x queued", rec.RunID, rec.Status)
		}
		if _, err := other.Claim(ctx, "run_x"); err != nil {
			t.Fatal(err)
		}
		ls.Wake("s1")
		for {
			rec := recv(t, watched, "the running head watched")
			if rec.Status == Running {
				if rec.Process != other.Process() {
					t.Fatalf("running under %s, want the other process", rec.Process)
				}
				break
			}
		}
		if !ls.Busy("s1") {
			t.Fatal("a lane with an unsettled head is not busy")
		}
		if _, err := other.Settle(ctx, "run_x", Completed, nil, false); err != nil {
			t.Fatal(err)
		}
		ls.Wake("s1")
		// The worker exits once it finds the FIFO empty.
		deadline := time.Now().Add(30 * time.Second)
		for ls.Busy("s1") {
			if time.Now().After(deadline) {
				t.Fatal("the lane did not exit after its last run settled")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// A head running here whose settlement did not reach the FIFO is handed to Local, which
// writes it again; the lane then moves on.
func TestLanesLocalSettlesAgain(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		l := open(t, st)
		admit(t, l, "run_l")
		if _, err := l.Claim(ctx, "run_l"); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		local := make(chan Record, 10)
		ls, _ := lanes(t, l, LaneFuncs{Local: func(rec Record) (bool, <-chan struct{}) {
			select {
			case <-done:
			default:
				local <- rec
				return false, done // still running
			}
			_, err := l.Settle(ctx, rec.RunID, Completed, nil, false)
			local <- rec
			return err == nil, nil
		}})
		ls.Kick("s1")
		if rec := recv(t, local, "the running head"); rec.RunID != "run_l" || rec.Status != Running {
			t.Fatalf("local %s %s", rec.RunID, rec.Status)
		}
		close(done) // the run ends: the worker looks again
		recv(t, local, "the ended head")
		deadline := time.Now().Add(30 * time.Second)
		for ls.Busy("s1") {
			if time.Now().After(deadline) {
				t.Fatal("the lane did not move on after the settlement was written again")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if rec, err := l.Get(ctx, "run_l"); err != nil || rec.Status != Completed {
			t.Fatalf("record %s, %v: want completed", rec.Status, err)
		}
	})
}

// When the lanes stop, the queued runs this process admitted are settled through StopQueued,
// in order, after the running head; Wait returns once every worker is gone.
func TestLanesStopSettlesQueued(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		l := open(t, st)
		var calls laneCalls
		running := make(chan struct{})
		lctx, cancel := context.WithCancel(context.Background())
		ls := NewLanes(lctx, l, slog.New(slog.NewTextHandler(io.Discard, nil)), LaneFuncs{
			Start: func(rec Record) {
				calls.add(&calls.start, rec.RunID)
				if _, err := l.Claim(ctx, rec.RunID); err != nil {
					t.Error(err)
				}
				close(running)
				<-lctx.Done() // runs until the process stops
				if _, err := l.Settle(ctx, rec.RunID, Interrupted, nil, false); err != nil {
					t.Error(err)
				}
			},
			StopQueued: func(rec Record) bool {
				calls.add(&calls.stops, rec.RunID)
				_, err := l.Settle(ctx, rec.RunID, Interrupted, nil, true)
				return err == nil
			},
			Watch: func(rec Record) { t.Errorf("unexpected watch of %s", rec.RunID) },
			Local: func(rec Record) (bool, <-chan struct{}) {
				t.Errorf("unexpected local %s", rec.RunID)
				return false, nil
			},
		})
		t.Cleanup(func() { cancel(); ls.Wait() })
		admit(t, l, "run_1", "run_2", "run_3")
		ls.Kick("s1")
		recv(t, running, "the head running")
		cancel()
		ls.Wait()
		if got := calls.get(&calls.start); len(got) != 1 || got[0] != "run_1" {
			t.Fatalf("started %v, want run_1 only", got)
		}
		if got := calls.get(&calls.stops); len(got) != 2 || got[0] != "run_2" || got[1] != "run_3" {
			t.Fatalf("stopped %v, want run_2, run_3", got)
		}
		if head, ok, err := l.Head(ctx, "s1"); err != nil || ok {
			t.Fatalf("FIFO head %s, %v: want none", head.RunID, err)
		}
		ls.Kick("s1") // no new worker once stopped
		if ls.Busy("s1") {
			t.Fatal("a stopped process started a lane")
		}
	})
}
