package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// leased creates session sid in st, leased to owner, and admits and claims run id on l under
// that lease, as session turn "turn_"+id.
func leased(t *testing.T, st store.Store, l *Ledger, id, sid, owner string, ttl time.Duration) (Record, store.Lease) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateSession(ctx, store.Session{ID: sid}); err != nil && !errors.Is(err, store.ErrExists) {
		t.Fatal(err)
	}
	lease, err := st.AcquireLease(ctx, sid, owner, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Admit(ctx, newRec(id, sid)); err != nil {
		t.Fatal(err)
	}
	rec, err := l.ClaimTurn(ctx, id, "turn_"+id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LeaseGeneration != lease.Generation || rec.LeaseGeneration == 0 {
		t.Fatalf("claimed under lease generation %d, the session's is %d", rec.LeaseGeneration, lease.Generation)
	}
	return rec, lease
}

func get(t *testing.T, l *Ledger, id string) Record {
	t.Helper()
	rec, err := l.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A run lives by the session lease its turn runs under, not by its process: while that
// generation is held nobody declares it unknown, however long its process is silent (its
// heartbeat gone, as in a database outage); once the lease passed to another holder, or was
// released with the run unsettled, a process that checks it lapses it (after the grace),
// every process reads it restart-unknown, and exactly one of two resolutions wins.
func TestCheckLapsesOnlyWhenTheLeaseIsGone(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		b.grace = 0
		for i, how := range []string{"taken over", "released"} {
			sid := fmt.Sprintf("s_%d", i)
			rec, lease := leased(t, st, a, "run_"+sid, sid, "node-a", time.Hour)
			// Its process's heartbeat gone: the run still lives by its lease.
			if err := st.DeleteKV(ctx, procPrefix+a.Process()); err != nil {
				t.Fatal(err)
			}
			if at := b.Check(ctx, rec); at.IsZero() {
				t.Fatalf("%s: Check of a run whose lease is held gives no time to look again", how)
			}
			if rec = get(t, b, rec.RunID); rec.Lapsed || a.Unknown(ctx, rec) || b.Unknown(ctx, rec) {
				t.Fatalf("%s: a run whose lease is held reads lapsed or unknown: %+v", how, rec)
			}
			if _, err := b.ResolveUnknown(ctx, rec.RunID, rec.AdmissionID, 1, nil); !errors.Is(err, ErrNotUnknown) {
				t.Fatalf("%s: resolving a run whose lease is held: %v", how, err)
			}
			if err := st.ReleaseLease(ctx, lease); err != nil {
				t.Fatal(err)
			}
			if how == "taken over" {
				if _, err := st.AcquireLease(ctx, sid, "node-c", time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			before := time.Now().UTC()
			if at := b.Check(ctx, rec); !at.IsZero() {
				t.Fatalf("%s: Check did not lapse the run (look again at %s)", how, at)
			}
			rec = get(t, a, rec.RunID)
			if !rec.Lapsed || !a.Unknown(ctx, rec) || !b.Unknown(ctx, rec) {
				t.Fatalf("%s: the run is not restart-unknown for every process: %+v", how, rec)
			}
			if rec.LapsedAt.Before(before) || rec.LapsedAt.After(time.Now()) {
				t.Fatalf("%s: the lapse is recorded at %v, not when it was written", how, rec.LapsedAt)
			}
			if how == "released" {
				// The lapse fenced the old holder: it can neither renew its lease nor
				// take the same generation again.
				if _, err := st.RenewLease(ctx, lease, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("the lapsed holder renewed its lease: %v", err)
				}
				if l, err := st.AcquireLease(ctx, sid, "node-a", time.Hour); err != nil || l.Generation == lease.Generation {
					t.Fatalf("the lapsed holder acquired generation %d again: %+v %v", lease.Generation, l, err)
				}
			}
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for n, l := range []*Ledger{a, b} {
				wg.Go(func() {
					_, errs[n] = l.ResolveUnknown(ctx, rec.RunID, rec.AdmissionID, rec.Generation, map[string]any{"interrupted": true})
				})
			}
			wg.Wait()
			if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), ErrNotUnknown) {
				t.Fatalf("%s: two resolutions: %v, want exactly one to win", how, errs)
			}
			if rec = get(t, b, rec.RunID); rec.Status != Interrupted {
				t.Fatalf("%s: resolved run is %s", how, rec.Status)
			}
		}
	})
}

// A run whose lease expired without anybody taking it over (its holder cut off from the store
// past its TTL, or stopped) is lapsed and its holder fenced: when it comes back it cannot take
// the same generation again, so it cannot finish a turn that was declared unknown. Its
// executing process may still settle it with what it knows, and a resolution then finds it
// settled.
func TestCheckFencesAnExpiredHolder(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		b.grace = 0
		rec, lease := leased(t, st, a, "run_x", "s_x", "node-a", 100*time.Millisecond)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := st.GetLease(ctx, "s_x"); errors.Is(err, store.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the lease did not expire")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if at := b.Check(ctx, rec); !at.IsZero() {
			t.Fatalf("Check did not lapse a run whose lease expired (look again at %s)", at)
		}
		if l, err := st.AcquireLease(ctx, "s_x", "node-a", time.Hour); err != nil || l.Generation == lease.Generation {
			t.Fatalf("the expired holder took generation %d again after the lapse: %+v %v", lease.Generation, l, err)
		}
		if rec = get(t, a, "run_x"); !b.Unknown(ctx, rec) {
			t.Fatalf("lapsed run is not unknown: %+v", rec)
		}
		if _, err := a.Settle(ctx, "run_x", Interrupted, map[string]any{"turn_exit_reason": "lease_lost"}, false); err != nil {
			t.Fatalf("the executing process settling its lapsed run: %v", err)
		}
		if _, err := b.ResolveUnknown(ctx, "run_x", rec.AdmissionID, rec.Generation, nil); !errors.Is(err, ErrNotUnknown) {
			t.Fatalf("resolving a settled run: %v", err)
		}
	})
}

// Within the grace a run whose lease is gone is left alone (its process's settlement, written
// right after its turn released the lease, lands first); past it, it is lapsed. A holder that
// was a process of this host which exited is not waited for at all.
func TestCheckGraceAndExitedHolder(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		rec, lease := leased(t, st, a, "run_g", "s_g", "node-a", time.Hour)
		if err := st.ReleaseLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		if at := b.Check(ctx, rec); at.IsZero() || time.Until(at) > LapseGrace {
			t.Fatalf("within the grace Check looks again at %v", at)
		}
		if _, err := a.Settle(ctx, "run_g", Completed, nil, false); err != nil {
			t.Fatal(err)
		}
		b.grace = 0
		if at := b.Check(ctx, rec); !at.IsZero() {
			t.Fatalf("Check of a settled run looks again at %s", at)
		}
		if rec = get(t, b, "run_g"); rec.Status != Completed || rec.Lapsed {
			t.Fatalf("a run settled within the grace: %+v", rec)
		}

		// A holder of this host that exited.
		b.grace = time.Hour
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		owner := host + ":" + strconv.Itoa(cmd.Process.Pid) + ":ab12"
		rec, _ = leased(t, st, a, "run_d", "s_d", owner, time.Hour)
		if now, unknown := b.Lapse(ctx, rec); !unknown || !now.Lapsed || now.LapsedAt.IsZero() || now.Version <= rec.Version {
			t.Fatalf("the run of a holder that exited is not unknown at once, with the lapsed record: %v %+v", unknown, now)
		}
		if rec = get(t, b, "run_d"); !rec.Lapsed || !a.Unknown(ctx, rec) {
			t.Fatalf("the run of a holder that exited: %+v", rec)
		}
	})
}

// Every ledger scans the FIFOs' running heads (each BeatEvery): a run another process runs
// whose lease is gone is lapsed without anybody asking about it; its own runs are left to
// itself, and a queued head is not looked at.
func TestLapseScan(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		a.grace, b.grace = 0, 0
		rec, lease := leased(t, st, a, "run_s", "s_s", "node-a", time.Hour)
		if _, err := a.Admit(ctx, newRec("run_q", "s_s")); err != nil {
			t.Fatal(err)
		}
		b.lapseScan(ctx)
		if rec = get(t, b, "run_s"); rec.Lapsed {
			t.Fatalf("the scan lapsed a run whose lease is held: %+v", rec)
		}
		if err := st.ReleaseLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		a.lapseScan(ctx)
		if rec = get(t, b, "run_s"); rec.Lapsed {
			t.Fatalf("a process lapsed its own run: %+v", rec)
		}
		b.lapseScan(ctx)
		if rec = get(t, b, "run_s"); !rec.Lapsed || !a.Unknown(ctx, rec) {
			t.Fatalf("the scan did not lapse a run whose lease is gone: %+v", rec)
		}
		if q := get(t, b, "run_q"); q.Status != Queued || q.Lapsed {
			t.Fatalf("the queued run behind it: %+v", q)
		}
	})
}

// A process that tries to adopt a run whose lease is gone, and finds another process took the
// session over meanwhile (two processes saw the holder go at once), leaves the run to that one
// for the grace instead of lapsing it there and then: the lapse would refuse the other's
// adoption, and a run parked at an approval would end restart-unknown instead of adopted.
func TestCheckLeavesARacingTakeoverItsAdoption(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b, c := open(t, st), open(t, st), open(t, st)
		sid := "s_race"
		rec, lease := leased(t, st, a, "run_race", sid, "node-a", time.Hour)
		if err := st.ReleaseLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		// b saw the lease gone a grace ago; as it tries to adopt the run, c takes the
		// session over (and is about to adopt the turn itself).
		b.grace = time.Hour
		b.mu.Lock()
		b.gone[rec.RunID] = sighting{version: rec.Version, at: time.Now().Add(-2 * time.Hour)}
		b.mu.Unlock()
		var taken store.Lease
		b.SetAdopt(func(ctx context.Context, rec Record) (bool, bool) {
			var err error
			if taken, err = st.AcquireLease(ctx, sid, "node-c", time.Hour); err != nil {
				t.Error(err)
			}
			return false, true
		})
		if at := b.Check(ctx, rec); at.IsZero() {
			t.Fatal("Check lapsed the run while another process was taking its session over")
		}
		if got := get(t, b, rec.RunID); got.Lapsed {
			t.Fatalf("lapsed: %+v", got)
		}
		if _, err := c.Adopt(ctx, sid, rec.TurnID, lease.Generation, taken.Generation); err != nil {
			t.Fatalf("the process that took the session over could not adopt the run: %v", err)
		}
		if got := get(t, b, rec.RunID); got.Lapsed || got.LeaseGeneration != taken.Generation || got.Process != c.Process() {
			t.Fatalf("adopted run: %+v", got)
		}
	})
}

// A session that other processes keep taking over (each time a new generation) does not put
// off the lapse of a run whose lease is gone for ever: neither the first sighting nor the
// grace left to a process that took the session over starts again with each new holder.
func TestCheckLapsesWhileOthersUseTheSession(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		rec, lease := leased(t, st, a, "run_busy", "s_busy", "node-a", time.Hour)
		if err := st.ReleaseLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		other := lease
		// Another process gives the session back and takes it again, under a new generation.
		retake := func() {
			if err := st.ReleaseLease(ctx, other); err != nil && other != lease {
				t.Fatal(err)
			}
			l, err := st.AcquireLease(ctx, "s_busy", "node-x", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			other = l
		}
		b.grace = 10 * time.Millisecond
		// Each try of b to adopt finds it taken over again.
		b.SetAdopt(func(context.Context, Record) (bool, bool) { retake(); return false, true })
		for i := range 50 {
			retake()
			if at := b.Check(ctx, rec); at.IsZero() {
				if got := get(t, b, rec.RunID); !got.Lapsed {
					t.Fatalf("Check gave up without lapsing: %+v", got)
				}
				t.Logf("lapsed at check %d", i+1)
				return
			}
			time.Sleep(2 * b.grace)
		}
		t.Fatal("the run is still not lapsed after 50 checks while others kept taking its session over")
	})
}
