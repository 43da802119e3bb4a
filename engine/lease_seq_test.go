package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// stalledEvents is a store whose event appends hang once stalled (until released or their
// context ends): a process that published events and died before its group commit stored them.
type stalledEvents struct {
	store.Store
	stalled atomic.Bool
	release chan struct{}
	once    sync.Once
}

func (s *stalledEvents) AppendEvents(ctx context.Context, sid string, f store.Fence, evs []store.StoredEvent) error {
	if s.stalled.Load() {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.AppendEvents(ctx, sid, f, evs)
}

func (s *stalledEvents) unstall() { s.once.Do(func() { close(s.release) }) }

// TestLeaseTakeoverNeverReusesSeq: the holder of a session's lease publishes events its client
// receives and dies before storing them (its appends hang, its renewals stop); the engine that
// takes the session over numbers its events past every seq the dead holder could have
// published, so no seq names two events, and a client resuming with any cursor the dead holder
// gave it (inside the gap or at its end) reads the new holder's events across the gap.
func TestLeaseTakeoverNeverReusesSeq(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	sta := &stalledEvents{Store: st, release: make(chan struct{})}
	pa, pb := newGated(), newGated()
	short := func(c *Config) { c.Leases.TTL = 300 * time.Millisecond }
	ea := leaseEngine(t, sta, pa, short)
	eb := leaseEngine(t, st, pb, short)
	t.Cleanup(func() { // before the engines close: the dead holder's leftovers are refused
		sta.unstall()
		pa.release <- struct{}{}
	})
	ctx := waitCtx(t)

	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pa.gate(true)
	if _, err := sa.Submit(ctx, Prompt{Text: "first"}); err != nil {
		t.Fatal(err)
	}
	reachedCall(t, pa) // A holds the lease and runs the turn
	if err := sa.j.flushWait(ctx); err != nil {
		t.Fatal(err)
	}
	stored, err := st.LastEventSeq(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	sub := sa.j.subscribe(sa.LastSeq())
	defer sub.Close()
	sta.stalled.Store(true) // from here A's events reach its clients and never the store
	const unstored = 5
	for i := range unstored {
		sa.j.append(Event{Type: EvTerminalOutput, Text: fmt.Sprintf("from A %d", i)})
	}
	seenA := map[uint64]string{}
	for len(seenA) < unstored {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("A's client: %v", err)
		}
		seenA[ev.Seq] = ev.Text
	}
	lastA := sub.Cursor()
	if lastA <= stored {
		t.Fatalf("A's client is at seq %d, the store at %d: nothing unstored was published", lastA, stored)
	}
	ea.lmu.Lock()
	ea.leases[sa.ID()].paused.Store(true) // A is dead: no renewals, its lease expires
	ea.lmu.Unlock()

	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	adm, err := sb.Submit(ctx, Prompt{Text: "next"})
	if err != nil || adm.Status != AdmitStarted {
		t.Fatalf("submit after the holder died: %+v %v", adm, err)
	}
	if out, err := sb.Wait(ctx, adm.TurnID); err != nil || out.Status != StatusCompleted {
		t.Fatalf("the new holder's turn: %+v %v", out, err)
	}
	if err := sb.j.flushWait(ctx); err != nil {
		t.Fatal(err)
	}

	logged, err := st.EventsSince(ctx, sa.ID(), stored, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) == 0 || logged[0].Type != string(EvTakeover) {
		t.Fatalf("the log after seq %d does not start with the takeover: %+v", stored, logged)
	}
	for _, e := range logged {
		if text, ok := seenA[e.Seq]; ok {
			t.Fatalf("seq %d reused: A's client got %q under it, the log has %s %q", e.Seq, text, e.Type, e.Text)
		}
		if e.Seq <= lastA {
			t.Fatalf("the new holder numbered seq %d, at or below the %d A's client reached", e.Seq, lastA)
		}
	}
	// A client of A's resumes through B from where it was, or from inside the gap: it reads
	// B's events, the takeover first, with nothing lagged.
	for _, since := range []uint64{lastA, stored + 1, stored} {
		ev := waitEvent(t, sb, since, func(Event) bool { return true })
		if ev.Seq != logged[0].Seq || ev.Type != EvTakeover {
			t.Fatalf("resuming after seq %d: first event %d %s, want the takeover at %d", since, ev.Seq, ev.Type, logged[0].Seq)
		}
		if evs, complete := sb.j.eventsSince(since); !complete || len(evs) != len(logged) || evs[0].Seq != logged[0].Seq {
			t.Fatalf("events since %d: %d events from %+v (complete %v), want %d from the takeover at %d", since, len(evs), evs, complete, len(logged), logged[0].Seq)
		}
	}
}

// TestJournalFollowsAcrossGap: a process following a session's log reads it across a gap (a
// takeover numbered past the previous holder's reserved seqs): its window restarts at the gap,
// and subscribers and replays with a cursor before the gap, inside it or in the old window get
// every stored event once, in order, with nothing lagged.
func TestJournalFollowsAcrossGap(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	st := memstore.New()
	if _, err := st.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	stored := func(from, to uint64) []store.StoredEvent {
		var out []store.StoredEvent
		for seq := from; seq <= to; seq++ {
			out = append(out, store.StoredEvent{Seq: seq, Type: string(EvTerminalOutput), Text: fmt.Sprint(seq)})
		}
		return out
	}
	l1, err := st.AcquireLease(ctx, "s", "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AppendEvents(ctx, "s", store.Fence{Generation: l1.Generation}, stored(1, 3)); err != nil {
		t.Fatal(err)
	}
	j := newStoredJournal("s", nil, st)
	defer j.close()
	early := j.subscribe(1) // follows the log: its window holds 2..3 first
	defer early.Close()
	want := func(sub *Subscription, seqs ...uint64) {
		t.Helper()
		for _, seq := range seqs {
			ev, err := sub.Next(ctx)
			if err != nil || ev.Seq != seq || ev.Text != fmt.Sprint(seq) {
				t.Fatalf("from cursor: got %d %q (%v), want seq %d", ev.Seq, ev.Text, err, seq)
			}
		}
	}
	want(early, 2, 3)
	if err := st.ReleaseLease(ctx, l1); err != nil {
		t.Fatal(err)
	}
	l2, err := st.AcquireLease(ctx, "s", "b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AppendEvents(ctx, "s", store.Fence{Generation: l2.Generation}, stored(100, 102)); err != nil {
		t.Fatal(err)
	}
	want(early, 100, 101, 102) // the follower's window crossed the gap
	for _, since := range []uint64{0, 2, 3, 50} {
		var seqs []uint64
		for ev, err := range events(ctx, j, since) {
			if err != nil {
				t.Fatalf("events since %d: %v", since, err)
			}
			if seqs = append(seqs, ev.Seq); ev.Seq == 102 {
				break
			}
		}
		wantSeqs := []uint64{100, 101, 102}
		switch since {
		case 0:
			wantSeqs = []uint64{1, 2, 3, 100, 101, 102}
		case 2:
			wantSeqs = []uint64{3, 100, 101, 102}
		}
		if fmt.Sprint(seqs) != fmt.Sprint(wantSeqs) {
			t.Fatalf("events since %d: %v, want %v", since, seqs, wantSeqs)
		}
		evs, complete := j.eventsSince(since)
		var got []uint64
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
		if !complete || fmt.Sprint(got) != fmt.Sprint(wantSeqs) {
			t.Fatalf("replay since %d: %v (complete %v), want %v", since, got, complete, wantSeqs)
		}
	}
}

// TestBornSessionSeqNotReused: a session made in one engine (A) raises events before any
// lease is taken (its session.info at creation, a surface's event); another engine (B) on the
// same store then runs its first turn. No seq names two events: what A's client received under
// a seq is what the stored log has under it, or the seq is not in the log at all. With A's
// events stored before B came, A's client goes on to read B's turn; with them still unstored
// (A's appends stall), B numbers past every seq A may have published, and A's client is told
// it lagged.
func TestBornSessionSeqNotReused(t *testing.T) {
	t.Parallel()
	for _, stored := range []bool{true, false} {
		t.Run(map[bool]string{true: "stored", false: "unstored"}[stored], func(t *testing.T) {
			t.Parallel()
			st := memstore.New()
			sta := &stalledEvents{Store: st, release: make(chan struct{})}
			defer sta.unstall()
			pa, pb := newGated(), newGated()
			ea := leaseEngine(t, sta, pa, nil)
			eb := leaseEngine(t, st, pb, nil)
			ctx := waitCtx(t)

			sta.stalled.Store(!stored)
			sa, err := ea.Create(ctx, CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sa.Emit("note", SurfaceEvent{"text": "from A"})
			sub := sa.Subscribe(0)
			defer sub.Close()
			seenA := map[uint64]Event{}
			for len(seenA) < 2 {
				ev, err := sub.Next(ctx)
				if err != nil {
					t.Fatalf("A's client: %v", err)
				}
				seenA[ev.Seq] = ev
			}
			if stored {
				if err := sa.j.flushWait(ctx); err != nil {
					t.Fatal(err)
				}
			}

			sb, err := eb.Open(ctx, sa.ID())
			if err != nil {
				t.Fatal(err)
			}
			adm, err := sb.Submit(ctx, Prompt{Text: "through B"})
			if err != nil || adm.Status != AdmitStarted {
				t.Fatalf("submit through B: %+v %v", adm, err)
			}
			if out, err := sb.Wait(ctx, adm.TurnID); err != nil || out.Status != StatusCompleted {
				t.Fatalf("B's turn: %+v %v", out, err)
			}
			if pa.Calls() != 0 || pb.Calls() != 1 {
				t.Fatalf("model calls A %d, B %d: B should have run the turn", pa.Calls(), pb.Calls())
			}
			if err := sb.j.flushWait(ctx); err != nil {
				t.Fatal(err)
			}
			sta.unstall() // A's stalled appends reach the store now, after B's

			// What A's client got under a seq is what the log has under it.
			checkLog := func() {
				t.Helper()
				logged, err := st.EventsSince(ctx, sa.ID(), 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(logged) == 0 {
					t.Fatal("nothing in the log")
				}
				bySeq := map[uint64]store.StoredEvent{}
				for _, e := range logged {
					bySeq[e.Seq] = e
				}
				for seq, ev := range seenA {
					e, ok := bySeq[seq]
					if !ok {
						continue // a seq left unused (a gap) is not a reuse
					}
					if e.Type != string(ev.Type) || e.TurnID != ev.TurnID || e.Text != ev.Text {
						t.Fatalf("seq %d reused: A's client got %s %q (turn %q), the log has %s %q (turn %q)",
							seq, ev.Type, ev.Text, ev.TurnID, e.Type, e.Text, e.TurnID)
					}
				}
			}
			checkLog()

			// A's client follows the session into B's turn, or is told it lagged.
			for {
				ev, err := sub.Next(ctx)
				if !stored && errors.Is(err, ErrLagged) {
					break
				}
				if err != nil {
					t.Fatalf("A's client after %v: %v", slices.Sorted(maps.Keys(seenA)), err)
				}
				if _, dup := seenA[ev.Seq]; dup {
					t.Fatalf("A's client got seq %d twice", ev.Seq)
				}
				seenA[ev.Seq] = ev
				if ev.Type == EvMessageComplete && ev.TurnID == adm.TurnID {
					break
				}
			}
			if err := sa.j.flushWait(ctx); err != nil {
				t.Fatal(err)
			}
			checkLog()
		})
	}
}

// TestBornSessionClosedLeavesNoGap: a session made in one engine and closed there before any
// lease leaves no birth reservation behind once its events are stored: the engine that runs
// its first turn continues the log at the next seq, with no gap.
func TestBornSessionClosedLeavesNoGap(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb := newGated(), newGated()
	ea := leaseEngine(t, st, pa, nil)
	eb := leaseEngine(t, st, pb, nil)
	ctx := waitCtx(t)

	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetKV(ctx, markerPrefix+sa.ID()); err != nil {
		t.Fatalf("no birth reservation for a new session: %v", err)
	}
	if err := sa.Close(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if b, err := st.GetKV(ctx, markerPrefix+sa.ID()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after the close the held marker is %s (%v), want none", b, err)
	}

	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	adm, err := sb.Submit(ctx, Prompt{Text: "through B"})
	if err != nil || adm.Status != AdmitStarted {
		t.Fatalf("submit through B: %+v %v", adm, err)
	}
	if out, err := sb.Wait(ctx, adm.TurnID); err != nil || out.Status != StatusCompleted {
		t.Fatalf("B's turn: %+v %v", out, err)
	}
	if err := sb.j.flushWait(ctx); err != nil {
		t.Fatal(err)
	}
	logged, err := st.EventsSince(ctx, sa.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) < 3 || logged[0].Seq != 1 || logged[0].Type != string(EvSessionInfo) {
		t.Fatalf("the log does not start with A's session.info at seq 1: %+v", logged)
	}
	for i, e := range logged {
		if e.Seq != uint64(i+1) {
			t.Fatalf("seq %d at position %d: the log has a gap (%s)", e.Seq, i, e.Type)
		}
	}
}
