// Package postgres is the store.Store on PostgreSQL, for several hermes nodes sharing one
// session space. Sessions, transcript rows, leases and the KV space are tables (schema in
// migrations/, applied at Open under an advisory lock so nodes may start together); every
// fenced write checks the session's lease generation in its own transaction while holding a
// lock on the lease row (the fence function); change hints reach other nodes by
// LISTEN/NOTIFY, batched per node, and are only hints: the rows are the truth, and a watcher that
// may have missed hints (its node's listening connection dropped) is told so (Lost) and re-reads.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hermes-go/hermes/engine/store"
)

// Options tune Open. The zero value is the default.
type Options struct {
	// Schema holds the store's tables (default "hermes"); several deployments, or tests, can
	// share one database under different schemas.
	Schema string
	// MaxConns bounds the connection pool unless the URL sets pool_max_conns (default
	// max(16, 4×CPUs)): concurrent writers share commits (group commit) only when they are on
	// separate connections.
	MaxConns int32
	// NotifyEvery is the least time between two rounds of NOTIFYs carrying hints to other nodes
	// (default 2ms): a change after a quiet spell goes at once, changes during a busy spell are
	// gathered. A notifying commit takes a database-wide lock, so hints are not sent from inside
	// each write. The interval is what a hint may wait on a busy node before it leaves, so it
	// adds to the latency of every follower on another node (10ms made the median hint 5–6 ms
	// late, 2ms about 1 ms); a round is one short transaction without a WAL flush.
	NotifyEvery time.Duration
	// Logger receives connection losses of the listening connection (default slog.Default()).
	Logger *slog.Logger
}

// Store is the PostgreSQL store. Open it with Open; Close releases its connections.
type Store struct {
	pool    *pgxpool.Pool
	schema  string
	channel string // NOTIFY channel of this schema
	node    string // random id of this Store, so it ignores its own notifications
	log     *slog.Logger

	hub    store.Hub
	notify *notifier
	listen *listener

	appends   chan *appendReq // to the committers (group.go)
	groupStop chan struct{}
	groupWG   sync.WaitGroup

	mu     sync.RWMutex // held for reading by every call; Close takes it for writing
	closed bool
}

var _ store.Store = (*Store)(nil)

// IsURL reports whether s names a PostgreSQL database (postgres:// or postgresql://).
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the database at connURL (a postgres:// URL or key=value string, as libpq
// takes), applies the migrations it lacks, and starts listening for other nodes' change hints.
func Open(ctx context.Context, connURL string, o Options) (*Store, error) {
	if o.Schema == "" {
		o.Schema = "hermes"
	}
	if o.NotifyEvery <= 0 {
		o.NotifyEvery = 2 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(connURL)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %s: %w", redact(connURL), err)
	}
	if !strings.Contains(connURL, "pool_max_conns") {
		cfg.MaxConns = o.MaxConns
		if cfg.MaxConns <= 0 {
			cfg.MaxConns = int32(max(16, 4*runtime.NumCPU()))
		}
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	if rp["application_name"] == "" {
		rp["application_name"] = "hermes"
	}
	// Every statement is prepared once per connection and run with generic plans. With the
	// default (auto), PostgreSQL plans each of the first executions anew and keeps custom
	// plans when it estimates them cheaper: the group append's plan then costs about a
	// millisecond of CPU at every call, more than its execution.
	if rp["plan_cache_mode"] == "" {
		rp["plan_cache_mode"] = "force_generic_plan"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %s: %w", redact(connURL), err)
	}
	s := &Store{pool: pool, schema: o.Schema, channel: "hermes:" + o.Schema, node: randomID(), log: o.Logger}
	if err := migrate(ctx, pool, o.Schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store: %s: %w", redact(connURL), mapErr(err))
	}
	s.appends, s.groupStop = make(chan *appendReq), make(chan struct{})
	s.groupWG.Add(committers)
	for range committers {
		go s.committer()
	}
	s.notify = newNotifier(s, o.NotifyEvery)
	s.listen, err = startListener(ctx, s, cfg.ConnConfig.Copy())
	if err != nil {
		s.stopCommitters()
		s.notify.close()
		pool.Close()
		return nil, fmt.Errorf("postgres store: listen: %w", mapErr(err))
	}
	return s, nil
}

// Close stops listening, sends the hints still gathered, ends every subscription and closes
// the connections. Later calls return store.ErrClosed; Close itself is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.listen.close()
	s.stopCommitters() // no append is in flight: Close waited for every call
	s.notify.close()
	s.hub.Close()
	s.pool.Close()
	return nil
}

func (s *Store) stopCommitters() {
	close(s.groupStop)
	s.groupWG.Wait()
}

// Schema returns the schema holding the store's tables.
func (s *Store) Schema() string { return s.schema }

// enter starts a call: ErrClosed after Close, the context's error when it has ended. The caller
// must call the returned function when done (Close waits for calls in flight).
func (s *Store) enter(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// changed announces changes after their write committed: at once to this process's watchers
// (the hint is there when the write returns), and to other nodes with the next NOTIFY.
func (s *Store) changed(cs ...store.Change) {
	s.hub.Publish(cs...)
	s.notify.add(cs)
}

// Watch subscribes to change hints made by this Store and, through NOTIFY, by every other
// Store on the same schema.
func (s *Store) Watch(ctx context.Context, in store.Interest) (*store.Subscription, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.hub.Subscribe(ctx, in)
}

// Errors raised by the schema's functions.
const codeFenced = "HR001"

// mapErr turns database errors into the store's sentinel errors (wrapped, with the database's
// message).
func mapErr(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	for _, sentinel := range []error{store.ErrFenced, store.ErrNotFound, store.ErrExists, store.ErrTitleTaken,
		store.ErrInvalidRecord, store.ErrStaleRow, store.ErrEventSeq, store.ErrLeaseHeld, store.ErrLeaseLost, store.ErrClosed, store.ErrUnavailable, store.ErrNewerFormat} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	if se := (pgx.ScanArgError{}); errors.As(err, &se) {
		return err // the server answered; this process could not read the answer (a defect, not an outage)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		// Not an answer from the server: the connection failed (refused, reset, timed out).
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	switch {
	case pe.Code == codeFenced:
		return fmt.Errorf("%w: %s", store.ErrFenced, pe.Message)
	case pe.Code == "23505" && pe.ConstraintName == "sessions_title_key":
		return fmt.Errorf("%w: %s", store.ErrTitleTaken, pe.Detail)
	case pe.Code == "23505" && pe.ConstraintName == "sessions_pkey":
		return fmt.Errorf("%w: %s", store.ErrExists, pe.Detail)
	case pe.Code == "23503":
		return fmt.Errorf("%w: %s", store.ErrNotFound, pe.Detail)
	case pe.Code == "54000", strings.HasPrefix(pe.Code, "22"):
		// program_limit_exceeded (a value too large for an index), data exceptions.
		return fmt.Errorf("%w: %s", store.ErrInvalidRecord, pe.Message)
	case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"):
		// connection exceptions; the server shutting down, crashed or starting.
		return fmt.Errorf("%w: %s", store.ErrUnavailable, pe.Message)
	}
	return err
}

// redact drops the password from a connection URL for error messages.
func redact(connURL string) string {
	u, err := url.Parse(connURL)
	if err != nil || u.Scheme == "" {
		return "database"
	}
	return u.Redacted()
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
