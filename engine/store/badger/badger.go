// Package badgerstore is the embedded, default store.Store, built on badger v4.
//
// All writes go through one committer goroutine that groups concurrent writes into shared
// transactions (group commit): with SyncWrites every acknowledged write is fsynced before its
// call returns, yet a hundred sessions appending at once share one fsync. Reads run on badger
// snapshots in the caller's goroutine and do not queue behind pending writes (badger only makes a
// new snapshot wait for a commit that is already being written, so that it sees it).
//
// Limits: one operation (an append, a rewind, a branch copy) must fit in one badger transaction,
// which with the memory settings used here is roughly 2 MB of small rows or 13,000 row moves;
// rows larger than the value threshold (8 KiB) live in the value log and count only a few bytes
// against that budget. An operation beyond it fails with store.ErrInvalidRecord and writes
// nothing.
package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hermes-go/hermes/engine/store"
)

// Options configures Open. The zero value is valid but does not fsync; use DefaultOptions.
type Options struct {
	// SyncWrites fsyncs every commit before acknowledging it, so an acknowledged write survives
	// power loss. Without it a write survives a crash of the process but not of the machine.
	SyncWrites bool
	// InMemory keeps everything in memory and ignores the directory. For tests.
	InMemory bool
	// Logger receives badger's warnings and errors. Nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the options for a durable on-disk store.
func DefaultOptions() Options { return Options{SyncWrites: true} }

// gcInterval is how often the value log is checked for reclaimable space. Only rows above the
// value threshold live there, so this is rarely busy.
const gcInterval = 10 * time.Minute

// Store is a badger-backed store.Store. Methods are safe for concurrent use.
type Store struct {
	db   *badger.DB
	dir  string
	lock *dirLock // nil in memory, and where badger's own guard is used

	queue   chan *op
	quit    chan struct{}
	workers sync.WaitGroup // committer and value-log GC

	mu     sync.RWMutex // guards closed; held shared while registering with active
	closed bool
	active sync.WaitGroup // callers inside a method; Close waits for them

	closeOnce sync.Once
	closeErr  error

	log *slog.Logger
	hub store.Hub // change hints, published by the committer after each commit
	// skipped holds the keys of undecodable session records a listing has already logged, so
	// a poll of the list does not log the same record every time.
	skipped sync.Map
	// listed is how many session records the last listing read: the next unfiltered one sizes
	// its result with it instead of growing it record by record (a tenth of listing 10,000).
	listed atomic.Int64

	// Owned by the committer goroutine once Open returns.
	nextRow      uint64                   // next row id
	sessionCache map[string]store.Session // committed session records, decoded
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir. It fails with an error wrapping
// store.ErrLocked when another process or Open holds the directory, store.ErrCorrupt when the
// directory is damaged or is not a store, and store.ErrNewerFormat when a newer release wrote it.
func Open(dir string, o Options) (*Store, error) {
	bo := badger.DefaultOptions(dir).
		// Small settings: the defaults reserve a 64 MiB memtable and a 256 MiB block cache, far
		// more than a session store needs. The memtable also bounds one transaction (15% of it),
		// hence 16 MiB rather than less: a rewind re-inserts a whole transcript in one commit.
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(64 << 20).
		WithValueThreshold(8 << 10).
		WithCompression(tableCompression).
		WithBlockSize(tableBlockSize).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		WithSyncWrites(o.SyncWrites).
		WithLogger(badgerLogger{o.Logger}) // not WithLoggingLevel: it would replace the logger
	// Durability note: badger is asked to fsync each commit itself rather than committing
	// unsynced and calling DB.Sync per batch. DB.Sync flushes only the current memtable WAL and
	// value-log file, so a commit that rotated either file would be left unsynced.
	var lock *dirLock
	if o.InMemory {
		bo = bo.WithDir("").WithValueDir("").WithInMemory(true)
		dir = ":memory:"
	} else {
		dir = absDir(dir)
		var err error
		if lock, err = prepareDir(dir); err != nil {
			return nil, err
		}
		bo = bo.WithBypassLockGuard(lock != nil)
	}
	db, err := openBadger(bo, dir)
	if err != nil {
		_ = lock.release()
		return nil, err
	}
	s := &Store{
		db:    db,
		dir:   dir,
		lock:  lock,
		queue: make(chan *op, queueDepth),
		quit:  make(chan struct{}),

		sessionCache: map[string]store.Session{},
		log:          o.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.init(); err != nil {
		_ = db.Close()
		_ = lock.release()
		return nil, err
	}
	s.workers.Add(1)
	go s.commitLoop()
	if !o.InMemory {
		s.workers.Add(1)
		go s.gcLoop()
	}
	return s, nil
}

// prepareDir creates dir owner-only, locks it, and checks that it holds a store: a directory
// with files but no badger manifest is refused, so pointing the store at the wrong directory
// cannot scribble into it, and damaged table files are refused before badger trips over them.
// Transcripts are private, so a new store's directory is made owner-only even if it already
// existed (empty).
func prepareDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create store directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if err := checkDir(dir); err != nil {
		_ = lock.release()
		return nil, err
	}
	return lock, nil
}

func checkDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read store directory: %w", err)
	}
	if len(entries) == 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("restrict store directory: %w", err)
		}
		return nil
	}
	hasManifest := false
	var foreign []string
	for _, e := range entries {
		switch e.Name() {
		case "MANIFEST":
			hasManifest = true
		case "LOCK":
			// badger's pid file, left behind by a process that died before the manifest existed.
		default:
			foreign = append(foreign, e.Name())
		}
	}
	if !hasManifest && len(foreign) > 0 {
		return fmt.Errorf("%w: %s has no MANIFEST but holds %d other entries (e.g. %q)",
			store.ErrCorrupt, dir, len(foreign), foreign[0])
	}
	if err := checkTables(dir); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// openBadger opens badger and maps its failures onto the store's sentinel errors. Damaged files
// can make badger panic instead of returning an error; that is reported as corruption too.
func openBadger(bo badger.Options, dir string) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: %s: opening panicked: %v", store.ErrCorrupt, dir, r)
		}
	}()
	db, err = badger.Open(bo)
	if err == nil {
		return db, nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Cannot acquire directory lock"):
		// Only where badger's own guard is in use. It flattens the flock error into text; this
		// phrase is its only stable marker.
		return nil, fmt.Errorf("%w: %s", store.ErrLocked, dir)
	case errors.Is(err, fs.ErrPermission) || strings.Contains(msg, "permission denied"):
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return nil, fmt.Errorf("%w: %s: %v", store.ErrCorrupt, dir, err)
}

// init checks the format marker (writing it into a new store) and loads the row-id counter.
func (s *Store) init() error {
	var format []byte
	var seq uint64
	empty := true
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		if format, err = getCopy(txn, keyFormat); err != nil {
			return err
		}
		b, err := getCopy(txn, keySeq)
		if err != nil {
			return err
		}
		if b != nil {
			if seq, err = decodeUint64(b); err != nil {
				return err
			}
		}
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		it.Rewind()
		empty = !it.Valid()
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", s.dir, err)
	}
	switch {
	case format == nil && !empty:
		return fmt.Errorf("%w: %s holds data but no format marker", store.ErrCorrupt, s.dir)
	case format == nil:
		if err := s.db.Update(func(txn *badger.Txn) error {
			return txn.Set(keyFormat, fmt.Appendf(nil, "%d", formatVersion))
		}); err != nil {
			return fmt.Errorf("initialise store %s: %w", s.dir, err)
		}
	default:
		v, err := parseFormat(format)
		if err != nil {
			return fmt.Errorf("%s: %w", s.dir, err)
		}
		if v > formatVersion {
			return fmt.Errorf("%w: %s has format %d, this build reads up to %d",
				store.ErrNewerFormat, s.dir, v, formatVersion)
		}
	}
	s.nextRow = seq + 1
	return nil
}

// gcLoop reclaims value-log space left by deleted or moved large rows.
func (s *Store) gcLoop() {
	defer s.workers.Done()
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			// RunValueLogGC rewrites at most one file per call; nil means it did, so go again.
			for s.db.RunValueLogGC(0.5) == nil {
				select {
				case <-s.quit:
					return
				default:
				}
			}
		}
	}
}

// Close waits for in-flight calls, stops the committer and closes badger. Later calls to any
// method return store.ErrClosed; Close itself may be called again and returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.active.Wait()
		s.hub.Close()
		close(s.quit)
		s.workers.Wait()
		s.closeErr = errors.Join(s.db.Close(), s.lock.release())
	})
	return s.closeErr
}

// view runs fn in a read snapshot on behalf of a registered caller.
func (s *Store) view(ctx context.Context, fn func(txn *badger.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.active.Done()
	return s.db.View(fn)
}

// getCopy returns a copy of key's value, or nil when the key does not exist.
func getCopy(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

func getSession(txn *badger.Txn, id string) (store.Session, error) {
	key := sessionKey(id)
	b, err := getCopy(txn, key)
	if err != nil {
		return store.Session{}, err
	}
	if b == nil {
		return store.Session{}, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return decodeSession(key, b)
}

func getLease(txn *badger.Txn, sid string) (leaseRecord, error) {
	key := leaseKey(sid)
	b, err := getCopy(txn, key)
	if err != nil || b == nil {
		return leaseRecord{}, err
	}
	return decodeLease(key, b)
}

func exists(txn *badger.Txn, key []byte) (bool, error) {
	_, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// GetSession returns the session with id, or an error wrapping store.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (store.Session, error) {
	var out store.Session
	err := s.view(ctx, func(txn *badger.Txn) error {
		var err error
		out, err = getSession(txn, id)
		return err
	})
	return out, err
}

// ListSessions returns sessions newest first (by UpdatedAt, ties by id).
func (s *Store) ListSessions(ctx context.Context, o store.ListOptions) ([]store.Session, error) {
	var out []store.Session
	if o.Source == "" && o.ParentID == "" {
		out = make([]store.Session, 0, s.listed.Load())
	}
	err := s.view(ctx, func(txn *badger.Txn) error {
		prefix := []byte(nsSession)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		records := int64(0)
		defer func() { s.listed.Store(records) }()
		for it.Rewind(); it.Valid(); it.Next() {
			records++
			item := it.Item()
			var sess store.Session
			err := item.Value(func(v []byte) error {
				var err error
				sess, err = decodeSession(item.Key(), v)
				return err
			})
			if err != nil {
				// One record the store cannot serve must not take every listing down with it:
				// it is skipped here and left to `hermes doctor` to report and quarantine.
				s.skipUndecodable(item.KeyCopy(nil), err)
				continue
			}
			if (o.Source == "" || sess.Source == o.Source) && (o.ParentID == "" || sess.ParentID == o.ParentID) {
				out = append(out, sess)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, compareNewestFirst)
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	return out, nil
}

// skipUndecodable logs a session record a listing skipped, once per key per process.
func (s *Store) skipUndecodable(key []byte, err error) {
	if _, logged := s.skipped.LoadOrStore(string(key), struct{}{}); logged {
		return
	}
	s.log.Warn("store: skipping a session record that cannot be decoded; run `hermes doctor` to report and quarantine it",
		"key", fmt.Sprintf("%q", key), "err", err)
}

func compareNewestFirst(a, b store.Session) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// Rows returns rows of a session in row-id order.
func (s *Store) Rows(ctx context.Context, sessionID string, q store.RowQuery) ([]store.Row, error) {
	var out []store.Row
	err := s.view(ctx, func(txn *badger.Txn) error {
		if ok, err := exists(txn, sessionKey(sessionID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		}
		active, err := scanRows(txn, false, sessionID, q)
		if err != nil || !q.IncludeArchived {
			out = active
			return err
		}
		archived, err := scanRows(txn, true, sessionID, q)
		if err != nil {
			return err
		}
		out = mergeRows(active, archived, q)
		return nil
	})
	return out, err
}

// mergeRows merges two id-ordered row lists and re-applies the query's limit. Each list already
// holds its first (or, for Tail, last) Limit rows, so the merged answer is among them.
func mergeRows(a, b []store.Row, q store.RowQuery) []store.Row {
	out := make([]store.Row, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.SortFunc(out, func(x, y store.Row) int {
		switch {
		case x.ID < y.ID:
			return -1
		case x.ID > y.ID:
			return 1
		}
		return 0
	})
	if q.Limit > 0 && len(out) > q.Limit {
		if q.Tail {
			out = out[len(out)-q.Limit:]
		} else {
			out = out[:q.Limit]
		}
	}
	return out
}

// scanRows reads one session's active or archived rows matching q. Prefetching stays off: most
// rows sit inline in the LSM tree, where prefetch goroutines only add overhead.
func scanRows(txn *badger.Txn, archived bool, sid string, q store.RowQuery) ([]store.Row, error) {
	prefix := rowPrefix(archived, sid)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: q.Tail})
	defer it.Close()
	if q.Tail {
		it.Seek(rowKey(archived, sid, ^uint64(0)))
	} else {
		if q.AfterID == ^uint64(0) {
			return nil, nil
		}
		it.Seek(rowKey(archived, sid, q.AfterID+1))
	}
	var out []store.Row
	for ; it.Valid(); it.Next() {
		item := it.Item()
		key := item.Key()
		id, err := rowIDFromKey(prefix, key)
		if err != nil {
			return nil, err
		}
		if id <= q.AfterID {
			break // only reachable in Tail mode: everything further is older still
		}
		var r store.Row
		if err := item.Value(func(v []byte) error {
			var err error
			r, err = decodeRow(prefix, key, v, sid, archived)
			return err
		}); err != nil {
			return nil, err
		}
		out = append(out, r)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	if q.Tail {
		slices.Reverse(out)
	}
	return out, nil
}

// GetKV returns the value stored under key, or an error wrapping store.ErrNotFound.
func (s *Store) GetKV(ctx context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.view(ctx, func(txn *badger.Txn) error {
		b, err := getCopy(txn, kvKey(key))
		if err != nil {
			return err
		}
		if b == nil {
			return fmt.Errorf("kv %q: %w", key, store.ErrNotFound)
		}
		out = b
		return nil
	})
	return out, err
}

// ListKV returns every key with the given prefix and its value.
func (s *Store) ListKV(ctx context.Context, prefix string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.view(ctx, func(txn *badger.Txn) error {
		p := kvKey(prefix)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			out[string(item.Key()[len(nsKV):])] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// badgerLogger forwards badger's warnings and errors to a slog.Logger and drops the rest.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	if b.l != nil {
		b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
	}
}

func (b badgerLogger) Warningf(f string, a ...any) {
	if b.l != nil {
		b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
	}
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}

// Dir returns the directory the store was opened in.
func (s *Store) Dir() string { return s.dir }

// absDir makes messages name the directory unambiguously even when given a relative path.
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}
