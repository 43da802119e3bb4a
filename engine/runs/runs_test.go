package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// stores runs a test over each embedded store.
func stores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("memstore", func(t *testing.T) { fn(t, memstore.New()) })
	t.Run("badger", func(t *testing.T) {
		st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
}

// open starts a ledger (a process) on st.
func open(t *testing.T, st store.Store) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func newRec(id, session string) Record {
	return Record{RunID: id, AdmissionID: "adm_" + id, Owner: "key_o", SessionID: session, Fingerprint: "fp", Prompt: "p", CreatedAt: time.Now().UTC()}
}

// Two processes admitting runs to one session at once: distinct, gap-free positions, and the
// FIFO holds every run in position order.
func TestAdmitTwoProcessesOneFIFO(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		const each = 20
		type got struct {
			id  string
			pos int64
		}
		out := make(chan got, 2*each)
		var wg sync.WaitGroup
		for i, l := range []*Ledger{a, b} {
			for j := range each {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("run_%d_%02d", i, j)
					adm, err := l.Admit(ctx, newRec(id, "s1"))
					if err != nil {
						t.Error(err)
						return
					}
					if adm.Record.Admitter != l.Process() || adm.Record.Status != Queued {
						t.Errorf("%+v", adm.Record)
					}
					out <- got{id, adm.Position}
				}()
			}
		}
		wg.Wait()
		close(out)
		byPos := map[int64]string{}
		for g := range out {
			if prev, ok := byPos[g.pos]; ok {
				t.Fatalf("position %d given to %s and %s", g.pos, prev, g.id)
			}
			byPos[g.pos] = g.id
		}
		q, err := a.Queue(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(byPos) != 2*each || len(q) != 2*each {
			t.Fatalf("%d positions, %d queued, want %d", len(byPos), len(q), 2*each)
		}
		for p := int64(1); p <= 2*each; p++ {
			if q[p-1] != byPos[p] {
				t.Fatalf("FIFO[%d] = %s, position %d is %s", p-1, q[p-1], p, byPos[p])
			}
		}
		// Only the head is claimed, by one of two processes racing for it.
		if _, err := b.Claim(ctx, q[1]); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("claiming behind the head: %v", err)
		}
		wins := make(chan string, 2)
		for _, l := range []*Ledger{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if rec, err := l.Claim(ctx, q[0]); err == nil {
					wins <- rec.Process
				} else if !errors.Is(err, ErrNotQueued) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		close(wins)
		if len(wins) != 1 {
			t.Fatalf("%d claims won", len(wins))
		}
		winner := a
		if p := <-wins; p == b.Process() {
			winner = b
		}
		loser := map[*Ledger]*Ledger{a: b, b: a}[winner]
		if _, err := loser.Settle(ctx, q[0], Completed, nil, false); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("settled by the process that does not run it: %v", err)
		}
		rec, err := winner.Settle(ctx, q[0], Completed, map[string]any{"output": "x"}, false)
		if err != nil || rec.Status != Completed || rec.Generation != 1 {
			t.Fatalf("%+v %v", rec, err)
		}
		head, ok, err := loser.Head(ctx, "s1")
		if err != nil || !ok || head.RunID != q[1] {
			t.Fatalf("head after the settlement: %+v %v %v", head, ok, err)
		}
	})
}

// One Idempotency-Key admitted at once through two processes: one run; the other admission
// is a replay of it, and leaves no record of its own. Another body with the key is refused.
func TestAdmitIdempotencyKeyTwoProcesses(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		const rounds = 10
		for i := range rounds {
			key := SHA256Hex(fmt.Sprintf("key-%d", i))
			var wg sync.WaitGroup
			adms := make([]Admission, 2)
			for n, l := range []*Ledger{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rec := newRec(fmt.Sprintf("run_%d_%d", i, n), "s")
					rec.IdemKey = key
					adm, err := l.Admit(ctx, rec)
					if err != nil {
						t.Error(err)
					}
					adms[n] = adm
				}()
			}
			wg.Wait()
			var admitted, replayed []string
			for _, adm := range adms {
				if adm.Replay != "" {
					replayed = append(replayed, adm.Replay)
				} else {
					admitted = append(admitted, adm.Record.RunID)
				}
			}
			if len(admitted) != 1 || len(replayed) != 1 || replayed[0] != admitted[0] {
				t.Fatalf("round %d: admitted %v, replayed %v", i, admitted, replayed)
			}
			if id, conflict, err := b.Lookup(ctx, "key_o", key, "fp"); err != nil || conflict || id != admitted[0] {
				t.Fatalf("lookup %q %v %v", id, conflict, err)
			}
			other := newRec(fmt.Sprintf("run_%d_x", i), "s")
			other.IdemKey, other.Fingerprint = key, "another body"
			if _, err := a.Admit(ctx, other); !errors.Is(err, ErrIdempotencyReused) {
				t.Fatalf("another body: %v", err)
			}
		}
		recs, err := a.List(ctx, nil)
		if err != nil || len(recs) != rounds {
			t.Fatalf("%d records, want %d: %v", len(recs), rounds, err)
		}
		q, _ := a.Queue(ctx, "s")
		if len(q) != rounds {
			t.Fatalf("%d runs in the FIFO, want %d", len(q), rounds)
		}
	})
}

// running puts a run in the store as process proc left it: claimed and never settled.
func running(t *testing.T, st store.Store, id, proc string) Record {
	t.Helper()
	rec := newRec(id, "s_"+id)
	rec.Status, rec.Generation, rec.Process, rec.Version = Running, 1, proc, 1
	b, _ := json.Marshal(rec)
	if err := st.PutKV(context.Background(), recPrefix+id, b); err != nil {
		t.Fatal(err)
	}
	return rec
}

// Two processes resolving one restart-unknown run at once: exactly one wins; the other is
// told it is not unknown (any more).
func TestResolveUnknownTwoProcesses(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a, b := open(t, st), open(t, st)
		for i := range 10 {
			rec := running(t, st, fmt.Sprintf("run_u%d", i), "proc_gone")
			if !a.Unknown(ctx, rec) || !b.Unknown(ctx, rec) {
				t.Fatal("a run of a process without a heartbeat is not unknown")
			}
			if _, err := a.ResolveUnknown(ctx, rec.RunID, rec.AdmissionID, 2, nil); !errors.Is(err, ErrAdmissionMismatch) {
				t.Fatalf("wrong generation: %v", err)
			}
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for n, l := range []*Ledger{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[n] = l.ResolveUnknown(ctx, rec.RunID, rec.AdmissionID, 1, map[string]any{"interrupted": true})
				}()
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, ErrNotUnknown):
					t.Fatal(err)
				}
			}
			if won != 1 {
				t.Fatalf("%d resolutions won: %v", won, errs)
			}
			got, err := b.Get(ctx, rec.RunID)
			if err != nil || got.Status != Interrupted {
				t.Fatalf("%+v %v", got, err)
			}
		}
	})
}

// Recovery touches only the runs of processes that are gone: a run running under a live
// process (another ledger on the store, or a heartbeat from another host that has not expired)
// is that process's; once it is gone, the run is restart-unknown.
func TestRecoveryLeavesLiveOwnersAlone(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		a := open(t, st)
		adm, err := a.Admit(ctx, newRec("run_live", "s"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Claim(ctx, adm.Record.RunID); err != nil {
			t.Fatal(err)
		}
		// A process on another host: alive while its heartbeat lasts.
		far, _ := json.Marshal(heartbeat{Host: "elsewhere", PID: 1, Expires: time.Now().Add(time.Hour)})
		if err := st.PutKV(ctx, procPrefix+"proc_far", far); err != nil {
			t.Fatal(err)
		}
		farRun := running(t, st, "run_far", "proc_far")
		old, _ := json.Marshal(heartbeat{Host: "elsewhere", PID: 1, Expires: time.Now().Add(-time.Second)})
		if err := st.PutKV(ctx, procPrefix+"proc_old", old); err != nil {
			t.Fatal(err)
		}
		oldRun := running(t, st, "run_old", "proc_old")

		b := open(t, st)
		recs, err := b.Recover(ctx, nil)
		if err != nil || len(recs) != 3 {
			t.Fatalf("%d records: %v", len(recs), err)
		}
		for _, rec := range recs {
			want := rec.RunID == "run_old"
			if got := b.Unknown(ctx, rec); got != want {
				t.Fatalf("%s: unknown %v, want %v", rec.RunID, got, want)
			}
		}
		for _, rec := range []Record{adm.Record, farRun} {
			if _, err := b.ResolveUnknown(ctx, rec.RunID, rec.AdmissionID, 1, nil); !errors.Is(err, ErrNotUnknown) {
				t.Fatalf("resolving %s, whose process lives: %v", rec.RunID, err)
			}
		}
		if _, err := b.ResolveUnknown(ctx, oldRun.RunID, oldRun.AdmissionID, 1, nil); err != nil {
			t.Fatal(err)
		}
		// Recovery put the records it found running into their FIFOs, as their heads.
		for _, id := range []string{"run_far"} {
			if h, ok, err := b.Head(ctx, "s_"+id); err != nil || !ok || h.RunID != id {
				t.Fatalf("head of s_%s: %+v %v %v", id, h, ok, err)
			}
		}
		// The live process stops: its run is unknown now, for everyone.
		a.Close()
		rec, err := b.Get(ctx, adm.Record.RunID)
		if err != nil || !b.Unknown(ctx, rec) {
			t.Fatalf("the run of a closed process: %+v %v", rec, err)
		}
		if _, err := b.ResolveUnknown(ctx, rec.RunID, rec.AdmissionID, 1, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// A queued run in no FIFO is put back by recovery when its admitter is gone (it was recorded
// and the process died before acknowledging it, or the record predates FIFO records), in
// admission order; a losing duplicate of a keyed admission is dropped.
func TestRecoverRequeuesLostAdmissions(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	for i, id := range []string{"run_b", "run_a"} {
		rec := newRec(id, "s")
		rec.Status, rec.Order, rec.Version = Queued, int64(i+1), 1
		b, _ := json.Marshal(rec)
		if err := st.PutKV(ctx, recPrefix+id, b); err != nil {
			t.Fatal(err)
		}
	}
	l := open(t, st)
	if _, err := l.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	q, err := l.Queue(ctx, "s")
	if err != nil || len(q) != 2 || q[0] != "run_b" || q[1] != "run_a" {
		t.Fatalf("%v %v", q, err)
	}
}

// The compare-and-set refuses what does not match and writes nothing then.
func TestUpdateAborts(t *testing.T) {
	l := open(t, memstore.New())
	ctx := context.Background()
	rec, err := l.create(ctx, Record{RunID: "run_a", Status: Queued})
	if err != nil || rec.Version != 1 {
		t.Fatalf("%+v %v", rec, err)
	}
	if _, err := l.create(ctx, Record{RunID: "run_a"}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := l.Update(ctx, "run_a", func(r *Record) error { r.Status = Running; return ErrNotQueued }); !errors.Is(err, ErrNotQueued) {
		t.Fatalf("%v", err)
	}
	got, err := l.Get(ctx, "run_a")
	if err != nil || got.Status != Queued || got.Version != 1 {
		t.Fatalf("an aborted update wrote: %+v %v", got, err)
	}
	if _, err := l.Update(ctx, "run_missing", func(*Record) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("%v", err)
	}
}

// Settled records older than the retention are dropped with their keys; unsettled ones never
// are.
func TestSweep(t *testing.T) {
	st := memstore.New()
	l := open(t, st)
	ctx := context.Background()
	rec := newRec("run_k", "s")
	rec.IdemKey = "h"
	adm, err := l.Admit(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(ctx, adm.Record.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Settle(ctx, "run_k", Completed, nil, false); err != nil {
		t.Fatal(err)
	}
	running(t, st, "run_stuck", "proc_gone")
	n, err := l.Sweep(ctx, time.Now().Add(Retention+time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("swept %d: %v", n, err)
	}
	if _, err := l.Get(ctx, "run_stuck"); err != nil {
		t.Fatalf("an unsettled record was swept: %v", err)
	}
	if _, err := st.GetKV(ctx, idemKey("key_o", "h")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the key of a swept run: %v", err)
	}
}

// Follow reports another process's admissions and settlements.
func TestFollowSeesOtherProcess(t *testing.T) {
	st := memstore.New()
	a, b := open(t, st), open(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := a.Follow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Change, 64)
	go run(func(cs []Change) {
		for _, c := range cs {
			got <- c
		}
	})
	if _, err := b.Admit(context.Background(), newRec("run_f", "s_f")); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for !seen["run:run_f"] || !seen["fifo:s_f"] {
		select {
		case c := <-got:
			seen["run:"+c.RunID] = seen["run:"+c.RunID] || c.RunID != ""
			seen["fifo:"+c.SessionID] = seen["fifo:"+c.SessionID] || c.SessionID != ""
		case <-deadline:
			t.Fatalf("hints seen: %v", keys(seen))
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// FuzzList feeds arbitrary bytes as a stored run record: listing skips what does not decode.
func FuzzList(f *testing.F) {
	f.Add([]byte(`{"run_id":"run_1","status":"running","execution_generation":1,"process":"p"}`))
	f.Add([]byte(`{"run_id":7}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st := memstore.New()
		if err := st.PutKV(context.Background(), recPrefix+"run_x", b); err != nil {
			t.Fatal(err)
		}
		l := &Ledger{st: st, proc: "proc_me"}
		bad := 0
		recs, err := l.List(context.Background(), func(string, error) { bad++ })
		if err != nil {
			t.Fatal(err)
		}
		if len(recs)+bad != 1 {
			t.Fatalf("%d records, %d bad", len(recs), bad)
		}
	})
}
