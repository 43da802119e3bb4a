package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hermes-go/hermes/engine/store"
)

// Group commit. Every write is an op handed to one committer goroutine. The committer takes
// whatever ops are queued, applies them in order inside as few badger transactions as possible
// and commits; with SyncWrites one commit is one fsync, so a hundred concurrent appends cost one
// disk flush instead of a hundred. Only after the commit returns are the waiters released, so a
// write that returns nil is on disk.
//
// Because the committer is the only writer, ops never conflict with each other, reads inside an
// op see every earlier op of the same batch, and the row-id counter can live in memory and be
// persisted in the same transaction as the rows that use it.

const (
	queueDepth     = 1024
	maxBatchOps    = 1024
	conflictRounds = 8
)

// errTooLarge marks an op whose writes do not fit in one badger transaction.
var errTooLarge = errors.New("operation too large for one transaction")

// mutation is one staged key write (or delete when del is set).
type mutation struct {
	key, val []byte
	del      bool
}

// writes collects one op's mutations. They reach the transaction only after the op validated
// everything, so an op that fails writes nothing and does not spoil the batch it rode in.
type writes struct {
	muts     []mutation
	sessions []store.Session // decoded form of the session records among muts
}

func (w *writes) set(key, val []byte) { w.muts = append(w.muts, mutation{key: key, val: val}) }
func (w *writes) del(key []byte)      { w.muts = append(w.muts, mutation{key: key, del: true}) }

func (w *writes) reset() {
	w.muts, w.sessions = w.muts[:0], w.sessions[:0]
}

// batchTxn is what an op sees: the batch's transaction (with every earlier op's writes applied)
// and the row-id counter.
type batchTxn struct {
	s        *Store
	txn      *badger.Txn
	next     uint64 // next row id to hand out
	now      time.Time
	sessions map[string]store.Session // records written by earlier ops of this transaction
}

// session returns the record of id as the op must see it: as written earlier in this
// transaction, else as committed. Nearly every write reads and rewrites its session, so the
// committer keeps committed records decoded rather than parsing JSON for each op.
func (b *batchTxn) session(id string) (store.Session, error) {
	if sess, ok := b.sessions[id]; ok {
		return sess, nil
	}
	if sess, ok := b.s.sessionCache[id]; ok {
		return sess, nil
	}
	sess, err := getSession(b.txn, id)
	if err != nil {
		return store.Session{}, err
	}
	// Not in this transaction's writes, so what the transaction read is the committed record.
	b.s.cacheSession(sess)
	return sess, nil
}

// allocRowID hands out the next row id. The committer persists the high-water mark in the same
// transaction as the op that used it, so an id is never handed out twice, even across a crash.
func (b *batchTxn) allocRowID() uint64 {
	id := b.next
	b.next++
	return id
}

// maxCachedSessions bounds the committer's session cache (about a kilobyte per entry).
const maxCachedSessions = 2048

// cacheSession records a committed session. Only the committer calls it.
func (s *Store) cacheSession(sess store.Session) {
	if _, ok := s.sessionCache[sess.ID]; !ok && len(s.sessionCache) >= maxCachedSessions {
		for id := range s.sessionCache { // evict an arbitrary entry
			delete(s.sessionCache, id)
			break
		}
	}
	s.sessionCache[sess.ID] = sess
}

// op is one queued write. apply must be a function of the transaction state only: the committer
// may run it more than once (conflict retry, or when the batch is split) and keeps the outcome of
// the run that committed.
type op struct {
	apply func(b *batchTxn, w *writes) error
	err   error
	done  chan struct{}
}

// enter registers a caller with the store so that Close waits for it. Callers defer s.active.Done.
func (s *Store) enter() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	s.active.Add(1)
	return nil
}

// do queues a write and waits for its commit. Once queued, the outcome is decided within one
// commit, so do waits for it even if ctx ends: the caller then learns what really happened.
// The fence ctx carries (store.WithFence) is checked inside the write's transaction.
func (s *Store) do(ctx context.Context, apply func(b *batchTxn, w *writes) error) error {
	if f, ok := store.FenceOf(ctx); ok {
		inner := apply
		apply = func(b *batchTxn, w *writes) error {
			if err := checkLeaseFence(b.txn, f.SessionID, store.Fence{Generation: f.Generation}); err != nil {
				return err
			}
			return inner(b, w)
		}
	}
	return s.queueOp(ctx, apply)
}

// queueOp queues a write without looking at a fence (leases are not owner writes).
func (s *Store) queueOp(ctx context.Context, apply func(b *batchTxn, w *writes) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.active.Done()
	o := &op{apply: apply, done: make(chan struct{})}
	select {
	case s.queue <- o:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-o.done
	return o.err
}

// commitLoop is the committer goroutine. Close stops it only after every caller has left, so
// the queue is empty when quit closes.
func (s *Store) commitLoop() {
	defer s.workers.Done()
	batch := make([]*op, 0, maxBatchOps)
	for {
		select {
		case o := <-s.queue:
			batch = append(batch[:0], o)
		case <-s.quit:
			return
		}
	drain:
		for len(batch) < maxBatchOps {
			select {
			case o := <-s.queue:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		s.commitBatch(batch)
		for i, o := range batch {
			close(o.done)
			batch[i] = nil
		}
	}
}

// commitBatch settles every op of the batch, in order, using as few transactions as fit.
func (s *Store) commitBatch(ops []*op) {
	for len(ops) > 0 {
		n := s.commitPrefix(ops)
		ops = ops[n:]
	}
}

// commitPrefix commits a leading run of ops in one transaction and returns how many ops it
// settled (at least one).
func (s *Store) commitPrefix(ops []*op) int {
	limit := len(ops)
	for round := 0; ; round++ {
		settled, split, err := s.tryCommit(ops[:limit])
		switch {
		case split > 0:
			// ops[split] did not fit behind the ones before it: commit those alone, then let
			// ops[split] start the next transaction.
			limit = split
			round--
		case errors.Is(err, badger.ErrConflict) && round < conflictRounds:
			// Cannot happen while the committer is the only writer; retrying is still the
			// correct answer should badger ever report one.
		case err != nil:
			for _, o := range ops[:settled] {
				if o.err == nil {
					o.err = fmt.Errorf("commit: %w", err)
				}
			}
			return settled
		default:
			return settled
		}
	}
}

// tryCommit applies ops to a fresh transaction and commits it. It returns how many ops it
// settled; split > 0 means ops[split] overflowed the transaction and the caller should retry
// with ops[:split]; err is a commit error for the settled ops.
func (s *Store) tryCommit(ops []*op) (settled, split int, err error) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	b := &batchTxn{s: s, txn: txn, next: s.nextRow, now: time.Now().UTC(), sessions: map[string]store.Session{}}
	written := 0
	var w writes
	changes := map[store.Change]struct{}{}
	for i, o := range ops {
		w.reset()
		next := b.next
		if o.err = o.apply(b, &w); o.err != nil {
			b.next = next
			continue
		}
		if b.next != next {
			w.set(keySeq, encodeUint64(b.next-1))
		}
		if err := flush(txn, w.muts); err != nil {
			if written > 0 {
				return 0, i, nil
			}
			// The op does not fit even alone. Nothing else has been written, so the ops before
			// it (all failed validation) and this one are settled and the txn is dropped.
			if errors.Is(err, badger.ErrTxnTooBig) {
				err = errTooLarge
			}
			o.err = fmt.Errorf("%w: %v", store.ErrInvalidRecord, err)
			return i + 1, 0, nil
		}
		for _, sess := range w.sessions {
			b.sessions[sess.ID] = sess
		}
		for _, m := range w.muts {
			if c, ok := changeOf(m.key); ok {
				changes[c] = struct{}{}
			}
		}
		written++
	}
	if written == 0 {
		return len(ops), 0, nil
	}
	err = txn.Commit()
	// Ids handed out in a failed commit are burned rather than reused: a commit that fails late
	// may still have reached the log.
	s.nextRow = b.next
	if err != nil {
		// Likewise the committed state is uncertain: forget what was cached.
		clear(s.sessionCache)
		return len(ops), 0, err
	}
	for _, sess := range b.sessions {
		s.cacheSession(sess)
	}
	// Published before the writers are released, so a writer's own watch has the hint by the
	// time its call returns.
	list := make([]store.Change, 0, len(changes))
	for c := range changes {
		list = append(list, c)
	}
	s.hub.Publish(list...)
	return len(ops), 0, nil
}

func flush(txn *badger.Txn, muts []mutation) error {
	for _, m := range muts {
		var err error
		if m.del {
			err = txn.Delete(m.key)
		} else {
			err = txn.Set(m.key, m.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
