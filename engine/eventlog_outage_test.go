package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"

	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// outageStore is a blindStore whose event log cannot be read while down is set (a database
// restarting); it counts the reads it refused.
type outageStore struct {
	blindStore
	down    atomic.Bool
	refused atomic.Int64
}

func (o *outageStore) EventsSince(ctx context.Context, sid string, since uint64, max int) ([]store.StoredEvent, error) {
	if o.down.Load() {
		o.refused.Add(1)
		return nil, store.ErrUnavailable
	}
	return o.Store.EventsSince(ctx, sid, since, max)
}

// outagePair is two engines on one store, the second reading it through an outageStore.
func outagePair(t *testing.T) (*memstore.Store, *outageStore, *enginetest.Harness, *enginetest.Harness) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	out := &outageStore{blindStore: blindStore{Store: shared}}
	return shared, out, onStore(t, shared), onStore(t, out)
}

// A subscriber replaying a session's stored events (out of its journal's window: here the
// journal of another engine than the one that ran the turn), whose store cannot be read for a
// while (a database restart), waits for the store instead of lagging: nothing was lost, and
// once the store answers it reads exactly what was stored.
func TestEventLogReplayWaitsOutAnOutage(t *testing.T) {
	shared, out, a, b := outagePair(t)
	ctx := enginetest.Context(t)
	s := a.Create()
	subA := s.Subscribe(0)
	defer subA.Close()
	a.Server.Enqueue(openaitest.Text("stored ", "before"))
	a.Run(s, "hi")
	owner := turnEvents(t, subA)
	last := owner[len(owner)-1].Seq
	storedUpTo(t, shared, s.ID(), last)
	bs, err := b.Engine.Open(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if bs.LastSeq() < last {
		t.Fatalf("the other engine's journal ends at %d, the stored log at %d", bs.LastSeq(), last)
	}
	out.down.Store(true)
	sub := bs.Subscribe(0)
	defer sub.Close()
	type read struct {
		evs []engine.Event
		err error
	}
	got := make(chan read, 1)
	go func() {
		var r read
		for sub.Cursor() < last && r.err == nil {
			var evs []engine.Event
			evs, r.err = sub.NextBatch(ctx, nil)
			r.evs = append(r.evs, evs...)
		}
		got <- r
	}()
	for out.refused.Load() < 2 {
		select {
		case r := <-got:
			t.Fatalf("the replay ended while the store was out: %v", r.err)
		case <-time.After(10 * time.Millisecond): // polls a condition
		}
	}
	out.down.Store(false)
	r := <-got
	if r.err != nil {
		t.Fatalf("after the outage: %v", r.err)
	}
	if len(r.evs) < len(owner) {
		t.Fatalf("replayed %d events, the turn alone has %d", len(r.evs), len(owner))
	}
	sameEvents(t, "after the outage", r.evs[len(r.evs)-len(owner):], owner)
}

// lateStore applies an append but answers the first one late, as a store that was slow, or a
// process stopped (SIGSTOP) with the append in flight and continued past its deadline, sees it.
type lateStore struct {
	store.Store
	late atomic.Bool
}

func (l *lateStore) AppendEvents(ctx context.Context, sid string, f store.Fence, evs []store.StoredEvent) error {
	err := l.Store.AppendEvents(ctx, sid, f, evs)
	if err == nil && l.late.CompareAndSwap(true, false) {
		return fmt.Errorf("timeout: %w", context.DeadlineExceeded)
	}
	return err
}

// An append whose answer came too late but which landed is not taken for a refusal: the
// journal goes on writing the session's log, and every event of the turns after it is
// stored (before, it forgot its events and stopped writing the log, so nobody else saw them).
func TestEventLogAppendAnsweredLate(t *testing.T) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	st := &lateStore{Store: shared}
	h := onStore(t, st)
	s := h.Create()
	sub := s.Subscribe(0)
	defer sub.Close()
	st.late.Store(true)
	h.Server.Enqueue(openaitest.Text("first"), openaitest.Text("second"))
	h.Run(s, "one")
	h.Run(s, "two")
	first := turnEvents(t, sub)
	second := turnEvents(t, sub)
	if st.late.Load() {
		t.Fatal("no append was answered late")
	}
	last := second[len(second)-1].Seq
	storedUpTo(t, shared, s.ID(), last)
	stored, err := shared.EventsSince(enginetest.Context(t), s.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[uint64]string{}
	for _, ev := range stored {
		seqs[ev.Seq] = ev.Type
	}
	for _, ev := range append(first, second...) {
		if seqs[ev.Seq] != string(ev.Type) {
			t.Fatalf("event %d (%s) published but stored as %q", ev.Seq, ev.Type, seqs[ev.Seq])
		}
	}
}

// StoredEvents reads another engine's session log from the store itself, the turn's events
// under their seqs, however far this engine's journal has followed it; while the store is out
// it says so (an error), not an empty or short log; past the end it reads nothing.
func TestStoredEventsReadTheStore(t *testing.T) {
	shared, out, a, b := outagePair(t)
	ctx := enginetest.Context(t)
	s := a.Create()
	subA := s.Subscribe(0)
	defer subA.Close()
	bs, err := b.Engine.Open(ctx, s.ID()) // opened before the turn: its journal is behind
	if err != nil {
		t.Fatal(err)
	}
	a.Server.Enqueue(openaitest.Text("stored ", "for ", "all"))
	a.Run(s, "hi")
	owner := turnEvents(t, subA)
	last := owner[len(owner)-1].Seq
	storedUpTo(t, shared, s.ID(), last)

	out.down.Store(true)
	if evs, err := bs.StoredEvents(ctx, 0); err == nil {
		t.Fatalf("with the store out: %d events and no error", len(evs))
	}
	out.down.Store(false)
	var all []engine.Event
	for cur := uint64(0); ; {
		evs, err := bs.StoredEvents(ctx, cur)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		all = append(all, evs...)
		cur = evs[len(evs)-1].Seq
	}
	if len(all) < len(owner) || all[len(all)-1].Seq < last {
		t.Fatalf("read %d events up to seq %d; the turn has %d up to %d", len(all), all[len(all)-1].Seq, len(owner), last)
	}
	var turn []engine.Event
	for _, ev := range all {
		if ev.Seq >= owner[0].Seq && ev.Seq <= last {
			turn = append(turn, ev)
		}
	}
	sameEvents(t, "read from the store", turn, owner)
	if evs, err := bs.StoredEvents(ctx, all[len(all)-1].Seq); err != nil || len(evs) != 0 {
		t.Fatalf("past the end: %d events, %v", len(evs), err)
	}
}

// slowStore stores events a while after being asked to, as a loaded database does.
type slowStore struct{ store.Store }

func (s slowStore) AppendEvents(ctx context.Context, sid string, f store.Fence, evs []store.StoredEvent) error {
	time.Sleep(150 * time.Millisecond)
	return s.Store.AppendEvents(ctx, sid, f, evs)
}

// EventsStored returns once every event the session published here is in the store, however
// slowly the store takes them: a surface that then reports the turn ended (a run's record) is
// never ahead of the log other processes read.
func TestEventsStoredWaitsForTheLog(t *testing.T) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	a := onStore(t, slowStore{shared})
	ctx := enginetest.Context(t)
	s := a.Create()
	a.Server.Enqueue(openaitest.Text("slowly ", "stored"))
	a.Run(s, "hi")
	if err := s.EventsStored(ctx); err != nil {
		t.Fatal(err)
	}
	last, err := shared.LastEventSeq(ctx, s.ID())
	if err != nil || last < s.LastSeq() {
		t.Fatalf("after EventsStored the store ends at %d (%v), the session at %d", last, err, s.LastSeq())
	}
}

// Without leases StoredEvents reads the session's journal, this process being the log's one
// writer: the turn's events under the seqs it published them with.
func TestStoredEventsWithoutLeases(t *testing.T) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	h := enginetest.New(t, enginetest.Options{Memory: true, Configure: func(c *engine.Config) {
		c.Store, c.Leases.Off = shared, true
	}})
	s := h.Create()
	sub := s.Subscribe(0)
	defer sub.Close()
	h.Server.Enqueue(openaitest.Text("one ", "writer"))
	h.Run(s, "hi")
	owner := turnEvents(t, sub)
	evs, err := s.StoredEvents(enginetest.Context(t), owner[0].Seq-1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < len(owner) {
		t.Fatalf("read %d events, the turn has %d", len(evs), len(owner))
	}
	sameEvents(t, "without leases", evs[:len(owner)], owner)
}
