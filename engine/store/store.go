// Package store defines the durable state behind the engine: sessions, transcript rows with
// durable row ids, and rewinds. Implementations: store/badger (embedded, the default) and
// store/memstore (tests); store/storetest is the behaviour suite every implementation passes.
//
// The interface is shaped for several processes on one store (store/homestore serves it over a
// unix socket): session updates are compare-and-set on a version, every owner write may carry a
// lease generation (fencing, see Fenced), changes are announced to watchers (Watch), and nothing
// above this interface assumes a single process.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Implementations wrap them so errors.Is works.
var (
	ErrNotFound      = errors.New("not found")
	ErrExists        = errors.New("already exists")
	ErrConflict      = errors.New("version conflict")     // CAS lost
	ErrTitleTaken    = errors.New("title already in use") // titles are unique
	ErrFenced        = errors.New("lease fenced: a newer owner holds the session")
	ErrLeaseHeld     = errors.New("lease held by another owner")
	ErrLeaseLost     = errors.New("lease lost: expired, released or taken over")
	ErrStaleRow      = errors.New("row id is not an active row of the session")
	ErrLocked        = errors.New("data directory is locked by another process")
	ErrCorrupt       = errors.New("data directory is corrupt or not a hermes store")
	ErrNewerFormat   = errors.New("data directory was written by a newer hermes")
	ErrClosed        = errors.New("store closed")
	ErrInvalidRecord = errors.New("invalid record")
	// ErrEventSeq: an event append whose seqs do not continue the stored log (a gap, or a seq
	// that is already stored). The writer's view of the log is stale: it re-reads it.
	ErrEventSeq = errors.New("event seq does not continue the stored event log")
	// ErrUnavailable: the store could not be reached (a remote store whose process is gone or
	// restarting). The call may be retried; for a write, whether it took effect is unknown
	// unless the error says it was never sent.
	ErrUnavailable = errors.New("store unavailable, retry")
)

// Usage is a session's accumulated usage.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	// CacheWriteTokens are input tokens written to the provider's prompt cache.
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
	APICalls         int64 `json:"api_calls"`
	ToolCalls        int64 `json:"tool_calls"`
	// CostUSD is the summed cost of the model calls at the model catalogue's prices; calls to
	// models without prices add nothing.
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Add accumulates d into u.
func (u *Usage) Add(d Usage) {
	u.InputTokens += d.InputTokens
	u.OutputTokens += d.OutputTokens
	u.CachedTokens += d.CachedTokens
	u.CacheWriteTokens += d.CacheWriteTokens
	u.ReasoningTokens += d.ReasoningTokens
	u.CostUSD += d.CostUSD
	u.APICalls += d.APICalls
	u.ToolCalls += d.ToolCalls
}

// Session is one stored session.
type Session struct {
	ID         string            `json:"id"`
	Title      string            `json:"title,omitempty"`
	Source     string            `json:"source,omitempty"` // creating surface: cli, tui, acp, api_server, script
	Model      string            `json:"model,omitempty"`  // provider:model
	Cwd        string            `json:"cwd,omitempty"`
	ParentID   string            `json:"parent_id,omitempty"`
	ParentKind string            `json:"parent_kind,omitempty"` // branch | compression | delegate
	ForkRowID  uint64            `json:"fork_row_id,omitempty"` // last parent row copied into a branch
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	EndedAt    time.Time         `json:"ended_at,omitzero"`
	EndReason  string            `json:"end_reason,omitempty"`
	Usage      Usage             `json:"usage"`
	RowCount   int64             `json:"row_count"` // active rows
	Rewinds    int64             `json:"rewinds"`
	Meta       map[string]string `json:"meta,omitempty"`
	// Principal owns the session: "" is the local owner (the CLI, ACP, the stdio gateway,
	// the primary API key, and every session stored before owners were recorded); any other
	// value names an API key of the HTTP server (see engine.Principal).
	Principal string `json:"principal,omitempty"`
	Version   uint64 `json:"version"` // bumped by every write; CAS token
}

// Row is one transcript entry.
type Row struct {
	ID          uint64          `json:"id"` // durable, store-wide monotonic; assigned by the store
	SessionID   string          `json:"session_id"`
	TurnID      string          `json:"turn_id,omitempty"`
	Role        string          `json:"role"` // system | user | assistant | tool
	Content     string          `json:"content"`
	Reasoning   string          `json:"reasoning,omitempty"`
	ToolCalls   json.RawMessage `json:"tool_calls,omitempty"` // []model.ToolCall as JSON
	ToolCallID  string          `json:"tool_call_id,omitempty"`
	ToolName    string          `json:"tool_name,omitempty"`
	DisplayKind string          `json:"display_kind,omitempty"` // e.g. "steer"
	Attachments []string        `json:"attachments,omitempty"`  // image files sent with a user row
	Time        time.Time       `json:"time"`
	Active      bool            `json:"active"` // false once archived by a rewind
}

// ListOptions filters ListSessions. Results are newest first (by UpdatedAt).
type ListOptions struct {
	Limit    int    // 0 = no limit
	Source   string // filter when non-empty
	ParentID string // children of this session when non-empty
}

// RowQuery selects rows of one session in row-id order.
type RowQuery struct {
	AfterID         uint64 // rows with ID > AfterID
	Limit           int    // 0 = all; with Tail, the last Limit rows
	Tail            bool
	IncludeArchived bool
}

// StoredEvent is one entry of a session's durable event log: the session journal's event as
// its owner published it, so a reader in any process sees the same seq for the same event.
type StoredEvent struct {
	Seq    uint64    `json:"seq"` // 1-based, contiguous per session; given by the writer
	Type   string    `json:"type"`
	Time   time.Time `json:"time"`
	TurnID string    `json:"turn_id,omitempty"`
	Text   string    `json:"text,omitempty"` // a delta's text (no payload)
	// Data is the event's payload as JSON (absent for deltas).
	Data json.RawMessage `json:"data,omitempty"`
	// Generation is the lease generation that wrote the event (0: unfenced); set by the store
	// from the append's fence.
	Generation uint64 `json:"gen,omitempty"`
}

// MaxEventBatch bounds the events of one AppendEvents call (a group commit is far smaller).
const MaxEventBatch = 4096

// CheckEvents validates an append of evs after the stored last seq by a writer of lease
// generation gen (0: unfenced): seqs must be last+1, last+2, ... An empty log may start at any
// seq (the owner's journal may have retained only its tail), and so may a fenced append: a
// lease holder that took a session over from one that did not release it numbers its events
// past every seq the previous holder reserved, published or not, so a seq is never reused and
// at worst skipped. A seq at or below last is always refused. Stores call it inside the
// write's transaction.
func CheckEvents(sessionID string, last, gen uint64, evs []StoredEvent) error {
	if len(evs) > MaxEventBatch {
		return fmt.Errorf("%w: %d events in one append, at most %d", ErrInvalidRecord, len(evs), MaxEventBatch)
	}
	for i, e := range evs {
		if e.Type == "" {
			return fmt.Errorf("%w: event %d of session %q has no type", ErrInvalidRecord, e.Seq, sessionID)
		}
		if len(e.Data) > 0 && !json.Valid(e.Data) {
			return fmt.Errorf("%w: event %d of session %q: data is not JSON", ErrInvalidRecord, e.Seq, sessionID)
		}
		want := last + 1 + uint64(i)
		if i == 0 && e.Seq > last && (last == 0 || gen != 0) {
			want = e.Seq
		}
		if i > 0 {
			want = evs[i-1].Seq + 1
		}
		if e.Seq != want {
			return fmt.Errorf("%w: session %q has events up to %d, append brings seq %d (want %d)",
				ErrEventSeq, sessionID, last, e.Seq, want)
		}
	}
	return nil
}

// Fence is the lease generation an owner write carries. Zero means unfenced (single process).
// AppendRows and Rewind take it for the session they write; every other write carries one in
// its context (WithFence, or a Fenced view of the store).
type Fence struct {
	Generation uint64
}

// Lease is a per-session owner lease.
type Lease struct {
	SessionID  string
	Owner      string
	Generation uint64
	Expires    time.Time
}

// RewindResult reports a rewind.
type RewindResult struct {
	Survivors []Row // re-inserted active rows with fresh ids, in order
	Appended  []Row // the extra rows as stored, after the survivors
	Archived  int   // rows moved out of the active transcript
}

// Store is the engine's durable state. All methods are safe for concurrent use. A write that
// returns nil is durable (it survives kill -9 of the process) before the call returns.
type Store interface {
	CreateSession(ctx context.Context, s Session) (Session, error) // ErrExists, ErrTitleTaken
	GetSession(ctx context.Context, id string) (Session, error)    // ErrNotFound
	// UpdateSession applies fn to the current record and writes it if the stored version still
	// equals the one fn saw (retrying internally on a concurrent change when expectVersion is 0;
	// failing with ErrConflict when a non-zero expectVersion no longer matches).
	UpdateSession(ctx context.Context, id string, expectVersion uint64, fn func(*Session) error) (Session, error)
	ListSessions(ctx context.Context, o ListOptions) ([]Session, error)

	// AppendRows appends rows (IDs assigned, in order) and bumps the session's RowCount and
	// UpdatedAt. It returns the rows as stored. A session's rows get ids in the order their
	// writes commit: every row appended is above every row of the session stored before it, so
	// a reader that knows the rows up to some id finds whatever was appended since with AfterID
	// (the engine reads a warm session's transcript so).
	AppendRows(ctx context.Context, sessionID string, f Fence, rows []Row) ([]Row, error)
	// AppendRowsUsage is AppendRows that also adds usage to the session's Usage, in the same
	// atomic write: both are durable on return, or neither is written. A turn stores its last
	// rows and what it cost so, in one synced write instead of two. rows may be empty (then
	// only the usage is added). It returns the rows and the session record as stored.
	AppendRowsUsage(ctx context.Context, sessionID string, f Fence, rows []Row, usage Usage) ([]Row, Session, error)
	Rows(ctx context.Context, sessionID string, q RowQuery) ([]Row, error)
	// Rewind archives every active row with ID >= beforeRowID (0 = archive all), re-inserts the
	// remaining active rows with fresh ids, and appends extra rows after them — one transaction.
	// beforeRowID that is not an active row of the session gives ErrStaleRow and writes nothing.
	// No row active before a rewind is active after it (the survivors' old ids are gone from
	// the active transcript), and an archived row never becomes active again: a reader that
	// finds the last row it knew still active knows no row before it changed.
	Rewind(ctx context.Context, sessionID string, f Fence, beforeRowID uint64, extra []Row) (RewindResult, error)
	// CopyRows copies the active rows of src with ID <= uptoRowID (0 = all) into dst (a branch)
	// under fresh ids and sets dst.ForkRowID to the last row copied. A non-zero uptoRowID that is
	// not an active row of src gives ErrStaleRow and writes nothing.
	CopyRows(ctx context.Context, src, dst string, uptoRowID uint64) (int, error)

	// AcquireLease grants the session's lease to owner when it is free, expired or already
	// owner's (ErrLeaseHeld otherwise), for ttl from now. The generation grows whenever the lease
	// passes to a new holder (including after a release), and never repeats, across restarts too.
	AcquireLease(ctx context.Context, sessionID, owner string, ttl time.Duration) (Lease, error)
	// RenewLease extends a lease its holder still has, for ttl from now. A lease that expired,
	// was released or passed to another holder cannot be renewed (ErrLeaseLost): its holder must
	// stop and acquire again, getting a new generation.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease gives up a lease; ErrFenced when it has passed to a newer generation.
	ReleaseLease(ctx context.Context, l Lease) error
	// GetLease returns the session's lease held now: ErrNotFound when nobody holds it (never
	// leased, released or expired) or the session does not exist. It is the read a process
	// makes to learn one session's holder; ListLeases is for listings (doctor, metrics).
	GetLease(ctx context.Context, sessionID string) (Lease, error)
	// ListLeases returns the leases held now (not released, not expired), by session id.
	ListLeases(ctx context.Context) ([]Lease, error)

	// Watch subscribes to change hints (see Subscription) for what in selects. The
	// subscription ends when ctx ends, when it is closed, or when the store closes.
	Watch(ctx context.Context, in Interest) (*Subscription, error)

	// AppendEvents appends to the session's durable event log (ErrNotFound for an unknown
	// session). The seqs are the writer's and must continue the stored log (see CheckEvents):
	// a seq already stored, or an unfenced append's gap, is refused with ErrEventSeq and nothing
	// is written (a fenced append may start past the stored last seq). It is
	// fenced like AppendRows (f, and the context's fence) and each event is stored with the
	// generation that wrote it. Watchers of the session get a hint naming it.
	//
	// The log lives as long as the session record: the contract has no session deletion (a
	// deleted session is a flagged record), so neither is an event ever removed.
	AppendEvents(ctx context.Context, sessionID string, f Fence, evs []StoredEvent) error
	// EventsSince returns up to limit (0 = all) events with Seq > afterSeq, in seq order.
	EventsSince(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]StoredEvent, error)
	// LastEventSeq returns the seq of the session's last stored event (0: none yet);
	// ErrNotFound for an unknown session.
	LastEventSeq(ctx context.Context, sessionID string) (uint64, error)

	// KV is a small durable key/value space for other subsystems (runs, idempotency keys,
	// approval allowlists). Keys are namespaced by the caller.
	PutKV(ctx context.Context, key string, value []byte) error
	GetKV(ctx context.Context, key string) ([]byte, error) // ErrNotFound
	ListKV(ctx context.Context, prefix string) (map[string][]byte, error)
	DeleteKV(ctx context.Context, key string) error
	// CompareAndSwapKV sets key to new when its current value equals old, atomically, and
	// reports whether it did. old == nil means "key absent" (a non-nil empty slice is the empty
	// value); new == nil deletes the key. A swap carries the context's fence like every write and
	// sends a hint like PutKV. Concurrent swaps of one key from any number of processes have
	// exactly one winner.
	CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error)

	Close() error
}
