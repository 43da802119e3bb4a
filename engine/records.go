package engine

import "github.com/hermes-go/hermes/engine/store"

// The stored shapes a surface reads and writes through the engine. They are the store's types
// under the engine's names, so a surface never imports the store: every write it makes goes
// through an engine verb (manage.go), where the turn claim, the deleted mark and a later lease
// can be enforced.
type (
	// Record is a stored session.
	Record = store.Session
	// Row is one transcript entry with its durable row id.
	Row = store.Row
	// RowQuery selects rows of one session in row-id order.
	RowQuery = store.RowQuery
	// ListOptions filters Engine.List.
	ListOptions = store.ListOptions
	// Usage is a session's accumulated usage.
	Usage = store.Usage
)

// Errors of the stored state, under the engine's names (they are the store's sentinels, so
// errors.Is matches either name).
var (
	// ErrNotFound: a stored record that does not exist — a setting (Engine.Setting) or a
	// surface's own record kept in settings. A session is ErrSessionNotFound.
	ErrNotFound = store.ErrNotFound
	// ErrSessionExists: a session with the requested id exists (live or stored).
	ErrSessionExists = store.ErrExists
	// ErrTitleTaken: another session holds the title (titles are unique).
	ErrTitleTaken = store.ErrTitleTaken
	// ErrStaleRow: a row id that is not an active row of the session.
	ErrStaleRow = store.ErrStaleRow
	// ErrInvalidRecord: a session id or record the store refuses.
	ErrInvalidRecord = store.ErrInvalidRecord
	// ErrStoreUnavailable: the store cannot be reached for now (its database restarting, its
	// store process gone); the same call may succeed when retried.
	ErrStoreUnavailable = store.ErrUnavailable
	// ErrSessionMoved: this process lost the session's lease to another (a fenced write, a
	// lease renewal refused) while serving a request; the other process holds the session
	// now, and the same request sent again goes to it.
	ErrSessionMoved = store.ErrFenced
	// ErrSessionLeaseLost: as ErrSessionMoved, found when renewing the lease.
	ErrSessionLeaseLost = store.ErrLeaseLost
)
