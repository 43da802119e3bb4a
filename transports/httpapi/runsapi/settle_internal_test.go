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
