package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/modelopts"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// Options configure a Server.
type Options struct {
	Version string
	// Models lists the model names a provider is known to serve, for the offline check of
	// session.create; nil or an empty list means "accept any name" (custom endpoints,
	// aggregators, local servers).
	Models func(provider string) []string
	// ModelOptions answers model.options: the picker inventory (engine/modelopts) with
	// refresh as asked. Nil builds it from the engine's provider names, nothing probed.
	ModelOptions func(ctx context.Context, refresh bool) map[string]any
	// BusyMode and SetBusyMode read and change the busy-input mode (config busy).
	BusyMode    func() string
	SetBusyMode func(mode string) error
	// CLI runs an allow-listed hermes subcommand for cli.exec and returns its output.
	CLI func(ctx context.Context, argv []string) (output string, exitCode int, err error)
	// CLIAllow lists the subcommands cli.exec may run.
	CLIAllow []string
	// Home is HERMES_HOME (pasted images, .env for reload.env).
	Home string
	// ReloadEnv re-reads environment-backed configuration; it returns the names it changed.
	ReloadEnv func() ([]string, error)
	// ReloadMCP reconnects MCP servers; it returns their status.
	ReloadMCP func(ctx context.Context) (any, error)
	// MCPStatus reports the MCP servers a session's tools come from (connected, tool count,
	// error per server); it is shown as mcp_servers in session info and session.status.
	MCPStatus func() any
	// OrphanGrace is how long a session nobody is attached to stays live before it is closed
	// (it stays stored and resumable). Running sessions and sessions waiting on a person are
	// never reaped. Default 20s; negative keeps orphans live forever.
	OrphanGrace time.Duration
	// MaxFrame bounds one incoming message (default jsonrpc.DefaultMaxFrame).
	MaxFrame int
	// MaxInFlight caps the async requests running at once per connection (default
	// jsonrpc.DefaultMaxInFlight; negative: no cap). One over it gets -32001 with
	// error.data.retry_after_ms.
	MaxInFlight int
	Logger      *slog.Logger
	// Epoch is the replay epoch (gateway.ready.replay_epoch); empty draws one. ServeLazy
	// hands its caller the epoch it has already announced.
	Epoch string
}

// Server is the gateway of one process, shared by all its connections.
type Server struct {
	eng    *engine.Engine
	opts   Options
	epoch  string
	log    *slog.Logger
	models modelopts.Cache // model.options probes, when Options.ModelOptions is nil

	mu       sync.Mutex
	sessions map[string]*live // by runtime id
	byStored map[string]*live
	order    []string                  // runtime ids in creation order
	locks    map[string]map[string]any // clarify batch answers locked so far, by request id
	// goneRIDs are runtime ids dropped because their session was deleted or closed elsewhere,
	// with the session's principal: they answer "stored session not found" from then on.
	goneRIDs map[string]string

	turnHook TurnHook // see SetTurnHook; guarded by mu

	bg     sync.WaitGroup // background prompts
	ctx    context.Context
	cancel context.CancelFunc
}

// live is a session made live by this gateway, with the clients attached to it.
type live struct {
	rid string
	s   *engine.Session
	mcp func() any // Options.MCPStatus; nil when none is configured
	// lazy: made by session.create here without seeded messages; its info says lazy until
	// its first turn (the session itself is stored at birth).
	lazy atomic.Bool

	mu                sync.Mutex
	clients           map[*client]*attachment
	images            []string
	cols              int
	lastActive        time.Time
	closeOnDisconnect bool
	reap              *time.Timer // pending orphan reap, nil when someone is attached
}

// New returns a gateway over eng.
func New(eng *engine.Engine, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = jsonrpc.DefaultMaxFrame
	}
	if opts.OrphanGrace == 0 {
		opts.OrphanGrace = 20 * time.Second
	}
	if opts.Epoch == "" {
		opts.Epoch = randHex(8)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		eng: eng, opts: opts, epoch: opts.Epoch, log: opts.Logger,
		sessions: map[string]*live{}, byStored: map[string]*live{}, goneRIDs: map[string]string{}, locks: map[string]map[string]any{},
		ctx: ctx, cancel: cancel,
	}
}

// TurnHook runs a prompt.submit's admission for the connection's principal p: it calls
// submit (which may start a turn on s) and returns its result. The HTTP server uses it to
// record who started a turn, so that turn's browser tool calls go to that principal's
// controller.
type TurnHook func(p engine.Principal, s *engine.Session, submit func() (engine.Admission, error)) (engine.Admission, error)

// SetTurnHook installs h for the prompts submitted from now on.
func (g *Server) SetTurnHook(h TurnHook) {
	g.mu.Lock()
	g.turnHook = h
	g.mu.Unlock()
}

// submit admits a prompt through the turn hook, if one is set.
func (g *Server) submit(p engine.Principal, s *engine.Session, submit func() (engine.Admission, error)) (engine.Admission, error) {
	g.mu.Lock()
	h := g.turnHook
	g.mu.Unlock()
	if h == nil {
		return submit()
	}
	return h(p, s, submit)
}

// Epoch is this process's replay epoch (gateway.ready.replay_epoch).
func (g *Server) Epoch() string { return g.epoch }

// Close stops orphan reaping and waits for background prompts. It does not close the engine.
func (g *Server) Close() {
	g.cancel()
	for _, l := range g.liveList() {
		l.mu.Lock()
		if l.reap != nil {
			l.reap.Stop()
		}
		l.mu.Unlock()
	}
	g.bg.Wait()
}

// orphaned schedules closing a session its last client left. A session still running or
// waiting on a person is checked again after another grace period.
func (g *Server) orphaned(l *live) {
	if g.opts.OrphanGrace < 0 || g.ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.clients) > 0 || l.reap != nil {
		return
	}
	l.reap = time.AfterFunc(g.opts.OrphanGrace, func() {
		l.mu.Lock()
		l.reap = nil
		attached := len(l.clients) > 0
		l.mu.Unlock()
		if attached || g.ctx.Err() != nil {
			return
		}
		if l.s.Status() != engine.StatusIdle {
			g.orphaned(l)
			return
		}
		_ = g.closeLive(context.Background(), l, "ws_orphan_reap")
	})
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:2*n]
}

// register makes s live under a new runtime id, or returns its existing entry.
func (g *Server) register(s *engine.Session) *live {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l, ok := g.byStored[s.ID()]; ok && l.s == s {
		return l
	}
	rid := randHex(4)
	for g.sessions[rid] != nil {
		rid = randHex(4)
	}
	l := &live{rid: rid, s: s, mcp: g.opts.MCPStatus, clients: map[*client]*attachment{}, cols: 80, lastActive: time.Now()}
	g.sessions[rid] = l
	g.byStored[s.ID()] = l
	g.order = append(g.order, rid)
	return l
}

// wasGone reports whether rid named an entry dropped because its session was gone, and whose
// session it was.
func (g *Server) wasGone(rid string) (principal string, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	principal, ok = g.goneRIDs[rid]
	return principal, ok
}

func (g *Server) lookup(rid string) (*live, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, ok := g.sessions[rid]
	return l, ok
}

// Holds reports whether the gateway has a live entry for the stored session id. Entries
// outlive their clients' connections (a client reconnects by the runtime id), so a surface
// that lets go of idle sessions must keep these: the entry would be left holding a dead object.
func (g *Server) Holds(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.byStored[id]
	return ok
}

func (g *Server) unregister(l *live) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sessions, l.rid)
	if g.byStored[l.s.ID()] == l {
		delete(g.byStored, l.s.ID())
	}
	g.order = slices.DeleteFunc(g.order, func(r string) bool { return r == l.rid })
}

// liveList returns the entries in order, dropping those whose session is gone (see gone).
func (g *Server) liveList() []*live {
	g.mu.Lock()
	all := make([]*live, 0, len(g.order))
	for _, rid := range g.order {
		all = append(all, g.sessions[rid])
	}
	g.mu.Unlock()
	return slices.DeleteFunc(all, g.gone)
}

// gone reports whether l's session was closed behind the gateway's back (deleted over another
// surface, closed by the engine), and then drops the entry and its attachments: its runtime id
// is no longer served. A session the engine released while idle is not gone (it comes back).
func (g *Server) gone(l *live) bool {
	if l.s.Status() != engine.StatusClosed || l.s.Released() {
		return false
	}
	g.unregister(l)
	g.mu.Lock()
	g.goneRIDs[l.rid] = l.s.Record().Principal
	g.mu.Unlock()
	l.mu.Lock()
	if l.reap != nil {
		l.reap.Stop()
		l.reap = nil
	}
	cs := make([]*client, 0, len(l.clients))
	for c := range l.clients {
		cs = append(cs, c)
	}
	l.mu.Unlock()
	for _, c := range cs {
		c.detach(l)
	}
	return true
}

// closeLive closes a live session for everyone attached.
func (g *Server) closeLive(ctx context.Context, l *live, reason string) error {
	g.unregister(l)
	l.mu.Lock()
	atts := make([]*attachment, 0, len(l.clients))
	for _, a := range l.clients {
		atts = append(atts, a)
	}
	l.mu.Unlock()
	err := l.s.Close(ctx, reason)
	for _, a := range atts {
		a.c.detach(l)
	}
	return err
}

// gateRequests reports whether any client is attached and whether one answers server→client
// requests. A session
// with nobody attached keeps its requests open for a reconnect.
func (l *live) gateRequests() (anyAttached, anyAnswers bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.clients {
		anyAttached = true
		if c.answersRequests() {
			anyAnswers = true
		}
	}
	return
}

// Serve runs one connection of the local owner until it ends. ws marks a WebSocket client,
// which must opt in to server→client requests with client.capabilities.
func (g *Server) Serve(ctx context.Context, f jsonrpc.Framer, ws bool, onFrame func(dir string, frame []byte)) error {
	return g.ServeAs(ctx, engine.LocalOwner, f, ws, onFrame)
}

// ServeAs is Serve for a connection acting for principal p: it sees, resumes, lists and
// answers only p's sessions (all of them for an admin); another principal's session is
// reported exactly like one that does not exist. Sessions it creates belong to p.
func (g *Server) ServeAs(ctx context.Context, p engine.Principal, f jsonrpc.Framer, ws bool, onFrame func(dir string, frame []byte)) error {
	return g.serve(ctx, p, f, ws, onFrame, true)
}

func (g *Server) serve(ctx context.Context, p engine.Principal, f jsonrpc.Framer, ws bool, onFrame func(dir string, frame []byte), announce bool) error {
	c := &client{g: g, ws: ws, who: p, atts: map[*live]*attachment{}}
	c.conn = jsonrpc.NewConn(f, c, jsonrpc.Options{OnFrame: onFrame, OnResponse: c.onResponse, MaxInFlight: g.opts.MaxInFlight, Logger: g.log})
	if announce {
		if err := c.conn.Notify("event", readyParams(g.epoch, ws)); err != nil {
			return err
		}
	}
	err := c.conn.Run(ctx)
	c.leave()
	return err
}

func readyParams(epoch string, ws bool) eventParams {
	ready := map[string]any{"skin": map[string]any{"name": "default"}, "change_events": false, "replay_epoch": epoch}
	if ws {
		ready["heartbeat"] = true
	}
	return eventParams{Type: "gateway.ready", SessionID: "", Payload: ready}
}

// ServeLazy serves one stdio connection of the local owner while the server is still being
// built: gateway.ready is written first, then open builds the server (opening the store and
// the engine) with Options.Epoch set to the epoch announced, and only then are the client's
// frames read, so a request sent meanwhile waits and is answered in order. When open fails,
// an error event {message: "hermes could not start: …"} follows the ready frame and its error
// is returned.
func ServeLazy(ctx context.Context, f jsonrpc.Framer, onFrame func(dir string, frame []byte), open func(epoch string) (*Server, error)) error {
	epoch := randHex(8)
	write := func(params eventParams) error {
		b, err := jsonrpc.NotificationFrame("event", params)
		if err != nil {
			return err
		}
		if onFrame != nil {
			onFrame("out", b)
		}
		return f.Write(ctx, b)
	}
	if err := write(readyParams(epoch, false)); err != nil {
		return err
	}
	g, err := open(epoch)
	if err != nil {
		_ = write(eventParams{Type: "error", Payload: map[string]any{"message": "hermes could not start: " + err.Error()}})
		return err
	}
	return g.serve(ctx, engine.LocalOwner, f, false, onFrame, false)
}
