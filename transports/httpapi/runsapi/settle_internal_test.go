package runsapi

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/runs"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// outageStore is a store whose KV space is unavailable while down is set, as a database
// restart makes it; it counts the calls it refused.
type outageStore struct {
	store.Store
	down    atomic.Bool
	refused atomic.Int64
}

func (s *outageStore) GetKV(ctx context.Context, key string) ([]byte, error) {
	if s.down.Load() {
		s.refused.Add(1)
		return nil, store.ErrUnavailable
	}
	return s.Store.GetKV(ctx, key)
}

func (s *outageStore) CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error) {
	if s.down.Load() {
		s.refused.Add(1)
		return false, store.ErrUnavailable
	}
	return s.Store.CompareAndSwapKV(ctx, key, old, new)
}

// settling starts the runs of one process over st with run_1 admitted and claimed by it.
func settling(t *testing.T, st store.Store) (*Runs, *run) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l, err := runs.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	rs := &Runs{ctx: ctx, log: slog.New(slog.NewTextHandler(io.Discard, nil)), ledger: l, m: map[string]*run{}}
	rec := runRecord{RunID: "run_1", AdmissionID: "adm_1", Owner: "o", SessionID: "s_1", Prompt: "p", CreatedAt: time.Now().UTC()}
	if _, err := l.Admit(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if rec, err = l.Claim(ctx, rec.RunID); err != nil {
		t.Fatal(err)
	}
	return rs, newRun(rec, runRunning)
}

// A settlement the store refuses is not kept in memory apart from the record: the run reads
// as the record has it (running) until the write lands once the store is back, and then reads
// settled, the same in memory and in the record.
func TestSettleWaitsForTheStore(t *testing.T) {
	t.Parallel()
	st := &outageStore{Store: memstore.New()}
	rs, r := settling(t, st)
	st.down.Store(true)
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		rs.settle(r, runCompleted, map[string]any{"completed": true})
	}()
	for st.refused.Load() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-r.done:
		t.Fatal("the run settled in memory while its settlement was refused")
	default:
	}
	if got := r.getStatus(); got != runRunning {
		t.Fatalf("while the store is out the run reads %s, want running (its record's)", got)
	}
	st.down.Store(false)
	<-settled
	rec, err := rs.ledger.Get(context.Background(), "run_1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != runs.Completed || r.getStatus() != runCompleted {
		t.Fatalf("record %s, memory %s: want completed in both", rec.Status, r.getStatus())
	}
}

// A settlement retried after an outage finds the record settled otherwise (resolved through
// another process meanwhile): the record wins, in memory too.
func TestSettleRecordWins(t *testing.T) {
	t.Parallel()
	shared := memstore.New()
	st := &outageStore{Store: shared}
	rs, r := settling(t, st)
	other, err := runs.Open(context.Background(), shared) // another process, which reaches the store
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	st.down.Store(true)
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		rs.settle(r, runFailed, map[string]any{"completed": false})
	}()
	for st.refused.Load() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	// The record moves on without this process (as an operator's resolution would).
	if _, err := other.Update(context.Background(), "run_1", func(rec *runs.Record) error {
		rec.Status, rec.Result, rec.SettledAt = runs.Interrupted, map[string]any{"interrupted": true}, time.Now().UTC()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st.down.Store(false)
	<-settled
	if got := r.getStatus(); got != runInterrupted {
		t.Fatalf("memory reads %s, the record interrupted", got)
	}
}

// A run whose lease lapsed (restart-unknown) and which the process running it then settled
// after all has one log on every process: the process that saw the lapse, the one that first
// hears of the run settled, and the one that ran it — run.started, run.unknown at the time the
// lapse was written, then the terminal event. A client that read one of them up to run.unknown
// and reconnects to another gets the terminal event there.
func TestRunUnknownIsInEveryProcesssLog(t *testing.T) {
	st := memstore.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proc := func() *Runs {
		l, err := runs.Open(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return &Runs{ctx: ctx, log: slog.New(slog.NewTextHandler(io.Discard, nil)), ledger: l, m: map[string]*run{}}
	}
	saw, late := proc(), proc()
	running := runRecord{RunID: "run_u", AdmissionID: "adm_u", SessionID: "s_u", Status: recRunning, Process: "proc_A",
		Generation: 1, LeaseGeneration: 7, CreatedAt: time.Unix(1_700_000_000, 0).UTC(), StartedAt: time.Unix(1_700_000_001, 0).UTC()}
	lapsed := running
	lapsed.Lapsed, lapsed.LapsedAt = true, time.Unix(1_700_000_020, 0).UTC()
	settled := lapsed
	settled.Status, settled.SettledAt = runs.Interrupted, time.Unix(1_700_000_050, 0).UTC()
	settled.Result = map[string]any{"completed": false, "output": "", "turn_exit_reason": "lease_lost"}

	// One process mirrors the run while it runs elsewhere, reads the lapse, then the
	// settlement.
	rs := newRun(running, runRunning)
	saw.mu.Lock()
	saw.addLocked(rs)
	saw.mu.Unlock()
	saw.refresh(rs, lapsed)
	saw.derive(rs)
	deadline := time.Now().Add(10 * time.Second)
	for _, done, _ := rs.since(0); !done; _, done, _ = rs.since(0) {
		if time.Now().After(deadline) {
			t.Fatal("the log of the lapsed run does not end at run.unknown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	saw.refresh(rs, settled)
	<-rs.done

	// Another first hears of it settled.
	rl := late.recoveredRun(settled)
	late.derive(rl)
	<-rl.done

	// The process that ran it settles it after all (its settlement returns the record).
	rr := newRun(running, runRunning)
	rr.here = true
	rr.prefixLocked()
	rr.finish(settled, true, runInterrupted, settled.Result)

	want := logOf(t, rs)
	var names []any
	for _, l := range want {
		names = append(names, l.id, l.data["event"])
	}
	if len(want) != 3 || want[1].data["event"] != "run.unknown" || want[2].data["event"] != "run.interrupted" {
		t.Fatalf("the log of the process that saw the lapse: %v", names)
	}
	for name, r := range map[string]*run{"first hearing of it settled": rl, "that ran it": rr} {
		got := logOf(t, r)
		if len(got) != len(want) {
			t.Errorf("the process %s has %d events, want %d (%v)", name, len(got), len(want), names)
			continue
		}
		for i := range got {
			if got[i].id != want[i].id || got[i].data["event"] != want[i].data["event"] || got[i].data["timestamp"] != want[i].data["timestamp"] {
				t.Errorf("the process %s: event %d is %v, want %v", name, i, got[i], want[i])
			}
		}
		// Read up to run.unknown on the first process, then reconnected here.
		if evs, done, _ := r.since(want[1].id); len(evs) != 1 || !done {
			t.Errorf("the process %s: a reconnect after run.unknown gets %d events (done %v)", name, len(evs), done)
		}
	}
}
