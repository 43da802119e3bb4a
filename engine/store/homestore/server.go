package homestore

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// ErrRunning: another store process already serves the home. A starter that raced another one
// gets it and simply leaves the home to the winner.
var ErrRunning = errors.New("a store process already serves this home")

// ServerOptions configures Serve.
type ServerOptions struct {
	Home string // the directory holding the socket, the lock file and the log
	// Open opens the store the process serves (the home's badger directory). It is called once
	// the lock is held, so only one process ever opens it.
	Open func() (store.Store, error)
	// Idle is how long the process keeps running with no client connected (zero: until ctx ends).
	Idle time.Duration
	// LockWait is how long to wait for the lock while a previous store process is still shutting
	// down (it has closed its socket but not yet released the store). Default 3 s.
	LockWait time.Duration
	Logger   *slog.Logger
	// Ready, if set, is called once the socket accepts connections.
	Ready func()
}

// Serve runs the store process of a home until ctx ends or it has been idle for o.Idle. It takes
// the home's lock file (ErrRunning when a live store process holds it), opens the store, serves
// the socket (mode 0600, connections from other users refused), and on the way out removes the
// socket, closes the store and releases the lock, in that order, so that a successor never finds
// the store still open.
func Serve(ctx context.Context, o ServerOptions) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.LockWait == 0 {
		o.LockWait = 3 * time.Second
	}
	lock, err := takeLock(ctx, o.Home, o.LockWait)
	if err != nil {
		return err
	}
	defer lock.Close()
	st, err := o.Open()
	if err != nil {
		return err
	}
	srv := &server{st: st, log: log, started: time.Now().UTC(), idle: o.Idle, conns: map[*conn]struct{}{}}
	if d, ok := st.(interface{ Dir() string }); ok {
		srv.dir = d.Dir()
	}
	path := SocketPath(o.Home)
	_ = os.Remove(path) // a socket left by a store process that was killed; we hold the lock
	var ln *net.UnixListener
	err = withAddr(path, func(addr string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	if err != nil {
		_ = st.Close()
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // removed below, only while we still hold the lock
	// Connecting needs write permission on the socket; until this chmod the default mode grants
	// it to nobody else either (umask), and every connection's peer uid is checked anyway.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		_ = st.Close()
		return fmt.Errorf("restrict %s: %w", path, err)
	}
	log.Info("store process serving", "pid", os.Getpid(), "socket", path, "dir", srv.dir)
	if o.Ready != nil {
		o.Ready()
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv.stop = cancel
	srv.mu.Lock()
	srv.armIdle()
	srv.mu.Unlock()
	var workers sync.WaitGroup
	workers.Add(2)
	go func() {
		defer workers.Done()
		srv.accept(ctx, ln)
	}()
	var vanished atomic.Bool
	orig, statErr := os.Stat(path)
	go func() {
		defer workers.Done()
		if statErr != nil || watchSocket(ctx, path, orig) {
			vanished.Store(true)
			cancel()
		}
	}()
	<-ctx.Done()
	_ = ln.Close()
	workers.Wait()
	srv.closeConns()
	// The watcher looks once a second: an idle exit or a signal in between must not miss a
	// home removed meanwhile.
	if vanished.Load() || statErr != nil || socketReplaced(path, orig) {
		// The socket (or the whole home) was removed: nobody can reach this process any more,
		// and a store whose directory is gone cannot be closed (badger would retry writing its
		// tables forever). Everything acknowledged is already committed; leave without writing.
		log.Warn("store process socket removed; exiting", "pid", os.Getpid(), "socket", path)
		return nil
	}
	_ = os.Remove(path)
	err = closeBounded(st, closeWait)
	log.Info("store process exiting", "pid", os.Getpid(), "err", err)
	return err
}

// closeWait bounds how long the store process waits for its store to close: a store whose
// directory was removed under it (a data directory outside the home) would retry writing its
// tables forever.
const closeWait = 30 * time.Second

// closeBounded closes st, giving up after wait. Everything acknowledged was committed before
// its acknowledgement, so giving up loses nothing; the store is left to the process's exit.
func closeBounded(st store.Store, wait time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- st.Close() }() // owned by the exiting process: abandoned after wait
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		return fmt.Errorf("store did not close within %v; exiting without it", wait)
	}
}

// socketReplaced reports whether the socket file at path is gone or is no longer orig.
func socketReplaced(path string, orig os.FileInfo) bool {
	fi, err := os.Stat(path)
	return err != nil || !os.SameFile(orig, fi)
}

// watchSocket reports true when the socket file at path disappears or is no longer orig,
// checking every second until ctx ends (then false).
func watchSocket(ctx context.Context, path string, orig os.FileInfo) bool {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			if socketReplaced(path, orig) {
				return true
			}
		}
	}
}

// takeLock takes the home's lock file and writes the process id into it. While another process
// holds it, it waits up to wait (that process may be on its way out) unless that process answers
// on the socket, which means it is alive and serving: ErrRunning.
func takeLock(ctx context.Context, home string, wait time.Duration) (*os.File, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(LockPath(home), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", LockPath(home), err)
		}
		if c, err := dialSocket(SocketPath(home)); err == nil {
			c.Close()
			f.Close()
			return nil, ErrRunning
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: %s is held but nothing answers on %s", ErrRunning, LockPath(home), SocketPath(home))
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// LockHolder returns the process id written in home's lock file and whether a process holds
// the lock now.
func LockHolder(home string) (pid int, held bool) {
	b, err := os.ReadFile(LockPath(home))
	if err == nil {
		pid, _ = strconv.Atoi(string(trimSpace(b)))
	}
	f, err := os.Open(LockPath(home))
	if err != nil {
		return pid, false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return pid, errors.Is(err, syscall.EWOULDBLOCK)
	}
	return pid, false
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

type server struct {
	st      store.Store
	log     *slog.Logger
	started time.Time
	dir     string
	idle    time.Duration
	stop    context.CancelFunc

	mu        sync.Mutex
	conns     map[*conn]struct{}
	idleTimer *time.Timer
	handlers  sync.WaitGroup // connection goroutines
}

// armIdle starts the idle countdown when no client is connected; s.mu is held.
func (s *server) armIdle() {
	if s.idle <= 0 || len(s.conns) > 0 {
		return
	}
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
	s.idleTimer = time.AfterFunc(s.idle, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.conns) == 0 {
			s.log.Info("store process idle, exiting", "idle", s.idle)
			s.stop()
		}
	})
}

func (s *server) accept(ctx context.Context, ln *net.UnixListener) {
	defer s.handlers.Wait()
	for {
		nc, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("accept", "err", err)
				s.stop()
			}
			return
		}
		uid, pid, err := peerUID(nc)
		if err != nil || uid != os.Getuid() {
			s.log.Warn("refused a connection from another user", "uid", uid, "pid", pid, "err", err)
			nc.Close()
			continue
		}
		c := &conn{s: s, nc: nc, calls: map[uint64]context.CancelFunc{}, fw: newFrameWriter()}
		c.state = ClientState{ClientInfo: ClientInfo{PID: pid}, UID: uid, Connected: time.Now().UTC()}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		if s.idleTimer != nil {
			s.idleTimer.Stop()
		}
		s.mu.Unlock()
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			c.serve(ctx)
			s.mu.Lock()
			delete(s.conns, c)
			s.armIdle()
			s.mu.Unlock()
		}()
	}
}

// closeConns closes every connection; their goroutines have already ended (accept waited).
func (s *server) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
	for c := range s.conns {
		c.nc.Close()
	}
}

func (s *server) status(ctx context.Context) (*Status, error) {
	leases, err := s.st.ListLeases(ctx)
	if err != nil {
		return nil, err
	}
	st := &Status{PID: os.Getpid(), Started: s.started, Dir: s.dir, Leases: leases}
	s.mu.Lock()
	for c := range s.conns {
		c.mu.Lock()
		if !c.hello {
			// A connection that has not said who it is: a starter checking that this process
			// answers (it closes at once), or a client whose hello is still on its way.
			c.mu.Unlock()
			continue
		}
		cs := c.state
		cs.Watches = len(c.watches)
		c.mu.Unlock()
		cs.Calls = c.calls64.Load()
		st.Clients = append(st.Clients, cs)
	}
	s.mu.Unlock()
	return st, nil
}

// conn is one client connection. Each request runs in its own goroutine, so a slow call never
// holds up the others; responses are written whole, one frame at a time.
type conn struct {
	s  *server
	nc *net.UnixConn

	wmu    sync.Mutex // serialises frames
	fw     *frameWriter
	pushMu sync.Mutex // see push

	mu      sync.Mutex
	calls   map[uint64]context.CancelFunc // running requests, for cancel
	watches map[uint64]*serverWatch
	state   ClientState
	hello   bool // the client introduced itself: a hermes process, not a liveness probe
	calls64 atomic.Int64
	work    sync.WaitGroup
}

func (c *conn) serve(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.nc.Close()
		c.work.Wait()
	}()
	// Closing the socket is what ends the read below when the process shuts down.
	stop := context.AfterFunc(ctx, func() { c.nc.Close() })
	defer stop()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var buf []byte
	for {
		payload, err := readFrame(r, buf)
		if err != nil {
			return
		}
		buf = payload
		var req request
		if err := json.Unmarshal(payload, &req); err != nil {
			c.s.log.Warn("undecodable frame; closing the connection", "pid", c.state.PID, "err", err)
			return
		}
		c.calls64.Add(1)
		switch req.Op {
		case opCancel:
			c.mu.Lock()
			if f := c.calls[req.Target]; f != nil {
				f()
			}
			c.mu.Unlock()
			continue
		case opUnwatch:
			c.mu.Lock()
			if w := c.watches[req.Target]; w != nil {
				w.cancel()
				delete(c.watches, req.Target)
			}
			c.mu.Unlock()
			continue
		case opHello:
			c.mu.Lock()
			c.hello = true
			if req.Client != nil {
				c.state.Command = req.Client.Command
			}
			c.mu.Unlock()
		}
		cctx, ccancel := context.WithCancel(ctx)
		if req.Fence != nil {
			cctx = store.WithFence(cctx, req.Fence.SessionID, req.Fence.Generation)
		}
		c.mu.Lock()
		c.calls[req.ID] = ccancel
		c.mu.Unlock()
		c.work.Add(1)
		go func() {
			defer c.work.Done()
			resp := c.handle(cctx, ctx, &req)
			c.mu.Lock()
			delete(c.calls, req.ID)
			c.mu.Unlock()
			ccancel()
			// The hints a write raised go out before its answer, so that a client's own watches
			// know of a write by the time the call returns, as with a store in the process.
			c.flushWatches()
			c.send(resp)
		}()
	}
}

func (c *conn) send(resp *response) {
	var bin []byte
	if len(resp.Sessions) > 0 {
		bin = encodeSessions(make([]byte, 4, 64+100*len(resp.Sessions)), resp.Sessions, resp.Wide)
		resp.Sessions, resp.Bin = nil, true
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := c.fw.frame(resp)
	if err == nil && bin != nil && len(bin)-4 > maxFrame {
		err = fmt.Errorf("%w: a listing of %d bytes exceeds %d", store.ErrInvalidRecord, len(bin)-4, maxFrame)
	}
	if err != nil {
		code, msg := encodeError(err)
		b, err = c.fw.frame(&response{ID: resp.ID, Code: code, Msg: msg})
		if err != nil {
			return
		}
		bin = nil
	}
	if bin != nil {
		binary.BigEndian.PutUint32(bin, uint32(len(bin)-4))
		b = append(b, bin...)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.nc.Close() // the reader ends, and with it the connection
	}
}

// handle runs one request against the store. connCtx outlives the request (a watch lives on).
func (c *conn) handle(ctx, connCtx context.Context, req *request) *response {
	resp := &response{ID: req.ID}
	st := c.s.st
	var err error
	switch req.Op {
	case opHello:
	case opCreate:
		var out store.Session
		if req.Rec == nil {
			err = fmt.Errorf("%w: create without a session", store.ErrInvalidRecord)
			break
		}
		out, err = st.CreateSession(ctx, *req.Rec)
		resp.Session = &out
	case opGet:
		var out store.Session
		out, err = st.GetSession(ctx, req.Session)
		resp.Session = &out
	case opUpdateCAS:
		// The client ran the caller's function on the record at req.Version; the store writes
		// its result only if the record is still at that version.
		if req.Rec == nil {
			err = fmt.Errorf("%w: update without a session", store.ErrInvalidRecord)
			break
		}
		next := *req.Rec
		var out store.Session
		out, err = st.UpdateSession(ctx, req.Session, req.Version, func(s *store.Session) error {
			*s = next
			return nil
		})
		resp.Session = &out
	case opList:
		var o store.ListOptions
		if req.List != nil {
			o = *req.List
		}
		resp.Sessions, err = st.ListSessions(ctx, o)
		resp.Wide = req.Wide
	case opAppend:
		resp.Rows, err = st.AppendRows(ctx, req.Session, store.Fence{Generation: req.Gen}, req.Rows)
	case opAppendUse:
		var u store.Usage
		if req.Usage != nil {
			u = *req.Usage
		}
		var rec store.Session
		if resp.Rows, rec, err = st.AppendRowsUsage(ctx, req.Session, store.Fence{Generation: req.Gen}, req.Rows, u); err == nil {
			resp.Session = &rec
		}
	case opRows:
		var q store.RowQuery
		if req.Query != nil {
			q = *req.Query
		}
		resp.Rows, err = st.Rows(ctx, req.Session, q)
	case opRewind:
		var res store.RewindResult
		res, err = st.Rewind(ctx, req.Session, store.Fence{Generation: req.Gen}, req.RowID, req.Rows)
		resp.Rewind = &res
	case opCopy:
		resp.N, err = st.CopyRows(ctx, req.Session, req.Dst, req.RowID)
	case opAcquire:
		var l store.Lease
		l, err = st.AcquireLease(ctx, req.Session, req.Owner, req.TTL)
		resp.Lease = &l
	case opRenew, opRelease:
		if req.Lease == nil {
			err = fmt.Errorf("%w: %s without a lease", store.ErrInvalidRecord, req.Op)
			break
		}
		if req.Op == opRelease {
			err = st.ReleaseLease(ctx, *req.Lease)
			break
		}
		var l store.Lease
		l, err = st.RenewLease(ctx, *req.Lease, req.TTL)
		resp.Lease = &l
	case opGetLease:
		var l store.Lease
		if l, err = st.GetLease(ctx, req.Session); err == nil {
			resp.Lease = &l
		}
	case opLeases:
		resp.Leases, err = st.ListLeases(ctx)
	case opPutKV:
		err = st.PutKV(ctx, req.Key, req.Value)
	case opGetKV:
		resp.Value, err = st.GetKV(ctx, req.Key)
		resp.Found = err == nil
	case opListKV:
		resp.KV, err = st.ListKV(ctx, req.Prefix())
	case opDeleteKV:
		err = st.DeleteKV(ctx, req.Key)
	case opAppendEv:
		err = st.AppendEvents(ctx, req.Session, store.Fence{Generation: req.Gen}, req.Events)
	case opEvents:
		resp.Events, err = st.EventsSince(ctx, req.Session, req.After, req.Limit)
	case opLastEv:
		resp.Seq, err = st.LastEventSeq(ctx, req.Session)
	case opCASKV:
		old, val := presence(req.Old, req.HasOld), presence(req.Value, req.HasVal)
		resp.Found, err = st.CompareAndSwapKV(ctx, req.Key, old, val)
	case opWatch:
		err = c.watch(connCtx, req)
	case opStatus:
		resp.Status, err = c.s.status(ctx)
	case opDoctor:
		doc, ok := st.(store.Doctor)
		if !ok {
			err = errors.New("the store process's store cannot be checked")
			break
		}
		resp.Problems, err = doc.Doctor(ctx, req.Flag)
	default:
		err = fmt.Errorf("%w: unknown operation %q", store.ErrInvalidRecord, req.Op)
	}
	if err != nil {
		return (&response{ID: req.ID}).withError(err)
	}
	return resp
}

// presence restores a caskv value: nil when has is false (absent), else never nil.
func presence(b []byte, has bool) []byte {
	switch {
	case !has:
		return nil
	case b == nil:
		return []byte{}
	}
	return b
}

// Prefix is the KV prefix of a listkv request (carried in Key).
func (r *request) Prefix() string { return r.Key }

func (r *response) withError(err error) *response {
	r.Code, r.Msg = encodeError(err)
	return r
}

// watch subscribes to the store for the client and pushes hints under the request's id until
// the client unwatches or leaves.
func (c *conn) watch(connCtx context.Context, req *request) error {
	if req.Watch == nil {
		return fmt.Errorf("%w: watch without an interest", store.ErrInvalidRecord)
	}
	wctx, cancel := context.WithCancel(connCtx)
	sub, err := c.s.st.Watch(wctx, *req.Watch)
	if err != nil {
		cancel()
		return err
	}
	w := &serverWatch{id: req.ID, sub: sub, cancel: cancel}
	c.mu.Lock()
	if c.watches == nil {
		c.watches = map[uint64]*serverWatch{}
	}
	if old := c.watches[req.ID]; old != nil {
		old.cancel()
	}
	c.watches[req.ID] = w
	c.mu.Unlock()
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		defer cancel()
		for range sub.C() {
			c.push(w)
		}
	}()
	return nil
}

type serverWatch struct {
	id     uint64
	sub    *store.Subscription
	cancel context.CancelFunc
}

// push sends w's pending hints, if any. Taking and sending happen under pushMu, so a flush
// before an answer waits for hints already taken by the watch's goroutine to be on the wire.
func (c *conn) push(w *serverWatch) {
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	changes, lost := w.sub.Take()
	if len(changes) > 0 || lost {
		c.send(&response{ID: w.id, Changes: changes, Lost: lost})
	}
}

func (c *conn) flushWatches() {
	c.mu.Lock()
	ws := make([]*serverWatch, 0, len(c.watches))
	for _, w := range c.watches {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		c.push(w)
	}
}
