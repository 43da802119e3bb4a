// Package runs is the durable ledger of runs: prompts admitted to a session's FIFO (POST
// /v1/runs), each executed once, in admission order, by one process, and settled with its
// outcome. The ledger admits, claims, settles, recovers and resolves; a surface maps its protocol
// to these verbs and keeps only what it streams.
//
// Every state change is a compare-and-set on one key of the store's KV space
// (Store.CompareAndSwapKV), so any number of processes or nodes sharing a store agree on it:
//
//   - a run record per run (recPrefix + run id), written before the run is acknowledged and
//     on every change of its durable status: queued → running → a terminal status;
//   - a FIFO record per session (fifoPrefix + session id): the unsettled runs in admission order
//     and the last position given out, so two admissions anywhere get distinct, gap-free
//     positions, and only the FIFO's head is ever claimed;
//   - an Idempotency-Key claim per (principal, key digest) (idemPrefix), so one key admits one run
//     across processes;
//   - the session lease a run's turn runs under (Record.LeaseGeneration, taken at the claim): a
//     run is running while that generation of its session's lease is held. Once it is not (the
//     holder was taken over, or its lease expired or was released with the run unsettled), a
//     process following the ledger takes the lease over, so that holder can write nothing more,
//     and marks the run Lapsed: restart-unknown, the same for every process, until its
//     executing process settles it after all or an operator resolves it with the exact
//     admission_id and execution_generation (see Ledger.Check);
//   - a heartbeat per process (procPrefix), which only decides who starts a queued head: the
//     process that admitted it while it is there, any process once it is gone.
package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Key prefixes in the store's KV space. Run records keep the prefix they were first stored
// under, so the records of an existing home stay readable.
const (
	recPrefix  = "httpapi/run/"
	fifoPrefix = "runs/fifo/"
	idemPrefix = "runs/idem/"
	procPrefix = "runs/proc/"
)

// Retention is how long a settled run's record (and so its Idempotency-Key) is kept.
const Retention = 24 * time.Hour

// Durable statuses. Running also covers waiting for an approval and stopping, which only the
// executing process observes; the terminal statuses are the surface's (completed, failed,
// cancelled, interrupted).
const (
	Queued      = "queued"
	Running     = "running"
	Completed   = "completed"
	Failed      = "failed"
	Cancelled   = "cancelled"
	Interrupted = "interrupted"
)

// Terminal reports whether status is a settled one.
func Terminal(status string) bool {
	switch status {
	case Completed, Failed, Cancelled, Interrupted:
		return true
	}
	return false
}

// Errors of the ledger's compare-and-sets.
var (
	ErrNotFound           = store.ErrNotFound
	ErrExists             = store.ErrExists
	ErrNotUnknown         = errors.New("run is not restart-unknown")
	ErrAdmissionMismatch  = errors.New("admission_id or execution_generation does not match the run")
	ErrSettled            = errors.New("run already settled")
	ErrNotQueued          = errors.New("run is no longer queued")
	ErrNotOwner           = errors.New("run is running under another process")
	ErrIdempotencyReused  = errors.New("Idempotency-Key was used with a different request")
	errInvalidRecordBytes = store.ErrInvalidRecord
)

// Record is the durable state of one run.
type Record struct {
	RunID       string `json:"run_id"`
	AdmissionID string `json:"admission_id"`
	// Generation counts the executions this admission was handed to: 0 while queued, 1 once a
	// process started it. resolve-unknown must name it, so a resolution meant for one execution
	// can never settle another.
	Generation int64 `json:"execution_generation"`
	// Owner is the principal that admitted the run: only it sees the run, and its
	// Idempotency-Keys are its own.
	Owner     string `json:"owner"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	// Process is the ledger that executes (or last executed) the run; Admitter the one that
	// admitted it.
	Process     string `json:"process,omitempty"`
	Admitter    string `json:"admitted_by,omitempty"`
	Fingerprint string `json:"fingerprint"` // sha256 of the request body and session key
	// IdemKey is sha256 of the Idempotency-Key, when the request had one.
	IdemKey string `json:"idempotency_key_sha256,omitempty"`
	Order   int64  `json:"order"` // admission time order (the FIFO record holds the positions)
	Prompt  string `json:"prompt"`
	Model   string `json:"model,omitempty"`
	// SwitchModel is the model the request named: the session moves to it when the run starts.
	SwitchModel string `json:"switch_model,omitempty"`
	SessionKey  string `json:"session_key,omitempty"`
	// LeaseGeneration is the generation of the session's lease the run's turn runs under,
	// taken when it was claimed (0: the store had no lease for the session; the run is then
	// alive while its process is). Lapsed is set once that lease was gone with the run still
	// running: the run is restart-unknown. It stays set once the run settles, and LapsedAt
	// says when the lapse was written: every process's log of the run says run.unknown from
	// these, at that time.
	LeaseGeneration uint64    `json:"lease_generation,omitempty"`
	Lapsed          bool      `json:"lapsed,omitempty"`
	LapsedAt        time.Time `json:"lapsed_at,omitzero"`
	// Ahead is how many runs of the session were ahead of this one when it was admitted.
	Ahead int `json:"ahead,omitempty"`
	// TurnID is the session turn the run's prompt became (set when it is known: at the claim,
	// or once the turn started in the process holding the session's lease), and EventFloor a
	// seq of the session's event log before that turn's first event: a process that does not
	// execute the run reads the turn's events from there.
	TurnID     string         `json:"turn_id,omitempty"`
	EventFloor uint64         `json:"event_floor,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	StartedAt  time.Time      `json:"started_at,omitzero"`
	SettledAt  time.Time      `json:"settled_at,omitzero"`
	Result     map[string]any `json:"result,omitempty"` // the terminal fields (completed, partial, …)
	Version    uint64         `json:"version"`          // bumped by every write
}

// Settled reports whether the run has its terminal status.
func (r *Record) Settled() bool { return Terminal(r.Status) }

// Expired reports whether a record may be dropped at now: settled, and older than Retention.
func (r *Record) Expired(now time.Time) bool {
	return r.Settled() && now.Sub(r.SettledAt) > Retention
}

// SHA256Hex is the digest the ledger keeps of fingerprints and Idempotency-Keys.
func SHA256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// lastOrder makes admission order strictly increasing within a process; the wall clock carries
// it across processes and restarts.
var lastOrder atomic.Int64

// NextOrder returns a strictly increasing admission-time stamp.
func NextOrder() int64 {
	for {
		last := lastOrder.Load()
		n := max(time.Now().UnixNano(), last+1)
		if lastOrder.CompareAndSwap(last, n) {
			return n
		}
	}
}

// fifo is a session's FIFO record.
type fifo struct {
	Next  int64    `json:"next"`  // the last position given out (positions start at 1)
	Queue []string `json:"queue"` // unsettled run ids, in admission order; [0] is the head
}

// idemEntry is an Idempotency-Key claim.
type idemEntry struct {
	RunID       string    `json:"run_id"`
	Fingerprint string    `json:"fingerprint"`
	At          time.Time `json:"at"`
}

func idemKey(owner, keyHash string) string { return idemPrefix + owner + "/" + keyHash }

// casLoop applies fn to the current value of key (nil: absent) and swaps in what it returns,
// retrying while another writer changes the key in between. fn returning an error aborts.
// keep (a nil new value with keep set) leaves the key as it is.
func casLoop(ctx context.Context, st store.Store, key string, fn func(cur []byte) (next []byte, keep bool, err error)) error {
	for {
		cur, err := st.GetKV(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			cur, err = nil, nil
		}
		if err != nil {
			return err
		}
		next, keep, err := fn(cur)
		if err != nil || keep {
			return err
		}
		ok, err := st.CompareAndSwapKV(ctx, key, cur, next)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func decodeRecord(key string, b []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.RunID == "" {
		if err == nil {
			err = errors.New("no run_id")
		}
		return rec, fmt.Errorf("run record %s: %w: %v", key, errInvalidRecordBytes, err)
	}
	return rec, nil
}

// Get reads a run's record (ErrNotFound).
func (l *Ledger) Get(ctx context.Context, runID string) (Record, error) {
	b, err := l.st.GetKV(ctx, recPrefix+runID)
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(runID, b)
}

// create writes a new record (version 1); ErrExists when the id is taken.
func (l *Ledger) create(ctx context.Context, rec Record) (Record, error) {
	rec.Version = 1
	b, err := json.Marshal(rec)
	if err != nil {
		return rec, err
	}
	ok, err := l.st.CompareAndSwapKV(ctx, recPrefix+rec.RunID, nil, b)
	if err != nil {
		return rec, err
	}
	if !ok {
		return rec, fmt.Errorf("run %s: %w", rec.RunID, store.ErrExists)
	}
	return rec, nil
}

// Update is the compare-and-set on one record: fn sees the stored record and either changes it
// or returns an error that aborts the write (and is returned). Writers racing on one record,
// in any process, are ordered by the store: the second sees what the first wrote.
func (l *Ledger) Update(ctx context.Context, runID string, fn func(*Record) error) (Record, error) {
	var out Record
	err := casLoop(ctx, l.st, recPrefix+runID, func(cur []byte) ([]byte, bool, error) {
		if cur == nil {
			return nil, false, fmt.Errorf("run %s: %w", runID, store.ErrNotFound)
		}
		rec, err := decodeRecord(runID, cur)
		if err != nil {
			return nil, false, err
		}
		if err := fn(&rec); err != nil {
			out = rec
			return nil, false, err
		}
		rec.Version++
		out = rec
		b, err := json.Marshal(rec)
		return b, false, err
	})
	return out, err
}

// List returns every record in admission order. Undecodable records are skipped and reported
// through bad, so one damaged entry cannot keep a server from starting.
func (l *Ledger) List(ctx context.Context, bad func(key string, err error)) ([]Record, error) {
	m, err := l.st.ListKV(ctx, recPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(m))
	for k, b := range m {
		rec, err := decodeRecord(k, b)
		if err != nil {
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

// Admission is what Admit did.
type Admission struct {
	Record   Record
	Position int64 // the run's position in its session's FIFO (from 1, gap-free)
	Ahead    int   // unsettled runs ahead of it
	// Replay is set instead when the Idempotency-Key already admitted a run: its id.
	Replay string
}

// Admit records a queued run and appends it to its session's FIFO: the record first, then the
// Idempotency-Key claim (when rec.IdemKey is set), then the FIFO position. A key that already
// admitted a run with the same fingerprint gives that run back (Admission.Replay) and writes
// nothing; with another fingerprint, ErrIdempotencyReused.
func (l *Ledger) Admit(ctx context.Context, rec Record) (Admission, error) {
	rec.Status, rec.Admitter, rec.Generation, rec.Process = Queued, l.proc, 0, ""
	if rec.Order == 0 {
		rec.Order = NextOrder()
	}
	rec, err := l.create(ctx, rec)
	if err != nil {
		return Admission{}, err
	}
	if rec.IdemKey != "" {
		winner, err := l.claimKey(ctx, rec)
		if err == nil && winner != rec.RunID {
			err = l.st.DeleteKV(ctx, recPrefix+rec.RunID)
			return Admission{Replay: winner}, err
		}
		if err != nil {
			_ = l.st.DeleteKV(ctx, recPrefix+rec.RunID)
			return Admission{}, err
		}
	}
	var pos int64
	var ahead int
	err = casLoop(ctx, l.st, fifoPrefix+rec.SessionID, func(cur []byte) ([]byte, bool, error) {
		f, err := decodeFIFO(cur)
		if err != nil {
			return nil, false, err
		}
		if f.Queue, err = l.unsettled(ctx, f.Queue); err != nil {
			return nil, false, err
		}
		f.Next++
		pos, ahead = f.Next, len(f.Queue)
		f.Queue = append(f.Queue, rec.RunID)
		b, err := json.Marshal(f)
		return b, false, err
	})
	if err != nil {
		return Admission{}, err
	}
	if ahead > 0 {
		// Every process shows a queued run's place the same way: from its record.
		if cur, err := l.Update(ctx, rec.RunID, func(r *Record) error { r.Ahead = ahead; return nil }); err == nil {
			rec = cur
		}
	}
	return Admission{Record: rec, Position: pos, Ahead: ahead}, nil
}

func decodeFIFO(b []byte) (fifo, error) {
	var f fifo
	if b == nil {
		return f, nil
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("run FIFO record: %w: %v", errInvalidRecordBytes, err)
	}
	return f, nil
}

// claimKey claims rec's Idempotency-Key for it, and returns the run that holds it: rec's own,
// or the run an earlier admission (in any process) claimed it for. ErrIdempotencyReused when
// that admission had another fingerprint. An expired claim is taken over.
func (l *Ledger) claimKey(ctx context.Context, rec Record) (string, error) {
	winner := rec.RunID
	mine, err := json.Marshal(idemEntry{RunID: rec.RunID, Fingerprint: rec.Fingerprint, At: rec.CreatedAt})
	if err != nil {
		return "", err
	}
	err = casLoop(ctx, l.st, idemKey(rec.Owner, rec.IdemKey), func(cur []byte) ([]byte, bool, error) {
		if cur == nil {
			return mine, false, nil
		}
		var e idemEntry
		if json.Unmarshal(cur, &e) != nil || time.Since(e.At) > Retention {
			return mine, false, nil
		}
		if e.RunID == rec.RunID {
			return nil, true, nil
		}
		if e.Fingerprint != rec.Fingerprint {
			return nil, false, ErrIdempotencyReused
		}
		winner = e.RunID
		return nil, true, nil
	})
	return winner, err
}

// Lookup returns the run an Idempotency-Key of owner admitted within Retention; conflict when
// it came with another fingerprint.
func (l *Ledger) Lookup(ctx context.Context, owner, keyHash, fingerprint string) (runID string, conflict bool, err error) {
	b, err := l.st.GetKV(ctx, idemKey(owner, keyHash))
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	var e idemEntry
	if json.Unmarshal(b, &e) != nil || time.Since(e.At) > Retention {
		return "", false, nil
	}
	if e.Fingerprint != fingerprint {
		return "", true, nil
	}
	return e.RunID, false, nil
}

// Head returns the record at the head of a session's FIFO: its first unsettled run (ok false
// when there is none). A settlement does not rewrite the FIFO (one synced write less per run):
// settled runs leave it at the next admission.
func (l *Ledger) Head(ctx context.Context, sessionID string) (Record, bool, error) {
	q, err := l.Queue(ctx, sessionID)
	if err != nil {
		return Record{}, false, err
	}
	for _, id := range q {
		rec, err := l.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidRecord) || (err == nil && rec.Settled()) {
			continue
		}
		if err != nil {
			return Record{}, false, err
		}
		return rec, true, nil
	}
	return Record{}, false, nil
}

// unsettled returns the ids of q whose runs are not settled (nor swept).
func (l *Ledger) unsettled(ctx context.Context, q []string) ([]string, error) {
	out := q[:0:0]
	for _, id := range q {
		rec, err := l.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidRecord) || (err == nil && rec.Settled()) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// Queue returns the ids of a session's unsettled runs in FIFO order.
func (l *Ledger) Queue(ctx context.Context, sessionID string) ([]string, error) {
	b, err := l.st.GetKV(ctx, fifoPrefix+sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := decodeFIFO(b)
	return f.Queue, err
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Claim hands a queued run to this ledger's process: running, execution generation + 1. Only a
// queued run at the head of its FIFO is claimed (ErrNotQueued otherwise), so of two processes
// claiming, one wins, and runs of a session start in admission order. The run is recorded
// under the session lease's generation its turn runs under: the fence ctx carries for the
// session (the engine claims a turn with its lease's), else the lease held now.
func (l *Ledger) Claim(ctx context.Context, runID string) (Record, error) {
	return l.ClaimTurn(ctx, runID, "")
}

// ClaimTurn is Claim for the session turn turnID ("": not known yet): the record keeps the
// turn and a seq of the session's event log before it, so any process can read the turn's
// events.
func (l *Ledger) ClaimTurn(ctx context.Context, runID, turnID string) (Record, error) {
	rec, err := l.Get(ctx, runID)
	if err != nil {
		return rec, err
	}
	head, ok, err := l.Head(ctx, rec.SessionID)
	if err != nil {
		return rec, err
	}
	if !ok || head.RunID != runID {
		return rec, ErrNotQueued
	}
	var gen uint64
	if f, ok := store.FenceOf(ctx); ok && f.SessionID == rec.SessionID {
		gen = f.Generation
	} else if lease, err := l.st.GetLease(ctx, rec.SessionID); err == nil {
		gen = lease.Generation
	} else if !errors.Is(err, store.ErrNotFound) {
		return rec, err
	}
	floor, err := l.st.LastEventSeq(ctx, rec.SessionID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return rec, err
	}
	return l.Update(ctx, runID, func(rec *Record) error {
		if rec.Status != Queued {
			return ErrNotQueued
		}
		rec.Status, rec.Generation, rec.Process, rec.StartedAt = Running, rec.Generation+1, l.proc, time.Now().UTC()
		rec.LeaseGeneration, rec.Lapsed, rec.LapsedAt = gen, false, time.Time{}
		rec.TurnID, rec.EventFloor = turnID, floor
		return nil
	})
}

// Settle writes the terminal status of a run this process runs (compare-and-set: a settled
// run, or one running under another process, is refused); the FIFO's head moves on. With
// queuedOnly, only a run still queued is settled (stopped before it started).
func (l *Ledger) Settle(ctx context.Context, runID, status string, res map[string]any, queuedOnly bool) (Record, error) {
	rec, err := l.Update(ctx, runID, func(rec *Record) error {
		switch {
		case rec.Settled():
			return ErrSettled
		case queuedOnly && rec.Status != Queued:
			return ErrNotQueued
		case rec.Status == Running && rec.Process != l.proc:
			return ErrNotOwner
		}
		rec.Status, rec.Result, rec.SettledAt = status, res, time.Now().UTC()
		return nil
	})
	return rec, err
}

// ResolveUnknown settles a restart-unknown run (running under a process that is gone) as
// interrupted with res, when admissionID and generation are exactly the run's. The check and
// the write are one compare-and-set: of concurrent resolutions, from any process, exactly one
// succeeds; the others get ErrNotUnknown.
func (l *Ledger) ResolveUnknown(ctx context.Context, runID, admissionID string, generation int64, res map[string]any) (Record, error) {
	if cur, err := l.Get(ctx, runID); err == nil {
		l.Unknown(ctx, cur) // lapses it when its lease is gone
	}
	rec, err := l.Update(ctx, runID, func(rec *Record) error {
		if !l.unknown(ctx, *rec) {
			return ErrNotUnknown
		}
		if rec.AdmissionID != admissionID || rec.Generation != generation {
			return ErrAdmissionMismatch
		}
		rec.Status, rec.Result, rec.SettledAt = Interrupted, res, time.Now().UTC()
		return nil
	})
	return rec, err
}

// Unknown reports whether rec is restart-unknown: running, and Lapsed (the session lease its
// turn ran under is gone), or, for a run claimed without a lease, running under a process that
// is gone. For a run another process runs it checks the lease first (Check), so a run whose
// holder exited on this host, or whose lease has been gone past the grace, is lapsed now.
// Whether a run is unknown is written in its record, so every process that reads it says the
// same.
func (l *Ledger) Unknown(ctx context.Context, rec Record) bool {
	_, unknown := l.Lapse(ctx, rec)
	return unknown
}

// Lapse is Unknown that also returns the record as it is now: when the check lapsed the run
// just then, the record with the lapse (its LapsedAt), else rec.
func (l *Ledger) Lapse(ctx context.Context, rec Record) (Record, bool) {
	if rec.Status == Running && rec.LeaseGeneration != 0 && !rec.Lapsed && rec.Process != l.proc && l.Check(ctx, rec).IsZero() {
		if cur, err := l.Get(ctx, rec.RunID); err == nil {
			rec = cur
		}
	}
	return rec, l.unknown(ctx, rec)
}

// unknown is Unknown from the record alone.
func (l *Ledger) unknown(ctx context.Context, rec Record) bool {
	if rec.Status != Running {
		return false
	}
	if rec.LeaseGeneration != 0 {
		return rec.Lapsed
	}
	return !l.Alive(ctx, rec.Process)
}

// Recover reads the ledger when a process starts: expired records are dropped with their
// Idempotency-Keys, the keys of the others are claimed again where they were lost, and a queued
// run that is in no FIFO (admitted by a process that died before it was acknowledged, or stored
// before FIFO records existed) takes its place at the end of its FIFO. It returns the records
// left, in admission order.
func (l *Ledger) Recover(ctx context.Context, bad func(key string, err error)) ([]Record, error) {
	recs, err := l.List(ctx, bad)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	queues := map[string][]string{}
	out := recs[:0]
	for _, rec := range recs {
		if rec.Expired(now) {
			if err := l.drop(ctx, rec); err != nil {
				return nil, err
			}
			continue
		}
		if rec.IdemKey != "" {
			winner, err := l.claimKey(ctx, rec)
			if err != nil && !errors.Is(err, ErrIdempotencyReused) {
				return nil, err
			}
			if (err != nil || winner != rec.RunID) && rec.Status == Queued && rec.Generation == 0 {
				// A losing duplicate of a keyed admission, never acknowledged.
				if err := l.st.DeleteKV(ctx, recPrefix+rec.RunID); err != nil {
					return nil, err
				}
				continue
			}
		}
		if !rec.Settled() {
			q, ok := queues[rec.SessionID]
			if !ok {
				if q, err = l.Queue(ctx, rec.SessionID); err != nil {
					return nil, err
				}
				queues[rec.SessionID] = q
			}
			if indexOf(q, rec.RunID) < 0 && (rec.Status != Queued || !l.Alive(ctx, rec.Admitter)) {
				if err := l.enqueueLost(ctx, rec); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, rec)
	}
	return out, nil
}

// enqueueLost appends a run missing from its FIFO.
func (l *Ledger) enqueueLost(ctx context.Context, rec Record) error {
	return casLoop(ctx, l.st, fifoPrefix+rec.SessionID, func(cur []byte) ([]byte, bool, error) {
		f, err := decodeFIFO(cur)
		if err != nil {
			return nil, false, err
		}
		if indexOf(f.Queue, rec.RunID) >= 0 {
			return nil, true, nil
		}
		f.Next++
		if rec.Status == Running {
			f.Queue = append([]string{rec.RunID}, f.Queue...) // it had started: it is the head
		} else {
			f.Queue = append(f.Queue, rec.RunID)
		}
		b, err := json.Marshal(f)
		return b, false, err
	})
}

// drop deletes a record and the Idempotency-Key claim that points at it.
func (l *Ledger) drop(ctx context.Context, rec Record) error {
	if err := l.st.DeleteKV(ctx, recPrefix+rec.RunID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if rec.IdemKey == "" {
		return nil
	}
	return casLoop(ctx, l.st, idemKey(rec.Owner, rec.IdemKey), func(cur []byte) ([]byte, bool, error) {
		var e idemEntry
		if cur == nil || (json.Unmarshal(cur, &e) == nil && e.RunID != rec.RunID) {
			return nil, true, nil
		}
		return nil, false, nil
	})
}

// Sweep drops the records of runs settled more than Retention before now, with their
// Idempotency-Keys, and the heartbeats of processes gone for as long. It returns how many
// records it dropped.
func (l *Ledger) Sweep(ctx context.Context, now time.Time) (int, error) {
	recs, err := l.List(ctx, nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		if !rec.Expired(now) {
			continue
		}
		if err := l.drop(ctx, rec); err != nil {
			return n, err
		}
		n++
	}
	beats, err := l.st.ListKV(ctx, procPrefix)
	if err != nil {
		return n, err
	}
	for k, b := range beats {
		var hb heartbeat
		if json.Unmarshal(b, &hb) == nil && now.Sub(hb.Expires) > Retention {
			_, _ = l.st.CompareAndSwapKV(ctx, k, b, nil)
		}
	}
	return n, nil
}

// Change is a hint that the ledger changed: a run record (RunID) or a session's FIFO
// (SessionID), or, with All, anything (hints were lost: re-read what you follow).
type Change struct {
	RunID     string
	SessionID string
	All       bool
}

// Follow subscribes to the ledger's changes, made by any process on the store. The
// subscription is in place when Follow returns; the returned function delivers the changes to fn
// until ctx ends (it returns then).
func (l *Ledger) Follow(ctx context.Context) (func(fn func([]Change)), error) {
	sub, err := l.st.Watch(ctx, store.Interest{KeyPrefixes: []string{recPrefix, fifoPrefix}})
	if err != nil {
		return nil, err
	}
	return func(fn func([]Change)) {
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-sub.C():
				if !ok {
					return
				}
			}
			changes, lost := sub.Take()
			var out []Change
			if lost {
				out = append(out, Change{All: true})
			}
			for _, c := range changes {
				switch {
				case strings.HasPrefix(c.Key, recPrefix):
					out = append(out, Change{RunID: strings.TrimPrefix(c.Key, recPrefix)})
				case strings.HasPrefix(c.Key, fifoPrefix):
					out = append(out, Change{SessionID: strings.TrimPrefix(c.Key, fifoPrefix)})
				}
			}
			if len(out) > 0 {
				fn(out)
			}
		}
	}, nil
}
