// Package memstore is an in-memory store.Store with the same semantics as the badger store, for
// tests and as a baseline in benchmarks. Nothing survives Close.
package memstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/ids"
	"github.com/hermes-go/hermes/engine/store"
)

// Limits mirror the badger store so that both accept and refuse the same input.
const (
	maxTitleLen = 4096
	maxKVKeyLen = 4096
)

type lease struct {
	owner      string
	generation uint64 // kept after release so generations never repeat
	expires    time.Time
}

type session struct {
	rec      store.Session
	active   []store.Row // ascending ids
	archived []store.Row // ascending ids
	lease    lease
	events   []store.StoredEvent // the event log, contiguous seqs
}

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	closed   bool
	sessions map[string]*session
	titles   map[string]string // title -> session id
	kv       map[string][]byte
	lastRow  uint64
	hub      store.Hub
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		sessions: map[string]*session{},
		titles:   map[string]string{},
		kv:       map[string][]byte{},
	}
}

// lock takes the mutex and reports ErrClosed (releasing it) after Close.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	return nil
}

// Close drops the contents. Later calls return store.ErrClosed; Close itself is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.sessions, s.titles, s.kv = nil, nil, nil
	s.hub.Close()
	return nil
}

// ctxFence checks the fence a write's context carries (store.WithFence); s.mu is held.
func (s *Store) ctxFence(ctx context.Context) error {
	f, ok := store.FenceOf(ctx)
	if !ok {
		return nil
	}
	ss, ok := s.sessions[f.SessionID]
	if !ok {
		return fmt.Errorf("%w: session %s has no lease, write carries generation %d",
			store.ErrFenced, f.SessionID, f.Generation)
	}
	return ss.fence(store.Fence{Generation: f.Generation})
}

// Watch subscribes to change hints; see store.Store.
func (s *Store) Watch(ctx context.Context, in store.Interest) (*store.Subscription, error) {
	return s.hub.Subscribe(ctx, in)
}

func changed(sid string) store.Change { return store.Change{SessionID: sid} }

func now() time.Time { return time.Now().UTC() }

func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t.UTC()
}

func (s *Store) get(id string) (*session, error) {
	ss, ok := s.sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return ss, nil
}

func validateSessionID(id string) error {
	// The one identifier rule of every edge (ids.Check): an id a transport accepts is one the
	// store keeps under exactly that key, and JSON carries it unchanged.
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("%w: session id: %v", store.ErrInvalidRecord, err)
	}
	return nil
}

func validateTitle(title string) error {
	if len(title) > maxTitleLen {
		return fmt.Errorf("%w: title is %d bytes, limit %d", store.ErrInvalidRecord, len(title), maxTitleLen)
	}
	// The title index is keyed by the title's bytes; JSON would store a different string in
	// the record, and the two would disagree like a poisoned id.
	if !utf8.ValidString(title) {
		return fmt.Errorf("%w: title is not valid UTF-8", store.ErrInvalidRecord)
	}
	return nil
}

func validateKVKey(key string) error {
	if key == "" || len(key) > maxKVKeyLen {
		return fmt.Errorf("%w: kv key must be 1..%d bytes, got %d", store.ErrInvalidRecord, maxKVKeyLen, len(key))
	}
	return nil
}

// cloneSession copies in so that callers never share a map with the store. An empty Meta becomes
// nil, as it does in the badger store after a round trip through JSON.
func cloneSession(in store.Session) store.Session {
	if len(in.Meta) == 0 {
		in.Meta = nil
	} else {
		in.Meta = maps.Clone(in.Meta)
	}
	return in
}

func cloneRow(r store.Row) store.Row {
	if r.ToolCalls != nil {
		r.ToolCalls = append(json.RawMessage(nil), r.ToolCalls...)
	}
	return r
}

func cloneRows(rows []store.Row) []store.Row {
	out := make([]store.Row, len(rows))
	for i, r := range rows {
		out[i] = cloneRow(r)
	}
	return out
}

// prepareRows validates rows and returns stored-form copies with ids still unassigned.
func prepareRows(sid string, rows []store.Row, t time.Time) ([]store.Row, error) {
	out := make([]store.Row, len(rows))
	for i, r := range rows {
		if r.Role == "" {
			return nil, fmt.Errorf("%w: row %d has no role", store.ErrInvalidRecord, i)
		}
		if len(r.ToolCalls) > 0 && !json.Valid(r.ToolCalls) {
			return nil, fmt.Errorf("%w: row %d tool_calls is not valid JSON", store.ErrInvalidRecord, i)
		}
		if len(r.ToolCalls) > 0 {
			// Stored compacted, like the badger store's JSON encoding does.
			var buf bytes.Buffer
			if err := json.Compact(&buf, r.ToolCalls); err != nil {
				return nil, fmt.Errorf("%w: row %d tool_calls: %v", store.ErrInvalidRecord, i, err)
			}
			r.ToolCalls = buf.Bytes()
		} else {
			r.ToolCalls = nil
		}
		r.ID, r.SessionID, r.Active = 0, sid, true
		r.Time = orNow(r.Time, t)
		out[i] = r
	}
	return out, nil
}

func (ss *session) fence(f store.Fence) error {
	if f.Generation == 0 || f.Generation == ss.lease.generation {
		return nil
	}
	return fmt.Errorf("%w: session %s: write carries generation %d, current is %d",
		store.ErrFenced, ss.rec.ID, f.Generation, ss.lease.generation)
}

func (ss *session) hasActive(id uint64) bool {
	_, ok := slices.BinarySearchFunc(ss.active, id, func(r store.Row, id uint64) int {
		switch {
		case r.ID < id:
			return -1
		case r.ID > id:
			return 1
		}
		return 0
	})
	return ok
}

func (ss *session) touch(t time.Time) {
	ss.rec.UpdatedAt = t
	ss.rec.Version++
}

// insert assigns r the next row id and appends it to dst's active rows.
func (s *Store) insert(dst *session, r store.Row) store.Row {
	s.lastRow++
	r.ID, r.SessionID, r.Active = s.lastRow, dst.rec.ID, true
	dst.active = append(dst.active, r)
	return cloneRow(r)
}

// CreateSession stores a new session. See the badger store for defaults.
func (s *Store) CreateSession(ctx context.Context, sess store.Session) (store.Session, error) {
	if err := validateSessionID(sess.ID); err != nil {
		return store.Session{}, err
	}
	if err := validateTitle(sess.Title); err != nil {
		return store.Session{}, err
	}
	if err := s.lock(ctx); err != nil {
		return store.Session{}, err
	}
	defer s.mu.Unlock()
	if err := s.ctxFence(ctx); err != nil {
		return store.Session{}, err
	}
	if _, ok := s.sessions[sess.ID]; ok {
		return store.Session{}, fmt.Errorf("session %q: %w", sess.ID, store.ErrExists)
	}
	if owner, ok := s.titles[sess.Title]; sess.Title != "" && ok && owner != sess.ID {
		return store.Session{}, fmt.Errorf("title %q: %w", sess.Title, store.ErrTitleTaken)
	}
	rec := cloneSession(sess)
	rec.CreatedAt = orNow(rec.CreatedAt, now())
	rec.UpdatedAt = orNow(rec.UpdatedAt, rec.CreatedAt)
	rec.EndedAt = rec.EndedAt.UTC()
	rec.RowCount, rec.Rewinds, rec.Version = 0, 0, 1
	s.sessions[rec.ID] = &session{rec: rec}
	if rec.Title != "" {
		s.titles[rec.Title] = rec.ID
	}
	s.hub.Publish(changed(rec.ID))
	return cloneSession(rec), nil
}

// GetSession returns the session with id.
func (s *Store) GetSession(ctx context.Context, id string) (store.Session, error) {
	if err := s.lock(ctx); err != nil {
		return store.Session{}, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(id)
	if err != nil {
		return store.Session{}, err
	}
	return cloneSession(ss.rec), nil
}

// UpdateSession applies fn under compare-and-set. fn runs without the store's lock held, as in
// the badger store, so that both behave the same when fn is slow or re-enters the store.
func (s *Store) UpdateSession(ctx context.Context, id string, expectVersion uint64, fn func(*store.Session) error) (store.Session, error) {
	check := func(next *store.Session) error { return validateTitle(next.Title) }
	return store.Update(ctx, id, expectVersion, s.GetSession, fn, check, func(cur, next store.Session) (store.Session, bool, error) {
		return s.casSession(ctx, cur.Version, cloneSession(next))
	})
}

func (s *Store) casSession(ctx context.Context, seen uint64, next store.Session) (out store.Session, moved bool, err error) {
	if err := s.lock(ctx); err != nil {
		return store.Session{}, false, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(next.ID)
	if err != nil {
		return store.Session{}, false, err
	}
	if err := s.ctxFence(ctx); err != nil {
		return store.Session{}, false, err
	}
	stored := ss.rec
	if stored.Version != seen {
		return store.Session{}, true, nil
	}
	if next.Title != stored.Title && next.Title != "" {
		if owner, ok := s.titles[next.Title]; ok && owner != next.ID {
			return store.Session{}, false, fmt.Errorf("title %q: %w", next.Title, store.ErrTitleTaken)
		}
	}
	next.CreatedAt, next.RowCount, next.Rewinds = stored.CreatedAt, stored.RowCount, stored.Rewinds
	next.UpdatedAt, next.Version = now(), stored.Version+1
	next.EndedAt = next.EndedAt.UTC()
	if next.Title != stored.Title {
		if stored.Title != "" {
			delete(s.titles, stored.Title)
		}
		if next.Title != "" {
			s.titles[next.Title] = next.ID
		}
	}
	ss.rec = next
	s.hub.Publish(changed(next.ID))
	return cloneSession(next), false, nil
}

// ListSessions returns sessions newest first (by UpdatedAt, ties by id).
func (s *Store) ListSessions(ctx context.Context, o store.ListOptions) ([]store.Session, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Session
	for _, ss := range s.sessions {
		r := ss.rec
		if (o.Source == "" || r.Source == o.Source) && (o.ParentID == "" || r.ParentID == o.ParentID) {
			out = append(out, cloneSession(r))
		}
	}
	slices.SortFunc(out, func(a, b store.Session) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	return out, nil
}

// AppendRows appends rows and returns them as stored.
func (s *Store) AppendRows(ctx context.Context, sessionID string, f store.Fence, rows []store.Row) ([]store.Row, error) {
	t := now()
	prepared, err := prepareRows(sessionID, rows, t)
	if err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(sessionID)
	if err != nil {
		return nil, err
	}
	if err := ss.fence(f); err != nil {
		return nil, err
	}
	if err := s.ctxFence(ctx); err != nil {
		return nil, err
	}
	out := make([]store.Row, len(prepared))
	if len(prepared) == 0 {
		return out, nil
	}
	for i, r := range prepared {
		out[i] = s.insert(ss, r)
	}
	ss.rec.RowCount += int64(len(out))
	ss.touch(t)
	s.hub.Publish(changed(sessionID))
	return out, nil
}

// AppendRowsUsage appends rows and adds usage to the session's totals under one lock.
func (s *Store) AppendRowsUsage(ctx context.Context, sessionID string, f store.Fence, rows []store.Row, usage store.Usage) ([]store.Row, store.Session, error) {
	t := now()
	prepared, err := prepareRows(sessionID, rows, t)
	if err != nil {
		return nil, store.Session{}, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, store.Session{}, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(sessionID)
	if err != nil {
		return nil, store.Session{}, err
	}
	if err := ss.fence(f); err != nil {
		return nil, store.Session{}, err
	}
	if err := s.ctxFence(ctx); err != nil {
		return nil, store.Session{}, err
	}
	out := make([]store.Row, len(prepared))
	for i, r := range prepared {
		out[i] = s.insert(ss, r)
	}
	ss.rec.RowCount += int64(len(out))
	ss.rec.Usage.Add(usage)
	ss.touch(t)
	s.hub.Publish(changed(sessionID))
	return out, cloneSession(ss.rec), nil
}

// Rows returns rows of a session in row-id order.
func (s *Store) Rows(ctx context.Context, sessionID string, q store.RowQuery) ([]store.Row, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(sessionID)
	if err != nil {
		return nil, err
	}
	var all []store.Row
	for _, r := range ss.active {
		if r.ID > q.AfterID {
			all = append(all, r)
		}
	}
	if q.IncludeArchived {
		for _, r := range ss.archived {
			if r.ID > q.AfterID {
				all = append(all, r)
			}
		}
		slices.SortFunc(all, func(a, b store.Row) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
	}
	if q.Limit > 0 && len(all) > q.Limit {
		if q.Tail {
			all = all[len(all)-q.Limit:]
		} else {
			all = all[:q.Limit]
		}
	}
	return cloneRows(all), nil
}

// Rewind archives rows from beforeRowID on, re-inserts survivors under fresh ids and appends
// extra, atomically.
func (s *Store) Rewind(ctx context.Context, sessionID string, f store.Fence, beforeRowID uint64, extra []store.Row) (store.RewindResult, error) {
	t := now()
	prepared, err := prepareRows(sessionID, extra, t)
	if err != nil {
		return store.RewindResult{}, err
	}
	if err := s.lock(ctx); err != nil {
		return store.RewindResult{}, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(sessionID)
	if err != nil {
		return store.RewindResult{}, err
	}
	if err := ss.fence(f); err != nil {
		return store.RewindResult{}, err
	}
	if err := s.ctxFence(ctx); err != nil {
		return store.RewindResult{}, err
	}
	if beforeRowID != 0 && !ss.hasActive(beforeRowID) {
		return store.RewindResult{}, fmt.Errorf("session %q row %d: %w", sessionID, beforeRowID, store.ErrStaleRow)
	}
	// Archived rows keep their ids. ss.archived stays sorted by plain appending: every row still
	// active was inserted after the last rewind, with an id above any row archived before.
	old := ss.active
	ss.active = nil
	var res store.RewindResult
	for _, r := range old {
		if beforeRowID != 0 && r.ID < beforeRowID {
			res.Survivors = append(res.Survivors, s.insert(ss, r))
			continue
		}
		r.Active = false
		ss.archived = append(ss.archived, r)
		res.Archived++
	}
	for _, r := range prepared {
		res.Appended = append(res.Appended, s.insert(ss, r))
	}
	ss.rec.RowCount = int64(len(ss.active))
	ss.rec.Rewinds++
	ss.touch(t)
	s.hub.Publish(changed(sessionID))
	return res, nil
}

// CopyRows copies src's active rows up to uptoRowID into dst under fresh ids.
func (s *Store) CopyRows(ctx context.Context, src, dst string, uptoRowID uint64) (int, error) {
	if src == dst {
		return 0, fmt.Errorf("%w: cannot copy session %q into itself", store.ErrInvalidRecord, src)
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	from, err := s.get(src)
	if err != nil {
		return 0, err
	}
	to, err := s.get(dst)
	if err != nil {
		return 0, err
	}
	if err := s.ctxFence(ctx); err != nil {
		return 0, err
	}
	if uptoRowID != 0 && !from.hasActive(uptoRowID) {
		return 0, fmt.Errorf("session %q row %d: %w", src, uptoRowID, store.ErrStaleRow)
	}
	n := 0
	for _, r := range from.active {
		if uptoRowID != 0 && r.ID > uptoRowID {
			break
		}
		s.insert(to, cloneRow(r))
		to.rec.ForkRowID = r.ID
		n++
	}
	if n > 0 {
		to.rec.RowCount += int64(n)
		to.touch(now())
		s.hub.Publish(changed(dst))
	}
	return n, nil
}

// AcquireLease grants the lease when free, expired or already owner's; see the badger store.
func (s *Store) AcquireLease(ctx context.Context, sessionID, owner string, ttl time.Duration) (store.Lease, error) {
	if owner == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("%w: lease needs an owner and a positive ttl", store.ErrInvalidRecord)
	}
	if err := s.lock(ctx); err != nil {
		return store.Lease{}, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(sessionID)
	if err != nil {
		return store.Lease{}, err
	}
	t := now()
	l := &ss.lease
	if l.owner != owner {
		if l.owner != "" && t.Before(l.expires) {
			return store.Lease{}, fmt.Errorf("session %q held by %q until %s: %w",
				sessionID, l.owner, l.expires.Format(time.RFC3339Nano), store.ErrLeaseHeld)
		}
		l.owner = owner
		l.generation++
	}
	l.expires = t.Add(ttl)
	s.hub.Publish(changed(sessionID))
	return store.Lease{SessionID: sessionID, Owner: l.owner, Generation: l.generation, Expires: l.expires}, nil
}

// RenewLease extends a lease its holder still has; see store.Store.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if ttl <= 0 {
		return store.Lease{}, fmt.Errorf("%w: lease renewal needs a positive ttl", store.ErrInvalidRecord)
	}
	if err := s.lock(ctx); err != nil {
		return store.Lease{}, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(l.SessionID)
	if err != nil {
		return store.Lease{}, err
	}
	t := now()
	cur := &ss.lease
	if err := leaseLost(l, cur.owner, cur.generation, cur.expires, t); err != nil {
		return store.Lease{}, err
	}
	cur.expires = t.Add(ttl)
	s.hub.Publish(changed(l.SessionID))
	return store.Lease{SessionID: l.SessionID, Owner: cur.owner, Generation: cur.generation, Expires: cur.expires}, nil
}

// leaseLost refuses to renew l unless it is still the live lease described by the rest.
func leaseLost(l store.Lease, owner string, gen uint64, expires, t time.Time) error {
	switch {
	case gen != l.Generation || owner != l.Owner || owner == "":
		return fmt.Errorf("session %q lease generation %d of %q: now generation %d of %q: %w",
			l.SessionID, l.Generation, l.Owner, gen, owner, store.ErrLeaseLost)
	case !t.Before(expires):
		return fmt.Errorf("session %q lease generation %d expired at %s: %w",
			l.SessionID, gen, expires.Format(time.RFC3339Nano), store.ErrLeaseLost)
	}
	return nil
}

// GetLease returns the session's live lease; see store.Store.
func (s *Store) GetLease(ctx context.Context, sessionID string) (store.Lease, error) {
	if err := s.lock(ctx); err != nil {
		return store.Lease{}, err
	}
	defer s.mu.Unlock()
	if ss, ok := s.sessions[sessionID]; ok {
		if l := ss.lease; l.owner != "" && now().Before(l.expires) {
			return store.Lease{SessionID: sessionID, Owner: l.owner, Generation: l.generation, Expires: l.expires}, nil
		}
	}
	return store.Lease{}, fmt.Errorf("lease of session %q: %w", sessionID, store.ErrNotFound)
}

// ListLeases returns the live leases by session id.
func (s *Store) ListLeases(ctx context.Context) ([]store.Lease, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	t := now()
	var out []store.Lease
	for id, ss := range s.sessions {
		if l := ss.lease; l.owner != "" && t.Before(l.expires) {
			out = append(out, store.Lease{SessionID: id, Owner: l.owner, Generation: l.generation, Expires: l.expires})
		}
	}
	slices.SortFunc(out, func(a, b store.Lease) int { return strings.Compare(a.SessionID, b.SessionID) })
	return out, nil
}

// ReleaseLease gives up a lease; see the badger store.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	ss, ok := s.sessions[l.SessionID]
	if !ok {
		return nil
	}
	cur := &ss.lease
	switch {
	case cur.generation > l.Generation:
		return fmt.Errorf("session %q lease is at generation %d, release carries %d: %w",
			l.SessionID, cur.generation, l.Generation, store.ErrFenced)
	case cur.generation != l.Generation || cur.owner == "" || cur.owner != l.Owner:
		return nil
	}
	cur.owner, cur.expires = "", time.Time{}
	s.hub.Publish(changed(l.SessionID))
	return nil
}

// PutKV stores value under key.
func (s *Store) PutKV(ctx context.Context, key string, value []byte) error {
	if err := validateKVKey(key); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.ctxFence(ctx); err != nil {
		return err
	}
	s.kv[key] = append([]byte{}, value...)
	s.hub.Publish(store.Change{Key: key})
	return nil
}

// GetKV returns the value under key.
func (s *Store) GetKV(ctx context.Context, key string) ([]byte, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	v, ok := s.kv[key]
	if !ok {
		return nil, fmt.Errorf("kv %q: %w", key, store.ErrNotFound)
	}
	return append([]byte{}, v...), nil
}

// ListKV returns every key with prefix and its value.
func (s *Store) ListKV(ctx context.Context, prefix string) (map[string][]byte, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range s.kv {
		if strings.HasPrefix(k, prefix) {
			out[k] = append([]byte{}, v...)
		}
	}
	return out, nil
}

// DeleteKV removes key; a missing key is not an error.
func (s *Store) DeleteKV(ctx context.Context, key string) error {
	if err := validateKVKey(key); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.ctxFence(ctx); err != nil {
		return err
	}
	delete(s.kv, key)
	s.hub.Publish(store.Change{Key: key})
	return nil
}

// CompareAndSwapKV sets key to new (nil deletes it) when its value equals old (nil: absent).
func (s *Store) CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error) {
	if err := validateKVKey(key); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if err := s.ctxFence(ctx); err != nil {
		return false, err
	}
	cur, ok := s.kv[key]
	if ok != (old != nil) || (ok && !bytes.Equal(cur, old)) {
		return false, nil
	}
	if new == nil {
		if !ok {
			return true, nil
		}
		delete(s.kv, key)
	} else {
		s.kv[key] = append([]byte{}, new...)
	}
	s.hub.Publish(store.Change{Key: key})
	return true, nil
}

// AppendEvents appends to the session's event log; see store.Store.
func (s *Store) AppendEvents(ctx context.Context, sessionID string, f store.Fence, evs []store.StoredEvent) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	ss, err := s.get(sessionID)
	if err != nil {
		return err
	}
	if err := ss.fence(f); err != nil {
		return err
	}
	if err := s.ctxFence(ctx); err != nil {
		return err
	}
	var last uint64
	if n := len(ss.events); n > 0 {
		last = ss.events[n-1].Seq
	}
	gen := store.WriterGeneration(ctx, sessionID, f)
	if err := store.CheckEvents(sessionID, last, gen, evs); err != nil {
		return err
	}
	if len(evs) == 0 {
		return nil
	}
	for _, e := range evs {
		e.Data = slices.Clone(e.Data)
		e.Generation = gen
		ss.events = append(ss.events, e)
	}
	s.hub.Publish(changed(sessionID))
	return nil
}

// EventsSince returns the session's events after afterSeq; see store.Store.
func (s *Store) EventsSince(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]store.StoredEvent, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(sessionID)
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(ss.events, afterSeq+1, func(e store.StoredEvent, seq uint64) int {
		return cmp.Compare(e.Seq, seq)
	})
	evs := ss.events[i:]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	out := make([]store.StoredEvent, len(evs))
	for i, e := range evs {
		e.Data = slices.Clone(e.Data)
		out[i] = e
	}
	return out, nil
}

// LastEventSeq returns the seq of the session's last event; see store.Store.
func (s *Store) LastEventSeq(ctx context.Context, sessionID string) (uint64, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	ss, err := s.get(sessionID)
	if err != nil {
		return 0, err
	}
	if n := len(ss.events); n > 0 {
		return ss.events[n-1].Seq, nil
	}
	return 0, nil
}
