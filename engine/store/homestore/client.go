package homestore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/store"
)

// ClientOptions configures Dial.
type ClientOptions struct {
	Home string
	// Start starts a store process for Home, detached (Spawn). Nil: only connect to one that is
	// running. It is called when nothing answers on the socket, at first and after the process
	// dies; the lock file makes a concurrent second start harmless.
	Start func() error
	// Info identifies this process to the store process (hermes doctor lists clients).
	Info ClientInfo
	// Patience is how long a call waits for the store process to come back before it fails with
	// store.ErrUnavailable; Dial waits as long for the first connection. Default 5 s.
	Patience time.Duration
	Logger   *slog.Logger
}

// UnavailableError says the store process of a home could not be reached or started, and what
// to do about it; it matches store.ErrUnavailable.
type UnavailableError struct {
	Home, Socket, Log string
	Err               error
}

func (e *UnavailableError) Error() string {
	var se startError
	if errors.As(e.Err, &se) {
		return fmt.Sprintf("cannot start the store process of %s to serve %s (%v); check that %s is a directory you can write, see %s if it exists, then retry",
			e.Home, e.Socket, se.err, e.Home, e.Log)
	}
	if fi, err := os.Lstat(e.Socket); err == nil && fi.Mode()&os.ModeSocket == 0 {
		return fmt.Sprintf("cannot reach the store process of %s: %s is not a socket; see its log %s, remove %s and retry",
			e.Home, e.Socket, e.Log, e.Socket)
	}
	if _, err := os.Lstat(e.Socket); errors.Is(err, fs.ErrNotExist) {
		// No socket: the process never got to listen. Its log says why.
		if why := lastLoggedError(e.Log); why != "" {
			return fmt.Sprintf("cannot reach the store process of %s on %s: it failed (%s, from its log %s); fix that and retry",
				e.Home, e.Socket, why, e.Log)
		}
		return fmt.Sprintf("cannot reach the store process of %s on %s (%v); see its log %s and retry",
			e.Home, e.Socket, e.Err, e.Log)
	}
	return fmt.Sprintf("cannot reach the store process of %s on %s (%v); see its log %s, and if no hermes store-server process is running, remove %s and retry",
		e.Home, e.Socket, e.Err, e.Log, e.Socket)
}

// lastLoggedError returns the err of the last ERROR line in the store process's log (slog's
// text form), from its last 16 KiB; "" when there is none.
func lastLoggedError(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-16<<10, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(buf)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if !strings.Contains(line, " level=ERROR ") {
			continue
		}
		_, v, ok := strings.Cut(line, " err=")
		if !ok {
			continue
		}
		if q, err := strconv.QuotedPrefix(v); err == nil {
			if u, err := strconv.Unquote(q); err == nil {
				return u
			}
		}
		if f := strings.Fields(v); len(f) > 0 {
			return f[0]
		}
	}
	return ""
}

// startError is a failure to start the store process (before it could log anything).
type startError struct{ err error }

func (e startError) Error() string { return "start the store process: " + e.err.Error() }
func (e startError) Unwrap() error { return e.err }

func (e *UnavailableError) Unwrap() []error { return []error{store.ErrUnavailable, e.Err} }

// Client is a store.Store served by the store process of a home, over one connection that
// carries every call at once. When the process goes away (killed, restarted) the client
// reconnects by itself, starting a new process if it can: reads in flight are retried on the new
// connection; writes in flight fail with store.ErrUnavailable, since whether they were applied is
// unknown (a write the process acknowledged was committed before it answered). Watches are
// re-established and report Lost, so their watchers catch up.
type Client struct {
	o    ClientOptions
	path string
	log  *slog.Logger

	mu        sync.Mutex
	cur       *clientConn   // nil while disconnected
	ready     chan struct{} // closed when cur is set
	downSince time.Time
	lastErr   error
	lastStart time.Time
	nextID    uint64
	pending   map[uint64]*call
	watches   map[uint64]*store.Subscription
	closed    bool

	quit    chan struct{}
	manager sync.WaitGroup
}

var _ store.Store = (*Client)(nil)

type clientConn struct {
	nc  *net.UnixConn
	wmu sync.Mutex
	fw  *frameWriter
	// gone: its reader ended and failed the calls waiting on it (Client.lost); a call
	// registered after that would wait forever. Guarded by Client.mu.
	gone bool
}

type call struct {
	ch chan *response // receives the response, or nil when the connection was lost
	cc *clientConn
}

// Dial connects to the store process of o.Home, starting one when none answers and o.Start is
// set. It fails with an *UnavailableError when none answers within o.Patience.
func Dial(ctx context.Context, o ClientOptions) (*Client, error) {
	if o.Patience <= 0 {
		o.Patience = 5 * time.Second
	}
	c := &Client{
		o: o, path: SocketPath(o.Home), log: o.Logger,
		ready:   make(chan struct{}),
		pending: map[uint64]*call{}, watches: map[uint64]*store.Subscription{},
		quit: make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.o.Info.PID == 0 {
		c.o.Info.PID = os.Getpid()
	}
	deadline := time.Now().Add(o.Patience)
	cc, err := c.connectUntil(ctx, deadline)
	if err != nil {
		return nil, c.unavailable(err)
	}
	c.install(cc)
	c.manager.Add(1)
	go c.manage(cc)
	return c, nil
}

func (c *Client) unavailable(err error) error {
	return &UnavailableError{Home: c.o.Home, Socket: c.path, Log: LogPath(c.o.Home), Err: err}
}

// connectUntil dials the socket, starting a store process when nothing answers, until deadline.
// When a start failed, that failure is what it reports (it tells more than the refused dial).
func (c *Client) connectUntil(ctx context.Context, deadline time.Time) (*clientConn, error) {
	wait := time.Millisecond
	var failedStart error
	for {
		cc, err := c.connect()
		if err == nil {
			return cc, nil
		}
		if errors.As(err, new(startError)) {
			failedStart = err
		}
		if time.Now().After(deadline) {
			if failedStart != nil {
				return nil, failedStart
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.quit:
			return nil, store.ErrClosed
		case <-time.After(wait):
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// connect dials once; when nothing answers it starts a store process (at most every 500 ms:
// one that is starting needs a moment before its socket answers).
func (c *Client) connect() (*clientConn, error) {
	nc, err := dialSocket(c.path)
	if err == nil {
		cc := &clientConn{nc: nc, fw: newFrameWriter()}
		// Introduce ourselves; the answer is not waited for.
		_ = cc.write(&request{Op: opHello, Client: &c.o.Info})
		return cc, nil
	}
	if c.o.Start != nil {
		c.mu.Lock()
		due := time.Since(c.lastStart) > 500*time.Millisecond
		if due {
			c.lastStart = time.Now()
		}
		c.mu.Unlock()
		if due {
			if serr := c.o.Start(); serr != nil {
				return nil, startError{serr}
			}
		}
	}
	return nil, err
}

// errEncode marks a request that could not be encoded; nothing was sent.
type errEncode struct{ err error }

func (e errEncode) Error() string { return e.err.Error() }

func (cc *clientConn) write(req *request) error {
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	b, err := cc.fw.frame(req)
	if err != nil {
		return errEncode{err}
	}
	_, err = cc.nc.Write(b)
	return err
}

// install makes cc the current connection; callers waiting for one proceed. After Close it
// closes cc instead and reports false.
func (c *Client) install(cc *clientConn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cc.nc.Close()
		return false
	}
	c.cur = cc
	close(c.ready)
	return true
}

// manage owns the connection: it reads responses until the connection fails, then reconnects
// (starting a store process when none answers) and re-establishes the watches, until Close.
func (c *Client) manage(cc *clientConn) {
	defer c.manager.Done()
	for {
		readerDone := make(chan struct{})
		go func() {
			defer close(readerDone)
			c.read(cc)
		}()
		if rewatch := c.rewatchList(cc); len(rewatch) > 0 {
			c.rewatch(cc, rewatch, readerDone)
		}
		<-readerDone
		c.lost(cc)
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return
		}
		c.log.Warn("store process connection lost; reconnecting", "socket", c.path)
		for {
			next, err := c.connectUntil(context.Background(), time.Now().Add(time.Second))
			if err == nil {
				cc = next
				break
			}
			if errors.Is(err, store.ErrClosed) {
				return
			}
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
		}
		if !c.install(cc) {
			return
		}
	}
}

// rewatchList returns the watches to re-establish on a new connection (none on the first).
func (c *Client) rewatchList(cc *clientConn) map[uint64]*store.Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.downSince.IsZero() {
		return nil
	}
	c.downSince = time.Time{}
	out := make(map[uint64]*store.Subscription, len(c.watches))
	for id, s := range c.watches {
		out[id] = s
	}
	return out
}

// rewatch registers the watches again and only then tells their watchers that hints were lost,
// so that what a watcher re-reads cannot miss a change made after.
// A connection that fails meanwhile (readerDone) ends the round; the watches that were not yet
// registered are marked lost anyway, and the next connection registers them all again.
func (c *Client) rewatch(cc *clientConn, subs map[uint64]*store.Subscription, readerDone <-chan struct{}) {
	for id, s := range subs {
		ch := make(chan *response, 1)
		c.mu.Lock()
		c.pending[id] = &call{ch: ch, cc: cc}
		c.mu.Unlock()
		in := s.Interest()
		if err := cc.write(&request{ID: id, Op: opWatch, Watch: &in}); err != nil {
			cc.nc.Close() // the reader ends; the next round retries
			return
		}
		select {
		case resp := <-ch:
			if resp == nil {
				return
			}
		case <-readerDone:
			return
		}
		s.MarkLost()
	}
}

// read dispatches frames from cc until it fails.
func (c *Client) read(cc *clientConn) {
	r := bufio.NewReaderSize(cc.nc, 64<<10)
	for {
		payload, err := readFrame(r, nil)
		if err != nil {
			cc.nc.Close()
			return
		}
		resp := &response{}
		if err := json.Unmarshal(payload, resp); err != nil {
			c.log.Error("undecodable frame from the store process", "err", err)
			cc.nc.Close()
			return
		}
		if resp.Bin {
			body, err := readFrame(r, nil)
			if err == nil {
				resp.Sessions, err = decodeSessions(body, resp.Wide)
			}
			if err != nil {
				c.log.Error("undecodable session listing from the store process", "err", err)
				cc.nc.Close()
				return
			}
		}
		c.mu.Lock()
		if len(resp.Changes) > 0 || resp.Lost {
			s := c.watches[resp.ID]
			c.mu.Unlock()
			if s != nil {
				s.Deliver(resp.Changes)
				if resp.Lost {
					s.MarkLost()
				}
			}
			continue
		}
		p := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if p != nil {
			p.ch <- resp
		}
	}
}

// lost fails the calls waiting on cc and marks the client disconnected.
func (c *Client) lost(cc *clientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc.gone = true
	for id, p := range c.pending {
		if p.cc == cc {
			delete(c.pending, id)
			p.ch <- nil
		}
	}
	if c.cur == cc {
		c.cur = nil
		c.ready = make(chan struct{})
		c.downSince = time.Now()
	}
}

// conn returns the current connection, waiting for a reconnect up to Patience.
func (c *Client) conn(ctx context.Context) (*clientConn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, store.ErrClosed
		}
		cc, ready, since, lastErr := c.cur, c.ready, c.downSince, c.lastErr
		c.mu.Unlock()
		if cc != nil {
			return cc, nil
		}
		left := c.o.Patience - time.Since(since)
		if left <= 0 {
			if lastErr == nil {
				lastErr = errors.New("no answer")
			}
			return nil, c.unavailable(lastErr)
		}
		t := time.NewTimer(left)
		select {
		case <-ready:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		t.Stop()
	}
}

// do sends req and waits for its response. A read (retry) lost with its connection is sent again
// on the next one; a write is not, and fails with store.ErrUnavailable.
func (c *Client) do(ctx context.Context, req *request, retry bool) (*response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkText(req); err != nil {
		return nil, err
	}
	if f, ok := store.FenceOf(ctx); ok {
		req.Fence = &f
	}
	for {
		cc, err := c.conn(ctx)
		if err != nil {
			return nil, err
		}
		ch := make(chan *response, 1)
		c.mu.Lock()
		if cc.gone {
			// Lost since conn returned it, and this request not sent: the next connection
			// takes it, a write as well as a read.
			c.mu.Unlock()
			continue
		}
		c.nextID++
		req.ID = c.nextID
		c.pending[req.ID] = &call{ch: ch, cc: cc}
		c.mu.Unlock()
		if err := cc.write(req); err != nil {
			var enc errEncode
			if errors.As(err, &enc) {
				c.mu.Lock()
				delete(c.pending, req.ID)
				c.mu.Unlock()
				if errors.Is(enc.err, store.ErrInvalidRecord) {
					return nil, enc.err
				}
				return nil, fmt.Errorf("%w: %s: %v", store.ErrInvalidRecord, req.Op, enc.err)
			}
			cc.nc.Close() // the reader notices and fails every call on cc, this one included
		}
		select {
		case resp := <-ch:
			if resp == nil {
				if retry {
					continue
				}
				return nil, fmt.Errorf("%w: the store process went away during %s; it may or may not have been applied",
					store.ErrUnavailable, req.Op)
			}
			if resp.Code != "" {
				return nil, decodeError(resp.Code, resp.Msg)
			}
			return resp, nil
		case <-ctx.Done():
			c.mu.Lock()
			delete(c.pending, req.ID)
			c.mu.Unlock()
			_ = cc.write(&request{Op: opCancel, Target: req.ID})
			return nil, ctx.Err()
		}
	}
}

// Close closes the connection and ends every watch. Later calls fail with store.ErrClosed. The
// store process keeps running until it has been idle for its idle time.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cc := c.cur
	watches := c.watches
	c.watches = map[uint64]*store.Subscription{}
	c.mu.Unlock()
	close(c.quit)
	if cc != nil {
		cc.nc.Close()
	}
	c.manager.Wait()
	for _, s := range watches {
		s.Close()
	}
	return nil
}

var _ store.Doctor = (*Client)(nil)

// Doctor has the store process check (and with quarantine, move aside) records it cannot serve.
func (c *Client) Doctor(ctx context.Context, quarantine bool) ([]store.Problem, error) {
	resp, err := c.do(ctx, &request{Op: opDoctor, Flag: quarantine}, !quarantine)
	if err != nil {
		return nil, err
	}
	return resp.Problems, nil
}

// Status asks the store process about itself.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	resp, err := c.do(ctx, &request{Op: opStatus}, true)
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

func (c *Client) CreateSession(ctx context.Context, s store.Session) (store.Session, error) {
	resp, err := c.do(ctx, &request{Op: opCreate, Rec: &s}, false)
	if err != nil {
		return store.Session{}, err
	}
	return *resp.Session, nil
}

func (c *Client) GetSession(ctx context.Context, id string) (store.Session, error) {
	resp, err := c.do(ctx, &request{Op: opGet, Session: id}, true)
	if err != nil {
		return store.Session{}, err
	}
	return *resp.Session, nil
}

// UpdateSession runs fn here, on the record as read, and has the store process write the result
// only if the record is still at the version fn saw (retrying like the local stores when
// expectVersion is 0).
func (c *Client) UpdateSession(ctx context.Context, id string, expectVersion uint64, fn func(*store.Session) error) (store.Session, error) {
	return store.Update(ctx, id, expectVersion, c.GetSession, fn, nil, func(cur, next store.Session) (store.Session, bool, error) {
		resp, err := c.do(ctx, &request{Op: opUpdateCAS, Session: id, Version: cur.Version, Rec: &next}, false)
		switch {
		case err == nil:
			return *resp.Session, false, nil
		case errors.Is(err, store.ErrConflict):
			return store.Session{}, true, nil
		}
		return store.Session{}, false, err
	})
}

func (c *Client) ListSessions(ctx context.Context, o store.ListOptions) ([]store.Session, error) {
	resp, err := c.do(ctx, &request{Op: opList, List: &o, Wide: true}, true)
	if err != nil {
		return nil, err
	}
	return resp.Sessions, nil
}

func (c *Client) AppendRows(ctx context.Context, sessionID string, f store.Fence, rows []store.Row) ([]store.Row, error) {
	resp, err := c.do(ctx, &request{Op: opAppend, Session: sessionID, Gen: f.Generation, Rows: rows}, false)
	if err != nil {
		return nil, err
	}
	if resp.Rows == nil {
		return []store.Row{}, nil
	}
	return resp.Rows, nil
}

func (c *Client) AppendRowsUsage(ctx context.Context, sessionID string, f store.Fence, rows []store.Row, usage store.Usage) ([]store.Row, store.Session, error) {
	resp, err := c.do(ctx, &request{Op: opAppendUse, Session: sessionID, Gen: f.Generation, Rows: rows, Usage: &usage}, false)
	if errors.Is(err, store.ErrInvalidRecord) && strings.Contains(err.Error(), "unknown operation") {
		// A store process of an earlier build (it exits once idle): the two writes one after
		// the other, as that build's engine made them.
		out, err := c.AppendRows(ctx, sessionID, f, rows)
		if err != nil {
			return nil, store.Session{}, err
		}
		rec, err := c.UpdateSession(store.WithFence(ctx, sessionID, f.Generation), sessionID, 0, func(r *store.Session) error {
			r.Usage.Add(usage)
			return nil
		})
		if err != nil {
			return nil, store.Session{}, err
		}
		return out, rec, nil
	}
	if err != nil {
		return nil, store.Session{}, err
	}
	if resp.Session == nil {
		return nil, store.Session{}, fmt.Errorf("%w: append with usage answered without the session record", store.ErrInvalidRecord)
	}
	if resp.Rows == nil {
		resp.Rows = []store.Row{}
	}
	return resp.Rows, *resp.Session, nil
}

func (c *Client) Rows(ctx context.Context, sessionID string, q store.RowQuery) ([]store.Row, error) {
	resp, err := c.do(ctx, &request{Op: opRows, Session: sessionID, Query: &q}, true)
	if err != nil {
		return nil, err
	}
	return resp.Rows, nil
}

func (c *Client) Rewind(ctx context.Context, sessionID string, f store.Fence, beforeRowID uint64, extra []store.Row) (store.RewindResult, error) {
	resp, err := c.do(ctx, &request{Op: opRewind, Session: sessionID, Gen: f.Generation, RowID: beforeRowID, Rows: extra}, false)
	if err != nil {
		return store.RewindResult{}, err
	}
	return *resp.Rewind, nil
}

func (c *Client) CopyRows(ctx context.Context, src, dst string, uptoRowID uint64) (int, error) {
	resp, err := c.do(ctx, &request{Op: opCopy, Session: src, Dst: dst, RowID: uptoRowID}, false)
	if err != nil {
		return 0, err
	}
	return resp.N, nil
}

func (c *Client) AcquireLease(ctx context.Context, sessionID, owner string, ttl time.Duration) (store.Lease, error) {
	resp, err := c.do(ctx, &request{Op: opAcquire, Session: sessionID, Owner: owner, TTL: ttl}, false)
	if err != nil {
		return store.Lease{}, err
	}
	return *resp.Lease, nil
}

func (c *Client) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	resp, err := c.do(ctx, &request{Op: opRenew, Lease: &l, TTL: ttl}, false)
	if err != nil {
		return store.Lease{}, err
	}
	return *resp.Lease, nil
}

func (c *Client) ReleaseLease(ctx context.Context, l store.Lease) error {
	_, err := c.do(ctx, &request{Op: opRelease, Lease: &l}, false)
	return err
}

func (c *Client) GetLease(ctx context.Context, sessionID string) (store.Lease, error) {
	resp, err := c.do(ctx, &request{Op: opGetLease, Session: sessionID}, true)
	if errors.Is(err, store.ErrInvalidRecord) && strings.Contains(err.Error(), "unknown operation") {
		// A store process of an earlier build (it exits once idle): look the lease up in the list.
		ls, err := c.ListLeases(ctx)
		if err != nil {
			return store.Lease{}, err
		}
		for _, l := range ls {
			if l.SessionID == sessionID {
				return l, nil
			}
		}
		return store.Lease{}, fmt.Errorf("lease of session %q: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return store.Lease{}, err
	}
	if resp.Lease == nil {
		return store.Lease{}, fmt.Errorf("%w: lease of session %q: the store process sent no lease", store.ErrInvalidRecord, sessionID)
	}
	return *resp.Lease, nil
}

func (c *Client) ListLeases(ctx context.Context) ([]store.Lease, error) {
	resp, err := c.do(ctx, &request{Op: opLeases}, true)
	if err != nil {
		return nil, err
	}
	return resp.Leases, nil
}

func (c *Client) PutKV(ctx context.Context, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	_, err := c.do(ctx, &request{Op: opPutKV, Key: key, Value: value}, false)
	return err
}

func (c *Client) GetKV(ctx context.Context, key string) ([]byte, error) {
	resp, err := c.do(ctx, &request{Op: opGetKV, Key: key}, true)
	if err != nil {
		return nil, err
	}
	if resp.Value == nil {
		return []byte{}, nil
	}
	return resp.Value, nil
}

func (c *Client) ListKV(ctx context.Context, prefix string) (map[string][]byte, error) {
	resp, err := c.do(ctx, &request{Op: opListKV, Key: prefix}, true)
	if err != nil {
		return nil, err
	}
	if resp.KV == nil {
		return map[string][]byte{}, nil
	}
	return resp.KV, nil
}

func (c *Client) DeleteKV(ctx context.Context, key string) error {
	_, err := c.do(ctx, &request{Op: opDeleteKV, Key: key}, false)
	return err
}

// AppendEvents appends through the store process. A connection lost before the answer is an
// ErrUnavailable: the caller re-reads the last seq to learn whether the append landed.
func (c *Client) AppendEvents(ctx context.Context, sessionID string, f store.Fence, evs []store.StoredEvent) error {
	_, err := c.do(ctx, &request{Op: opAppendEv, Session: sessionID, Gen: f.Generation, Events: evs}, false)
	return err
}

func (c *Client) EventsSince(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]store.StoredEvent, error) {
	resp, err := c.do(ctx, &request{Op: opEvents, Session: sessionID, After: afterSeq, Limit: limit}, true)
	if err != nil {
		return nil, err
	}
	if resp.Events == nil {
		return []store.StoredEvent{}, nil
	}
	return resp.Events, nil
}

func (c *Client) LastEventSeq(ctx context.Context, sessionID string) (uint64, error) {
	resp, err := c.do(ctx, &request{Op: opLastEv, Session: sessionID}, true)
	if err != nil {
		return 0, err
	}
	return resp.Seq, nil
}

// CompareAndSwapKV swaps in the store process. A connection lost before the answer is an
// ErrUnavailable: whether the swap happened is unknown, and the caller re-reads the key.
func (c *Client) CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error) {
	resp, err := c.do(ctx, &request{Op: opCASKV, Key: key, Old: old, HasOld: old != nil, Value: new, HasVal: new != nil}, false)
	if err != nil {
		return false, err
	}
	return resp.Found, nil
}

// Watch subscribes through the store process. The subscription survives reconnects: it is
// registered again on the new connection and then reports Lost.
func (c *Client) Watch(ctx context.Context, in store.Interest) (*store.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, store.ErrClosed
	}
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	sub := store.NewSubscription(ctx, in, func() { c.unwatch(id) })
	c.mu.Lock()
	c.watches[id] = sub
	c.mu.Unlock()
	for {
		cc, err := c.conn(ctx)
		if err != nil {
			sub.Close()
			return nil, err
		}
		ch := make(chan *response, 1)
		c.mu.Lock()
		if cc.gone {
			c.mu.Unlock()
			continue // lost since conn returned it: registered on the next connection
		}
		c.pending[id] = &call{ch: ch, cc: cc}
		c.mu.Unlock()
		if err := cc.write(&request{ID: id, Op: opWatch, Watch: &in}); err != nil {
			cc.nc.Close()
		}
		select {
		case resp := <-ch:
			if resp == nil {
				continue // registered again on the next connection
			}
			if resp.Code != "" {
				sub.Close()
				return nil, decodeError(resp.Code, resp.Msg)
			}
			return sub, nil
		case <-ctx.Done():
			sub.Close()
			return nil, ctx.Err()
		}
	}
}

// unwatch forgets a watch whose subscription ended, here and in the store process.
func (c *Client) unwatch(id uint64) {
	c.mu.Lock()
	_, live := c.watches[id]
	delete(c.watches, id)
	cc := c.cur
	c.mu.Unlock()
	if live && cc != nil {
		_ = cc.write(&request{Op: opUnwatch, Target: id})
	}
}

// checkText refuses names the wire cannot carry unchanged: JSON text is UTF-8, and an invalid
// byte would arrive as U+FFFD, naming another session or key than the caller's.
func checkText(req *request) error {
	names := []string{req.Session, req.Dst, req.Key, req.Owner}
	if req.Rec != nil {
		names = append(names, req.Rec.ID, req.Rec.Title)
	}
	if req.Lease != nil {
		names = append(names, req.Lease.SessionID, req.Lease.Owner)
	}
	for _, n := range names {
		if !utf8.ValidString(n) {
			return fmt.Errorf("%w: %q is not valid UTF-8", store.ErrInvalidRecord, n)
		}
	}
	return nil
}
