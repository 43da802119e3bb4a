package runs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// After a store outage a lease that expired with nobody taking it over says nothing about its
// holder (nobody could renew anything): while the run's process is alive, Check does not
// lapse the run, and the holder takes the same generation back and settles the run; the run of
// a process that is gone is lapsed as before. A heartbeat that lapsed in the outage gives its
// process BeatTTL from the store's return.
func TestOutageLeaseLapseIsNotUnknown(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		b.grace = 0
		rec, lease := leased(t, st, a, "run_o", "s_o", "node-a", 100*time.Millisecond)
		for {
			if _, err := st.GetLease(ctx, "s_o"); errors.Is(err, store.ErrNotFound) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Without an outage an expired lease is a lapse (TestCheckFencesAnExpiredHolder);
		// here b has just found the store out.
		b.noteOutage(store.ErrUnavailable)
		if at := b.Check(ctx, rec); at.IsZero() {
			t.Fatal("Check lapsed a live holder's run whose lease expired in an outage")
		}
		if rec = get(t, b, "run_o"); rec.Lapsed || b.Unknown(ctx, rec) {
			t.Fatalf("a live holder's run reads unknown after an outage: %+v", rec)
		}
		l, err := st.AcquireLease(ctx, "s_o", "node-a", time.Hour)
		if err != nil || l.Generation != lease.Generation {
			t.Fatalf("the holder took its lease back as generation %d (%v), was %d", l.Generation, err, lease.Generation)
		}
		if _, err := a.Settle(ctx, "run_o", Completed, nil, false); err != nil {
			t.Fatal(err)
		}
		if rec = get(t, b, "run_o"); rec.Status != Completed || rec.Lapsed {
			t.Fatalf("the run after the outage: %+v", rec)
		}

		// The same with the run's process gone: lapsed, outage or not.
		c := open(t, st)
		rec, _ = leased(t, st, c, "run_g", "s_g", "node-c", 100*time.Millisecond)
		c.Close()
		for {
			if _, err := st.GetLease(ctx, "s_g"); errors.Is(err, store.ErrNotFound) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if at := b.Check(ctx, rec); !at.IsZero() {
			t.Fatalf("the run of a process that is gone was not lapsed (look again at %s)", at)
		}
		if rec = get(t, b, "run_g"); !rec.Lapsed || !b.Unknown(ctx, rec) {
			t.Fatalf("the run of a process that is gone: %+v", rec)
		}

		// A heartbeat that expired during the outage.
		hb := `{"host":"elsewhere","pid":1,"expires":"` + time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano) + `"}`
		if err := st.PutKV(ctx, procPrefix+"proc_far", []byte(hb)); err != nil {
			t.Fatal(err)
		}
		if alive, at := b.alive(ctx, "proc_far"); !alive || at.IsZero() {
			t.Fatalf("a heartbeat that lapsed in the outage: alive %v, look again at %v", alive, at)
		}
		if fresh := open(t, st); fresh.Alive(ctx, "proc_far") {
			t.Fatal("a process that saw no outage reads an expired heartbeat alive")
		}
	})
}

// A lost hint (the store's change feed broke) reads every record again, settled ones too: a
// view here that follows a run another process settled meanwhile is given the settled record.
func TestLanesLostHintsRereadSettled(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, b := open(t, st), open(t, st)
		if _, err := a.Admit(ctx, newRec("run_h", "s_h")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Claim(ctx, "run_h"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Settle(ctx, "run_h", Completed, nil, false); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var watched []Record
		ls := NewLanes(ctx, b, nil, LaneFuncs{
			Watch: func(rec Record) {
				mu.Lock()
				watched = append(watched, rec)
				mu.Unlock()
			},
			Viewed: func(runID string) (string, bool, bool) { return "s_h", runID == "run_h", runID == "run_h" },
		})
		ls.apply([]Change{{All: true}})
		mu.Lock()
		defer mu.Unlock()
		if len(watched) != 1 || watched[0].RunID != "run_h" || watched[0].Status != Completed {
			t.Fatalf("after lost hints the view was given %+v, want run_h completed", watched)
		}
		if !b.outageEnd().IsZero() {
			t.Fatal("applying hints alone noted an outage")
		}
	})
}
