package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// storeOps are the operation labels of hermes_store_operation_seconds.
var storeOps = []string{
	"create_session",
	"get_session",
	"update_session",
	"list_sessions",
	"append_rows",
	"append_rows_usage",
	"rows",
	"rewind",
	"copy_rows",
	"acquire_lease",
	"renew_lease",
	"release_lease",
	"get_lease",
	"list_leases",
	"watch",
	"put_kv",
	"get_kv",
	"list_kv",
	"delete_kv",
	"cas_kv",
	"append_events",
	"events_since",
	"last_event_seq",
}

// Store decorates st: every operation's latency goes to hermes_store_operation_seconds and
// its failures to hermes_store_errors_total (store.ErrNotFound is an answer, not a failure).
// The histogram children are looked up once, so an operation costs two clock reads and one
// observation. Close passes through.
func (m *Metrics) Store(st store.Store) store.Store { return &timedStore{st: st, m: m} }

type timedStore struct {
	st store.Store
	m  *Metrics
}

var _ store.Store = (*timedStore)(nil)

// done observes one operation that started at start and ended with err.
func (t *timedStore) done(op string, start time.Time, err error) {
	t.m.storeObs[op].Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.m.storeErrors.WithLabelValues(op).Inc()
	}
}

func (t *timedStore) Close() error { return t.st.Close() }

func (t *timedStore) CreateSession(ctx context.Context, s store.Session) (store.Session, error) {
	start := time.Now()
	out, err := t.st.CreateSession(ctx, s)
	t.done("create_session", start, err)
	return out, err
}

func (t *timedStore) GetSession(ctx context.Context, id string) (store.Session, error) {
	start := time.Now()
	out, err := t.st.GetSession(ctx, id)
	t.done("get_session", start, err)
	return out, err
}

func (t *timedStore) UpdateSession(ctx context.Context, id string, expectVersion uint64, fn func(*store.Session) error) (store.Session, error) {
	start := time.Now()
	out, err := t.st.UpdateSession(ctx, id, expectVersion, fn)
	t.done("update_session", start, err)
	return out, err
}

func (t *timedStore) ListSessions(ctx context.Context, o store.ListOptions) ([]store.Session, error) {
	start := time.Now()
	out, err := t.st.ListSessions(ctx, o)
	t.done("list_sessions", start, err)
	return out, err
}

func (t *timedStore) AppendRows(ctx context.Context, sessionID string, f store.Fence, rows []store.Row) ([]store.Row, error) {
	start := time.Now()
	out, err := t.st.AppendRows(ctx, sessionID, f, rows)
	t.done("append_rows", start, err)
	return out, err
}

func (t *timedStore) AppendRowsUsage(ctx context.Context, sessionID string, f store.Fence, rows []store.Row, usage store.Usage) ([]store.Row, store.Session, error) {
	start := time.Now()
	out, rec, err := t.st.AppendRowsUsage(ctx, sessionID, f, rows, usage)
	t.done("append_rows_usage", start, err)
	return out, rec, err
}

func (t *timedStore) Rows(ctx context.Context, sessionID string, q store.RowQuery) ([]store.Row, error) {
	start := time.Now()
	out, err := t.st.Rows(ctx, sessionID, q)
	t.done("rows", start, err)
	return out, err
}

func (t *timedStore) Rewind(ctx context.Context, sessionID string, f store.Fence, beforeRowID uint64, extra []store.Row) (store.RewindResult, error) {
	start := time.Now()
	out, err := t.st.Rewind(ctx, sessionID, f, beforeRowID, extra)
	t.done("rewind", start, err)
	return out, err
}

func (t *timedStore) CopyRows(ctx context.Context, src, dst string, uptoRowID uint64) (int, error) {
	start := time.Now()
	out, err := t.st.CopyRows(ctx, src, dst, uptoRowID)
	t.done("copy_rows", start, err)
	return out, err
}

func (t *timedStore) AcquireLease(ctx context.Context, sessionID, owner string, ttl time.Duration) (store.Lease, error) {
	start := time.Now()
	out, err := t.st.AcquireLease(ctx, sessionID, owner, ttl)
	t.done("acquire_lease", start, err)
	return out, err
}

func (t *timedStore) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	start := time.Now()
	out, err := t.st.RenewLease(ctx, l, ttl)
	t.done("renew_lease", start, err)
	return out, err
}

func (t *timedStore) ReleaseLease(ctx context.Context, l store.Lease) error {
	start := time.Now()
	err := t.st.ReleaseLease(ctx, l)
	t.done("release_lease", start, err)
	return err
}

func (t *timedStore) GetLease(ctx context.Context, sessionID string) (store.Lease, error) {
	start := time.Now()
	out, err := t.st.GetLease(ctx, sessionID)
	t.done("get_lease", start, err)
	return out, err
}

func (t *timedStore) ListLeases(ctx context.Context) ([]store.Lease, error) {
	start := time.Now()
	out, err := t.st.ListLeases(ctx)
	t.done("list_leases", start, err)
	return out, err
}

func (t *timedStore) Watch(ctx context.Context, in store.Interest) (*store.Subscription, error) {
	start := time.Now()
	out, err := t.st.Watch(ctx, in)
	t.done("watch", start, err)
	return out, err
}

func (t *timedStore) PutKV(ctx context.Context, key string, value []byte) error {
	start := time.Now()
	err := t.st.PutKV(ctx, key, value)
	t.done("put_kv", start, err)
	return err
}

func (t *timedStore) GetKV(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	out, err := t.st.GetKV(ctx, key)
	t.done("get_kv", start, err)
	return out, err
}

func (t *timedStore) ListKV(ctx context.Context, prefix string) (map[string][]byte, error) {
	start := time.Now()
	out, err := t.st.ListKV(ctx, prefix)
	t.done("list_kv", start, err)
	return out, err
}

func (t *timedStore) DeleteKV(ctx context.Context, key string) error {
	start := time.Now()
	err := t.st.DeleteKV(ctx, key)
	t.done("delete_kv", start, err)
	return err
}

func (t *timedStore) CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error) {
	start := time.Now()
	ok, err := t.st.CompareAndSwapKV(ctx, key, old, new)
	t.done("cas_kv", start, err)
	return ok, err
}

func (t *timedStore) AppendEvents(ctx context.Context, sessionID string, f store.Fence, evs []store.StoredEvent) error {
	start := time.Now()
	err := t.st.AppendEvents(ctx, sessionID, f, evs)
	t.done("append_events", start, err)
	return err
}

func (t *timedStore) EventsSince(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]store.StoredEvent, error) {
	start := time.Now()
	out, err := t.st.EventsSince(ctx, sessionID, afterSeq, limit)
	t.done("events_since", start, err)
	return out, err
}

func (t *timedStore) LastEventSeq(ctx context.Context, sessionID string) (uint64, error) {
	start := time.Now()
	out, err := t.st.LastEventSeq(ctx, sessionID)
	t.done("last_event_seq", start, err)
	return out, err
}
