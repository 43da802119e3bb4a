package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
)

// hint is the payload of one NOTIFY: the changes a node committed since its previous one.
// Lost says the node could not name them all (too many, or a key JSON cannot carry): every
// watcher on other nodes re-reads.
type hint struct {
	Node    string         `json:"n"`
	Changes []store.Change `json:"c,omitempty"`
	Lost    bool           `json:"lost,omitempty"`
}

// maxPayload keeps a NOTIFY under PostgreSQL's 8000-byte payload limit.
const maxPayload = 7500

// maxPendingHints bounds what the notifier gathers while the database is unreachable; beyond it
// the changes are forgotten and a Lost hint sent instead.
const maxPendingHints = 4096

// notifier gathers the changes this Store committed and sends them to the other nodes every
// interval, one NOTIFY per payload-sized batch, all in one round trip. Its goroutine is owned
// by the Store (close waits for it, after a last send).
type notifier struct {
	s     *Store
	every time.Duration
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	pending map[store.Change]struct{}
	lost    bool
}

func newNotifier(s *Store, every time.Duration) *notifier {
	n := &notifier{s: s, every: every, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{}), pending: map[store.Change]struct{}{}}
	go n.run()
	return n
}

func (n *notifier) add(cs []store.Change) {
	n.mu.Lock()
	for _, c := range cs {
		switch {
		case n.lost:
		case !utf8.ValidString(c.Key) || len(n.pending) >= maxPendingHints:
			n.lost = true
			clear(n.pending)
		default:
			n.pending[c] = struct{}{}
		}
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) close() {
	close(n.stop)
	<-n.done
}

func (n *notifier) run() {
	defer close(n.done)
	backoff := n.every
	var last time.Time
	for {
		select {
		case <-n.wake:
		case <-n.stop:
			n.flush() // a last try, so a clean shutdown leaves no change unannounced
			return
		}
		// At most one round of NOTIFYs per interval: a change after a quiet spell goes out at
		// once, changes during a busy one are gathered until the interval since the last round
		// has passed, and go out together.
		if d := time.Until(last.Add(n.every)); d > 0 {
			select {
			case <-time.After(d):
			case <-n.stop:
			}
		}
		last = time.Now()
		if n.flush() {
			backoff = n.every
			continue
		}
		// The database is unreachable: keep the changes and try again later.
		select {
		case n.wake <- struct{}{}:
		default:
		}
		select {
		case <-time.After(backoff):
		case <-n.stop:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// flush sends the pending changes; on failure it puts them back and reports false.
func (n *notifier) flush() bool {
	n.mu.Lock()
	pending, lost := n.pending, n.lost
	if len(pending) == 0 && !lost {
		n.mu.Unlock()
		return true
	}
	n.pending, n.lost = map[store.Change]struct{}{}, false
	n.mu.Unlock()

	b := &pgx.Batch{}
	queue := func(h hint) {
		p, _ := json.Marshal(h) // plain strings and bools
		b.Queue("SELECT pg_notify($1, $2)", n.s.channel, string(p))
	}
	if lost {
		queue(hint{Node: n.s.node, Lost: true})
	} else {
		h, size := hint{Node: n.s.node}, 0
		for c := range pending {
			cs := len(c.SessionID) + len(c.Key) + 16
			if size+cs > maxPayload && len(h.Changes) > 0 {
				queue(h)
				h, size = hint{Node: n.s.node}, 0
			}
			h.Changes = append(h.Changes, c)
			size += cs
		}
		queue(h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.s.pool.SendBatch(ctx, b).Close(); err != nil {
		n.mu.Lock()
		if lost || len(n.pending)+len(pending) > maxPendingHints {
			n.lost = true
			clear(n.pending)
		} else {
			for c := range pending {
				n.pending[c] = struct{}{}
			}
		}
		n.mu.Unlock()
		return false
	}
	return true
}

// listener holds one connection LISTENing on the schema's channel and delivers other nodes'
// hints to this Store's watchers. When the connection drops it reconnects by itself, with
// backoff; since hints sent meanwhile are gone, every watcher is then told it lost some. Its
// goroutine is owned by the Store.
type listener struct {
	s      *Store
	cfg    *pgx.ConnConfig
	cancel context.CancelFunc
	done   chan struct{}
}

// startListener connects and LISTENs before returning, so no hint sent after Open returns is
// missed.
func startListener(ctx context.Context, s *Store, cfg *pgx.ConnConfig) (*listener, error) {
	l := &listener{s: s, cfg: cfg, done: make(chan struct{})}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(lctx, conn)
	return l, nil
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

func (l *listener) close() {
	l.cancel()
	<-l.done
}

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := 50 * time.Millisecond
	for {
		err := l.receive(ctx, conn)
		_ = conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		l.s.log.Warn("postgres store: listening connection lost; reconnecting", "err", err)
		for {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			conn, err = l.connect(cctx)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
		}
		backoff = 50 * time.Millisecond
		l.s.log.Info("postgres store: listening again")
		// Hints sent while the connection was down are gone.
		l.s.hub.MarkLost()
	}
}

// receive delivers notifications until the connection fails or ctx ends.
func (l *listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var h hint
		if err := json.Unmarshal([]byte(n.Payload), &h); err != nil {
			l.s.log.Warn("postgres store: undecodable change hint; watchers will re-read", "err", err)
			l.s.hub.MarkLost()
			continue
		}
		switch {
		case h.Node == l.s.node:
			// This Store's own changes reached its watchers when they committed.
		case h.Lost:
			l.s.hub.MarkLost()
		default:
			l.s.hub.Publish(h.Changes...)
		}
	}
}
