package store

import "context"

// SessionFence is a lease generation of a named session, carried by a write's context.
type SessionFence struct {
	SessionID  string
	Generation uint64
}

type fenceKey struct{}

// WithFence returns a context whose writes carry generation gen of sessionID's lease. Every
// store checks it in the same transaction as the write (the badger transaction, the memstore
// lock, the store process's badger transaction) and refuses the write with ErrFenced when gen
// is no longer the session's current generation. A zero generation or an empty id carries no
// fence. A context carries at most one fence: a later WithFence replaces an earlier one.
func WithFence(ctx context.Context, sessionID string, gen uint64) context.Context {
	if sessionID == "" || gen == 0 {
		return ctx
	}
	return context.WithValue(ctx, fenceKey{}, SessionFence{SessionID: sessionID, Generation: gen})
}

// FenceOf returns the fence ctx carries, if any. Stores call it on every write.
func FenceOf(ctx context.Context) (SessionFence, bool) {
	f, ok := ctx.Value(fenceKey{}).(SessionFence)
	return f, ok
}

// WriterGeneration is the lease generation a write to sessionID carries: f's, else the
// context's fence when it names the same session, else 0 (unfenced).
func WriterGeneration(ctx context.Context, sessionID string, f Fence) uint64 {
	if f.Generation != 0 {
		return f.Generation
	}
	if cf, ok := FenceOf(ctx); ok && cf.SessionID == sessionID {
		return cf.Generation
	}
	return 0
}

// Fenced returns a view of st for the holder of generation gen of sessionID's lease: every
// write through it carries that generation (AppendRows and Rewind of that session as their
// Fence argument when it is zero, every write in its context), so once another holder has taken
// the lease each of them fails with ErrFenced and writes nothing. Reads pass through. Closing
// the view does not close st. With gen zero the view is st's unfenced behaviour, which is what a
// single process that takes no leases uses.
func Fenced(st Store, sessionID string, gen uint64) Store {
	return fenced{Store: st, sid: sessionID, gen: gen}
}

type fenced struct {
	Store
	sid string
	gen uint64
}

func (f fenced) ctx(ctx context.Context) context.Context { return WithFence(ctx, f.sid, f.gen) }

func (f fenced) fence(sessionID string, given Fence) Fence {
	if given.Generation == 0 && sessionID == f.sid {
		return Fence{Generation: f.gen}
	}
	return given
}

func (f fenced) CreateSession(ctx context.Context, s Session) (Session, error) {
	return f.Store.CreateSession(f.ctx(ctx), s)
}

func (f fenced) UpdateSession(ctx context.Context, id string, expectVersion uint64, fn func(*Session) error) (Session, error) {
	return f.Store.UpdateSession(f.ctx(ctx), id, expectVersion, fn)
}

func (f fenced) AppendRows(ctx context.Context, sessionID string, fc Fence, rows []Row) ([]Row, error) {
	return f.Store.AppendRows(f.ctx(ctx), sessionID, f.fence(sessionID, fc), rows)
}

func (f fenced) AppendRowsUsage(ctx context.Context, sessionID string, fc Fence, rows []Row, usage Usage) ([]Row, Session, error) {
	return f.Store.AppendRowsUsage(f.ctx(ctx), sessionID, f.fence(sessionID, fc), rows, usage)
}

func (f fenced) Rewind(ctx context.Context, sessionID string, fc Fence, beforeRowID uint64, extra []Row) (RewindResult, error) {
	return f.Store.Rewind(f.ctx(ctx), sessionID, f.fence(sessionID, fc), beforeRowID, extra)
}

func (f fenced) AppendEvents(ctx context.Context, sessionID string, fc Fence, evs []StoredEvent) error {
	return f.Store.AppendEvents(f.ctx(ctx), sessionID, f.fence(sessionID, fc), evs)
}

func (f fenced) CopyRows(ctx context.Context, src, dst string, uptoRowID uint64) (int, error) {
	return f.Store.CopyRows(f.ctx(ctx), src, dst, uptoRowID)
}

func (f fenced) PutKV(ctx context.Context, key string, value []byte) error {
	return f.Store.PutKV(f.ctx(ctx), key, value)
}

func (f fenced) DeleteKV(ctx context.Context, key string) error {
	return f.Store.DeleteKV(f.ctx(ctx), key)
}

func (f fenced) CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error) {
	return f.Store.CompareAndSwapKV(f.ctx(ctx), key, old, new)
}

func (fenced) Close() error { return nil }
