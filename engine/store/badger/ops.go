package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hermes-go/hermes/engine/store"
)

// errVersionMoved tells UpdateSession that the record changed after fn saw it.
var errVersionMoved = errors.New("session version moved")

// putSession stages the session record.
func putSession(w *writes, sess store.Session) error {
	b, err := encodeSession(sess)
	if err != nil {
		return err
	}
	w.set(sessionKey(sess.ID), b)
	w.sessions = append(w.sessions, sess)
	return nil
}

// claimTitle checks that title is free or already owned by sid.
func claimTitle(txn *badger.Txn, title, sid string) error {
	owner, err := getCopy(txn, titleKey(title))
	if err != nil {
		return err
	}
	if owner != nil && string(owner) != sid {
		return fmt.Errorf("title %q: %w", title, store.ErrTitleTaken)
	}
	return nil
}

// CreateSession stores a new session. CreatedAt and UpdatedAt default to now when zero; row
// counters start at zero and Version at 1.
func (s *Store) CreateSession(ctx context.Context, sess store.Session) (store.Session, error) {
	if err := validateSessionID(sess.ID); err != nil {
		return store.Session{}, err
	}
	if err := validateTitle(sess.Title); err != nil {
		return store.Session{}, err
	}
	sess.Meta = cloneMeta(sess.Meta)
	var out store.Session
	err := s.do(ctx, func(b *batchTxn, w *writes) error {
		if ok, err := exists(b.txn, sessionKey(sess.ID)); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("session %q: %w", sess.ID, store.ErrExists)
		}
		rec := sess
		if rec.Title != "" {
			if err := claimTitle(b.txn, rec.Title, rec.ID); err != nil {
				return err
			}
			w.set(titleKey(rec.Title), []byte(rec.ID))
		}
		rec.CreatedAt = orNow(rec.CreatedAt, b.now)
		rec.UpdatedAt = orNow(rec.UpdatedAt, rec.CreatedAt)
		rec.EndedAt = rec.EndedAt.UTC()
		rec.RowCount, rec.Rewinds, rec.Version = 0, 0, 1
		out = rec
		return putSession(w, rec)
	})
	if err != nil {
		return store.Session{}, err
	}
	return out, nil
}

func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t.UTC()
}

// cloneMeta copies m; an empty map becomes nil, as it would after a round trip through JSON.
func cloneMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// UpdateSession applies fn to a copy of the current record and writes it back if the version is
// still the one fn saw. fn runs in the caller's goroutine, never inside the committer, so a slow
// or failing fn cannot hold up other writers. The store owns ID, CreatedAt, UpdatedAt, RowCount,
// Rewinds and Version: changes fn makes to them are ignored, except that changing ID is an error.
func (s *Store) UpdateSession(ctx context.Context, id string, expectVersion uint64, fn func(*store.Session) error) (store.Session, error) {
	check := func(next *store.Session) error { return validateTitle(next.Title) }
	return store.Update(ctx, id, expectVersion, s.GetSession, fn, check, func(cur, next store.Session) (store.Session, bool, error) {
		next.Meta = cloneMeta(next.Meta)
		var out store.Session
		err := s.do(ctx, func(b *batchTxn, w *writes) error {
			stored, err := b.session(id)
			if err != nil {
				return err
			}
			if stored.Version != cur.Version {
				return errVersionMoved
			}
			rec := next
			rec.CreatedAt, rec.RowCount, rec.Rewinds = stored.CreatedAt, stored.RowCount, stored.Rewinds
			rec.UpdatedAt, rec.Version = b.now, stored.Version+1
			rec.EndedAt = rec.EndedAt.UTC()
			if rec.Title != stored.Title {
				if rec.Title != "" {
					if err := claimTitle(b.txn, rec.Title, id); err != nil {
						return err
					}
					w.set(titleKey(rec.Title), []byte(id))
				}
				if stored.Title != "" {
					w.del(titleKey(stored.Title))
				}
			}
			out = rec
			return putSession(w, rec)
		})
		if errors.Is(err, errVersionMoved) {
			return store.Session{}, true, nil
		}
		return out, false, err
	})
}

// fencedSession loads a session for an owner write and checks the write's fence.
func fencedSession(b *batchTxn, sid string, f store.Fence) (store.Session, error) {
	sess, err := b.session(sid)
	if err != nil {
		return store.Session{}, err
	}
	return sess, checkLeaseFence(b.txn, sid, f)
}

// checkLeaseFence checks f against the session's stored lease generation.
func checkLeaseFence(txn *badger.Txn, sid string, f store.Fence) error {
	if f.Generation == 0 {
		return nil
	}
	l, err := getLease(txn, sid)
	if err != nil {
		return err
	}
	return checkFence(sid, f, l.Generation)
}

// insertRow assigns r a fresh row id and stages it as an active row of sid.
func insertRow(b *batchTxn, w *writes, sid string, r store.Row) (store.Row, error) {
	r.ID, r.SessionID, r.Active = b.allocRowID(), sid, true
	v, err := encodeRow(r)
	if err != nil {
		return store.Row{}, err
	}
	w.set(rowKey(false, sid, r.ID), v)
	return r, nil
}

// AppendRows appends rows to a session, assigning row ids in order, and returns them as stored.
func (s *Store) AppendRows(ctx context.Context, sessionID string, f store.Fence, rows []store.Row) ([]store.Row, error) {
	prepared, err := prepareRows(sessionID, rows, time.Now().UTC())
	if err != nil {
		return nil, err
	}
	if len(prepared) == 0 {
		// Nothing to write; still answer for the session and the fence like a real append.
		err := s.view(ctx, func(txn *badger.Txn) error {
			if _, err := getSession(txn, sessionID); err != nil {
				return err
			}
			if cf, ok := store.FenceOf(ctx); ok {
				if err := checkLeaseFence(txn, cf.SessionID, store.Fence{Generation: cf.Generation}); err != nil {
					return err
				}
			}
			return checkLeaseFence(txn, sessionID, f)
		})
		if err != nil {
			return nil, err
		}
		return []store.Row{}, nil
	}
	out := make([]store.Row, len(prepared))
	if err := s.do(ctx, appendOp(sessionID, f, prepared, out, store.Usage{}, nil)); err != nil {
		return nil, err
	}
	return out, nil
}

// AppendRowsUsage appends rows and adds usage to the session's totals in one transaction (one
// commit, one sync). See store.Store.
func (s *Store) AppendRowsUsage(ctx context.Context, sessionID string, f store.Fence, rows []store.Row, usage store.Usage) ([]store.Row, store.Session, error) {
	prepared, err := prepareRows(sessionID, rows, time.Now().UTC())
	if err != nil {
		return nil, store.Session{}, err
	}
	out := make([]store.Row, len(prepared))
	var rec store.Session
	if err := s.do(ctx, appendOp(sessionID, f, prepared, out, usage, &rec)); err != nil {
		return nil, store.Session{}, err
	}
	return out, rec, nil
}

// appendOp appends prepared rows to sid, storing them as written into out, and adds usage to
// the session's totals. rec, when not nil, receives the session record as written.
func appendOp(sid string, f store.Fence, prepared, out []store.Row, usage store.Usage, rec *store.Session) func(*batchTxn, *writes) error {
	return func(b *batchTxn, w *writes) error {
		sess, err := fencedSession(b, sid, f)
		if err != nil {
			return err
		}
		for i, r := range prepared {
			if out[i], err = insertRow(b, w, sid, r); err != nil {
				return err
			}
		}
		sess.RowCount += int64(len(prepared))
		sess.Usage.Add(usage)
		sess.UpdatedAt = b.now
		sess.Version++
		if rec != nil {
			*rec = sess
		}
		return putSession(w, sess)
	}
}

// activeRows reads every active row of sid inside an update transaction, so that it sees the
// writes of earlier ops in the batch.
func activeRows(txn *badger.Txn, sid string) ([]store.Row, error) {
	return scanRows(txn, false, sid, store.RowQuery{})
}

// checkActiveRow refuses a row id that is not an active row of sid.
func checkActiveRow(txn *badger.Txn, sid string, id uint64) error {
	ok, err := exists(txn, rowKey(false, sid, id))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("session %q row %d: %w", sid, id, store.ErrStaleRow)
	}
	return nil
}

// Rewind archives the active rows from beforeRowID on, re-inserts the survivors under fresh ids
// and appends extra, all in one transaction. See store.Store.
func (s *Store) Rewind(ctx context.Context, sessionID string, f store.Fence, beforeRowID uint64, extra []store.Row) (store.RewindResult, error) {
	prepared, err := prepareRows(sessionID, extra, time.Now().UTC())
	if err != nil {
		return store.RewindResult{}, err
	}
	var res store.RewindResult
	err = s.do(ctx, func(b *batchTxn, w *writes) error {
		res = store.RewindResult{}
		sess, err := fencedSession(b, sessionID, f)
		if err != nil {
			return err
		}
		if beforeRowID != 0 {
			if err := checkActiveRow(b.txn, sessionID, beforeRowID); err != nil {
				return err
			}
		}
		rows, err := activeRows(b.txn, sessionID)
		if err != nil {
			return err
		}
		for _, r := range rows {
			w.del(rowKey(false, sessionID, r.ID))
			if beforeRowID != 0 && r.ID < beforeRowID {
				nr, err := insertRow(b, w, sessionID, r)
				if err != nil {
					return err
				}
				res.Survivors = append(res.Survivors, nr)
				continue
			}
			r.Active = false
			v, err := encodeRow(r)
			if err != nil {
				return err
			}
			w.set(rowKey(true, sessionID, r.ID), v)
			res.Archived++
		}
		for _, r := range prepared {
			nr, err := insertRow(b, w, sessionID, r)
			if err != nil {
				return err
			}
			res.Appended = append(res.Appended, nr)
		}
		sess.RowCount = int64(len(res.Survivors) + len(res.Appended))
		sess.Rewinds++
		sess.UpdatedAt = b.now
		sess.Version++
		return putSession(w, sess)
	})
	if err != nil {
		return store.RewindResult{}, err
	}
	return res, nil
}

// CopyRows copies the active rows of src up to uptoRowID into dst under fresh ids and records
// the last copied source row as dst's ForkRowID. A non-zero uptoRowID must be an active row of
// src (store.ErrStaleRow otherwise), so a branch is never cut at a row a rewind has replaced.
func (s *Store) CopyRows(ctx context.Context, src, dst string, uptoRowID uint64) (int, error) {
	if src == dst {
		return 0, fmt.Errorf("%w: cannot copy session %q into itself", store.ErrInvalidRecord, src)
	}
	var n int
	err := s.do(ctx, func(b *batchTxn, w *writes) error {
		n = 0
		if _, err := b.session(src); err != nil {
			return err
		}
		dsess, err := b.session(dst)
		if err != nil {
			return err
		}
		if uptoRowID != 0 {
			if err := checkActiveRow(b.txn, src, uptoRowID); err != nil {
				return err
			}
		}
		rows, err := activeRows(b.txn, src)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if uptoRowID != 0 && r.ID > uptoRowID {
				break
			}
			if _, err := insertRow(b, w, dst, r); err != nil {
				return err
			}
			dsess.ForkRowID = r.ID
			n++
		}
		if n == 0 {
			return nil
		}
		dsess.RowCount += int64(n)
		dsess.UpdatedAt = b.now
		dsess.Version++
		return putSession(w, dsess)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// AcquireLease grants sessionID's lease to owner when it is free, expired or already owner's,
// for ttl from now. The generation grows whenever the lease passes to a new owner (including
// re-acquiring after a release), which fences off writes carrying an older one.
func (s *Store) AcquireLease(ctx context.Context, sessionID, owner string, ttl time.Duration) (store.Lease, error) {
	if owner == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("%w: lease needs an owner and a positive ttl", store.ErrInvalidRecord)
	}
	var out store.Lease
	err := s.queueOp(ctx, func(b *batchTxn, w *writes) error {
		if _, err := b.session(sessionID); err != nil {
			return err
		}
		l, err := getLease(b.txn, sessionID)
		if err != nil {
			return err
		}
		if l.Owner != owner {
			if l.Owner != "" && b.now.Before(l.Expires) {
				return fmt.Errorf("session %q held by %q until %s: %w",
					sessionID, l.Owner, l.Expires.Format(time.RFC3339Nano), store.ErrLeaseHeld)
			}
			l.Owner = owner
			l.Generation++
		}
		l.Expires = b.now.Add(ttl)
		v, err := encodeLease(l)
		if err != nil {
			return err
		}
		w.set(leaseKey(sessionID), v)
		out = store.Lease{SessionID: sessionID, Owner: l.Owner, Generation: l.Generation, Expires: l.Expires}
		return nil
	})
	if err != nil {
		return store.Lease{}, err
	}
	return out, nil
}

// ReleaseLease gives up a lease. Releasing a lease that is already released is a no-op; releasing
// one that has since passed to a newer generation fails with store.ErrFenced.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	return s.queueOp(ctx, func(b *batchTxn, w *writes) error {
		cur, err := getLease(b.txn, l.SessionID)
		if err != nil {
			return err
		}
		switch {
		case cur.Generation > l.Generation:
			return fmt.Errorf("session %q lease is at generation %d, release carries %d: %w",
				l.SessionID, cur.Generation, l.Generation, store.ErrFenced)
		case cur.Generation != l.Generation || cur.Owner == "" || cur.Owner != l.Owner:
			return nil // already released, or never held under this generation
		}
		cur.Owner, cur.Expires = "", time.Time{}
		v, err := encodeLease(cur)
		if err != nil {
			return err
		}
		w.set(leaseKey(l.SessionID), v)
		return nil
	})
}

// RenewLease extends a lease its holder still has, for ttl from now; a lease that expired, was
// released or passed on fails with store.ErrLeaseLost.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if ttl <= 0 {
		return store.Lease{}, fmt.Errorf("%w: lease renewal needs a positive ttl", store.ErrInvalidRecord)
	}
	var out store.Lease
	err := s.queueOp(ctx, func(b *batchTxn, w *writes) error {
		cur, err := getLease(b.txn, l.SessionID)
		if err != nil {
			return err
		}
		switch {
		case cur.Generation != l.Generation || cur.Owner != l.Owner || cur.Owner == "":
			return fmt.Errorf("session %q lease generation %d of %q: now generation %d of %q: %w",
				l.SessionID, l.Generation, l.Owner, cur.Generation, cur.Owner, store.ErrLeaseLost)
		case !b.now.Before(cur.Expires):
			return fmt.Errorf("session %q lease generation %d expired at %s: %w",
				l.SessionID, cur.Generation, cur.Expires.Format(time.RFC3339Nano), store.ErrLeaseLost)
		}
		cur.Expires = b.now.Add(ttl)
		v, err := encodeLease(cur)
		if err != nil {
			return err
		}
		w.set(leaseKey(l.SessionID), v)
		out = store.Lease{SessionID: l.SessionID, Owner: cur.Owner, Generation: cur.Generation, Expires: cur.Expires}
		return nil
	})
	if err != nil {
		return store.Lease{}, err
	}
	return out, nil
}

// GetLease returns the session's live lease (held and not expired); see store.Store.
func (s *Store) GetLease(ctx context.Context, sessionID string) (store.Lease, error) {
	var l leaseRecord
	err := s.view(ctx, func(txn *badger.Txn) error {
		var err error
		l, err = getLease(txn, sessionID)
		return err
	})
	if err != nil {
		return store.Lease{}, err
	}
	if l.Owner == "" || !time.Now().Before(l.Expires) {
		return store.Lease{}, fmt.Errorf("lease of session %q: %w", sessionID, store.ErrNotFound)
	}
	return store.Lease{SessionID: sessionID, Owner: l.Owner, Generation: l.Generation, Expires: l.Expires}, nil
}

// ListLeases returns the live leases (held and not expired), by session id.
func (s *Store) ListLeases(ctx context.Context) ([]store.Lease, error) {
	var out []store.Lease
	now := time.Now()
	err := s.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(nsLease)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			var l leaseRecord
			if err := item.Value(func(v []byte) error {
				var err error
				l, err = decodeLease(item.Key(), v)
				return err
			}); err != nil {
				continue // reported by Doctor
			}
			if l.Owner != "" && now.Before(l.Expires) {
				out = append(out, store.Lease{SessionID: string(item.Key()[len(nsLease):]), Owner: l.Owner, Generation: l.Generation, Expires: l.Expires})
			}
		}
		return nil
	})
	return out, err
}

// Watch subscribes to change hints, published after each commit; see store.Store.
func (s *Store) Watch(ctx context.Context, in store.Interest) (*store.Subscription, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.active.Done()
	return s.hub.Subscribe(ctx, in)
}

// PutKV stores value under key.
func (s *Store) PutKV(ctx context.Context, key string, value []byte) error {
	if err := validateKVKey(key); err != nil {
		return err
	}
	v := append([]byte(nil), value...)
	return s.do(ctx, func(_ *batchTxn, w *writes) error {
		w.set(kvKey(key), v)
		return nil
	})
}

// DeleteKV removes key; deleting a missing key is not an error.
func (s *Store) DeleteKV(ctx context.Context, key string) error {
	if err := validateKVKey(key); err != nil {
		return err
	}
	return s.do(ctx, func(_ *batchTxn, w *writes) error {
		w.del(kvKey(key))
		return nil
	})
}

// CompareAndSwapKV sets key to new (nil deletes it) when its value equals old (nil: absent).
// The comparison and the write happen in the committer's transaction, so concurrent swaps of
// one key (from this process or, through the store process, from any) have one winner.
func (s *Store) CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error) {
	if err := validateKVKey(key); err != nil {
		return false, err
	}
	var nv []byte
	if new != nil {
		nv = append([]byte{}, new...)
	}
	var swapped bool
	err := s.do(ctx, func(b *batchTxn, w *writes) error {
		swapped = false
		k := kvKey(key)
		item, err := b.txn.Get(k)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			if old != nil {
				return nil
			}
			if nv == nil { // absent stays absent
				swapped = true
				return nil
			}
		case err != nil:
			return err
		default:
			if old == nil {
				return nil
			}
			cur, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if !bytes.Equal(cur, old) {
				return nil
			}
		}
		swapped = true
		if nv == nil {
			w.del(k)
		} else {
			w.set(k, nv)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return swapped, nil
}
