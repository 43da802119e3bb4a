package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Durable admission. Every run is written to the store's key-value space before it starts and
// on every change of its durable status (queued → running → terminal), so a process that comes
// back after a crash knows which runs it had admitted: a queued run still runs, and a run that
// had started but never settled is restart-unknown (its turn may or may not have done its work)
// until an operator resolves it with the exact admission_id and execution_generation.
//
// Keys: kvRun + run id → runRecord (JSON). The record also carries the run's Idempotency-Key
// (hashed, scoped to the owner), so the replay index is rebuilt from the records at start and a
// crash can never separate a run from its key.
const kvRun = "httpapi/run/"

// idempotencyRetention is how long a settled run's record (and so its Idempotency-Key) is kept.
const idempotencyRetention = 24 * time.Hour

// sweepEvery is how often expired records and keys are dropped.
const sweepEvery = time.Hour

// Durable statuses. running also covers waiting_for_approval and stopping, which only the
// process executing the run can observe.
const (
	recQueued  = "queued"
	recRunning = "running"
)

// Errors of the compare-and-set on a run record; the resolve-unknown handler maps them to
// 409s, and a runner that loses a race to them simply stops.
var (
	errNotUnknown        = errors.New("run is not restart-unknown")
	errAdmissionMismatch = errors.New("admission_id or execution_generation does not match the run")
	errRunSettled        = errors.New("run already settled")
	errRunNotQueued      = errors.New("run is no longer queued")
)

// runRecord is the durable state of one run.
type runRecord struct {
	RunID       string `json:"run_id"`
	AdmissionID string `json:"admission_id"`
	// Generation counts the executions this admission was handed to: 0 while queued, 1 once a
	// process started it. resolve-unknown must name it, so a resolution meant for one execution
	// can never settle another.
	Generation int64 `json:"execution_generation"`
	// Owner is the principal (a digest of the API key, see Principal) that admitted the run:
	// only it sees the run, and its Idempotency-Keys are its own.
	Owner     string `json:"owner"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	// Process is the id of the server instance that executes (or last executed) the run: a
	// running record of another process, found after a restart, is restart-unknown.
	Process     string `json:"process,omitempty"`
	Fingerprint string `json:"fingerprint"` // sha256 of the request body and session key
	// IdemKey is sha256 of the Idempotency-Key, when the request had one.
	IdemKey    string         `json:"idempotency_key_sha256,omitempty"`
	Order      int64          `json:"order"` // position in the session's FIFO (admission order)
	Prompt     string         `json:"prompt"`
	Model      string         `json:"model,omitempty"`
	SessionKey string         `json:"session_key,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	StartedAt  time.Time      `json:"started_at,omitzero"`
	SettledAt  time.Time      `json:"settled_at,omitzero"`
	Result     map[string]any `json:"result,omitempty"` // the terminal fields (completed, partial, …)
	Version    uint64         `json:"version"`          // bumped by every write
}

func (r *runRecord) settled() bool { return terminal(r.Status) }

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// lastOrder makes admission order strictly increasing within a process; the wall clock carries
// it across restarts.
var lastOrder atomic.Int64

func nextOrder() int64 {
	for {
		last := lastOrder.Load()
		n := max(time.Now().UnixNano(), last+1)
		if lastOrder.CompareAndSwap(last, n) {
			return n
		}
	}
}

// ledgerLocks serialise the read-compare-write of one record. The store's KV space has no
// compare-and-set of its own; a store directory is held by one process at a time (the store
// locks it), so a process-wide lock is a complete compare-and-set for it, shared by every
// Server of the process.
var ledgerLocks [64]sync.Mutex

func ledgerLock(runID string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(runID))
	return &ledgerLocks[h.Sum32()%uint32(len(ledgerLocks))]
}

// ledger reads and writes run records.
type ledger struct{ st store.Store }

func (l ledger) get(ctx context.Context, runID string) (runRecord, error) {
	var rec runRecord
	b, err := l.st.GetKV(ctx, kvRun+runID)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("run record %s: %w: %v", runID, store.ErrInvalidRecord, err)
	}
	return rec, nil
}

// create writes a new record (version 1).
func (l ledger) create(ctx context.Context, rec runRecord) (runRecord, error) {
	mu := ledgerLock(rec.RunID)
	mu.Lock()
	defer mu.Unlock()
	if _, err := l.st.GetKV(ctx, kvRun+rec.RunID); err == nil {
		return rec, fmt.Errorf("run %s: %w", rec.RunID, store.ErrExists)
	} else if !errors.Is(err, store.ErrNotFound) {
		return rec, err
	}
	rec.Version = 1
	return rec, l.write(ctx, rec)
}

// update is the compare-and-set: fn sees the stored record and either changes it or returns an
// error that aborts the write (and is returned). Two callers racing on one record are
// serialised, so the second sees what the first wrote.
func (l ledger) update(ctx context.Context, runID string, fn func(*runRecord) error) (runRecord, error) {
	mu := ledgerLock(runID)
	mu.Lock()
	defer mu.Unlock()
	rec, err := l.get(ctx, runID)
	if err != nil {
		return rec, err
	}
	if err := fn(&rec); err != nil {
		return rec, err
	}
	rec.Version++
	return rec, l.write(ctx, rec)
}

func (l ledger) write(ctx context.Context, rec runRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return l.st.PutKV(ctx, kvRun+rec.RunID, b)
}

func (l ledger) delete(ctx context.Context, runID string) error {
	mu := ledgerLock(runID)
	mu.Lock()
	defer mu.Unlock()
	return l.st.DeleteKV(ctx, kvRun+runID)
}

// list returns every record in admission order. Undecodable records are skipped and reported
// through bad, so one damaged entry cannot keep the server from starting.
func (l ledger) list(ctx context.Context, bad func(key string, err error)) ([]runRecord, error) {
	m, err := l.st.ListKV(ctx, kvRun)
	if err != nil {
		return nil, err
	}
	out := make([]runRecord, 0, len(m))
	for k, b := range m {
		var rec runRecord
		if err := json.Unmarshal(b, &rec); err != nil || rec.RunID == "" {
			if bad != nil {
				bad(k, err)
			}
			continue
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].RunID < out[j].RunID
	})
	return out, nil
}

// expired reports whether a record may be dropped at now: settled, and older than the
// idempotency retention. Unsettled records are never dropped.
func (r *runRecord) expired(now time.Time) bool {
	return r.settled() && now.Sub(r.SettledAt) > idempotencyRetention
}
