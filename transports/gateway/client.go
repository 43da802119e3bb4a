package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// client is one connection.
type client struct {
	g    *Server
	conn *jsonrpc.Conn
	ws   bool
	who  engine.Principal // whom the connection acts for: it sees only that principal's sessions

	serverRequests atomic.Bool // WebSocket opt-in (stdio always answers)

	mu     sync.Mutex
	atts   map[*live]*attachment
	left   bool
	paused *[]*attachment // pumps held by the running inline handler
}

var _ jsonrpc.Handler = (*client)(nil)
var _ jsonrpc.Async = (*client)(nil)

func (c *client) answersRequests() bool { return !c.ws || c.serverRequests.Load() }

// sees reports whether the connection's principal may see and act on session s.
func (c *client) sees(s *engine.Session) bool { return c.who.Sees(s.Record().Principal) }

// operator reports whether the connection may run process-wide actions (cli.exec, reloads,
// the global busy mode): the local owner and the admin may, other principals may not.
func (c *client) operator() bool { return c.who.ID == "" || c.who.Admin }

// asyncMethods may take long; they run off the reader goroutine (their responses can arrive
// after later ones, as in the reference).
var asyncMethods = map[string]bool{
	"session.list": true, "session.branch": true, "session.compress": true, "cli.exec": true,
	"reload.mcp": true, "session.history": true, "spawn_tree.list": true,
}

func (c *client) Async(method string) bool { return asyncMethods[method] }

// Handle dispatches one request. Inline methods first let this connection's pumps catch up
// with every event emitted so far, then hold them while the method runs and its response is
// written, so the response neither overtakes earlier events nor is overtaken by the events it
// causes.
func (c *client) Handle(ctx context.Context, _ *jsonrpc.Conn, r *jsonrpc.Request) (any, error) {
	h, ok := methods[r.Method]
	if !ok {
		return nil, rpcErr(jsonrpc.CodeMethodNotFound, "unknown method: %s", r.Method)
	}
	if asyncMethods[r.Method] {
		res, err := h(ctx, c, r.Method, r.Params)
		if err != nil {
			return nil, c.wireErr(r.Method, err)
		}
		return res, nil
	}
	c.catchUp()
	release := c.pause()
	handed := false
	defer func() {
		if !handed { // error or panic: nothing will be written under the pause
			release()
		}
	}()
	res, err := h(ctx, c, r.Method, r.Params)
	if err != nil {
		return nil, c.wireErr(r.Method, err)
	}
	// The response must be written while the pumps are held; hand the release to the writer.
	handed = true
	return deferredRelease{res, release}, nil
}

// wireErr maps a method's error to the wire (toWire). A store outage's cause (the database's
// address and user) is not sent to the client; it is logged here, for the operator.
func (c *client) wireErr(method string, err error) error {
	if errors.Is(err, engine.ErrStoreUnavailable) {
		c.g.log.Warn("session store unavailable", "method", method, "err", err)
	}
	return toWire(method, err)
}

// deferredRelease releases the pumps once the connection has written the response.
type deferredRelease struct {
	v       any
	release func()
}

func (d deferredRelease) Value() any { return d.v }
func (d deferredRelease) Written()   { d.release() }

func (c *client) attachments() []*attachment {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*attachment, 0, len(c.atts))
	for _, a := range c.atts {
		out = append(out, a)
	}
	return out
}

// catchUp waits until every pump of this connection has written the events already in its
// session's journal.
func (c *client) catchUp() {
	for _, a := range c.attachments() {
		a.waitDelivered(a.l.s.LastSeq())
	}
}

// pause holds every pump of this connection (and any attached while paused) until release.
func (c *client) pause() (release func()) {
	c.mu.Lock()
	held := make([]*attachment, 0, len(c.atts))
	for _, a := range c.atts {
		a.gate.Lock()
		held = append(held, a)
	}
	c.paused = &held
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.paused = nil
			c.mu.Unlock()
			for _, a := range held {
				a.gate.Unlock()
			}
		})
	}
}

// attach subscribes this connection to a live session from seq since (its current end when
// since is nil). The pump starts after the current response is written.
func (c *client) attach(l *live, since *uint64) *attachment {
	c.mu.Lock()
	if a, ok := c.atts[l]; ok {
		c.mu.Unlock()
		return a
	}
	if c.left {
		c.mu.Unlock()
		return nil
	}
	start := l.s.LastSeq()
	if since != nil {
		start = *since
	}
	ctx, cancel := context.WithCancel(c.conn.Context())
	a := &attachment{c: c, l: l, sub: l.s.Subscribe(start), cancel: cancel, done: make(chan struct{})}
	a.delivered = start
	a.cond = sync.NewCond(&a.dmu)
	c.atts[l] = a
	if c.paused != nil { // attached by the running handler: follow its response
		a.gate.Lock()
		*c.paused = append(*c.paused, a)
	}
	c.mu.Unlock()
	l.mu.Lock()
	l.clients[c] = a
	if l.reap != nil { // re-attached within the grace period
		l.reap.Stop()
		l.reap = nil
	}
	l.mu.Unlock()
	go a.pump(ctx)
	return a
}

func (c *client) attached(l *live) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.atts[l]
	return ok
}

// detach stops this connection's pump for l without waiting for it (a handler may hold its
// gate); leave waits for every pump.
func (c *client) detach(l *live) {
	c.mu.Lock()
	a, ok := c.atts[l]
	delete(c.atts, l)
	c.mu.Unlock()
	l.mu.Lock()
	delete(l.clients, c)
	l.mu.Unlock()
	if ok {
		a.cancel()
	}
}

// leave detaches from everything when the connection ends. Sessions created with
// close_on_disconnect close when their last client leaves; others stay live for a reconnect.
func (c *client) leave() {
	c.mu.Lock()
	c.left = true
	ls := make([]*live, 0, len(c.atts))
	for l := range c.atts {
		ls = append(ls, l)
	}
	c.mu.Unlock()
	for _, l := range ls {
		c.mu.Lock()
		a := c.atts[l]
		c.mu.Unlock()
		c.detach(l)
		if a != nil {
			<-a.done
		}
		l.mu.Lock()
		orphan := len(l.clients) == 0 && l.closeOnDisconnect
		l.mu.Unlock()
		if orphan {
			_ = c.g.closeLive(context.Background(), l, "ws_disconnect")
		} else {
			c.g.orphaned(l)
		}
	}
}

// onResponse takes a client's answer to a server→client request.
func (c *client) onResponse(id string, result json.RawMessage, rerr *jsonrpc.Error) {
	for _, a := range c.attachments() {
		s := a.l.s
		if !hasRequest(s, id) && !a.wasSent(id) {
			continue
		}
		a.noteSent(id, false)
		if rerr != nil {
			_ = s.Withdraw(id, "client declined: "+rerr.Message)
			return
		}
		var ans map[string]any
		if err := json.Unmarshal(result, &ans); err != nil {
			c.g.log.Warn("answer is not an object", "id", id)
			return
		}
		if err := s.Answer(id, ans); err != nil && !errors.Is(err, engine.ErrUnknownRequest) {
			c.g.log.Warn("invalid answer", "id", id, "err", err)
		}
		return
	}
}

func hasRequest(s *engine.Session, id string) bool {
	for _, r := range s.OpenRequests() {
		if r.ID == id {
			return true
		}
	}
	return false
}

// attachment is one connection following one session.
type attachment struct {
	c      *client
	l      *live
	sub    *engine.Subscription
	cancel context.CancelFunc
	done   chan struct{}

	gate sync.Mutex // held while a frame is written, and by a handler pausing the pump

	frames [][]byte // reused by emitBatch

	dmu       sync.Mutex
	cond      *sync.Cond
	delivered uint64
	dead      bool

	// sent: requests sent to the client and not settled yet. A request another process's turn
	// raised is open there, not in this process's session, and is answered through it.
	smu  sync.Mutex
	sent map[string]bool
}

// noteSent records a request sent to the client (sent true) or settled (false).
func (a *attachment) noteSent(id string, sent bool) {
	a.smu.Lock()
	defer a.smu.Unlock()
	if !sent {
		delete(a.sent, id)
		return
	}
	if a.sent == nil {
		a.sent = map[string]bool{}
	}
	a.sent[id] = true
}

// wasSent reports whether request id was sent to the client and is not settled yet.
func (a *attachment) wasSent(id string) bool {
	a.smu.Lock()
	defer a.smu.Unlock()
	return a.sent[id]
}

func (a *attachment) setDelivered(seq uint64) {
	a.dmu.Lock()
	if seq > a.delivered {
		a.delivered = seq
	}
	a.cond.Broadcast()
	a.dmu.Unlock()
}

func (a *attachment) waitDelivered(seq uint64) {
	a.dmu.Lock()
	for a.delivered < seq && !a.dead {
		a.cond.Wait()
	}
	a.dmu.Unlock()
}

// pump renders the session journal onto the connection until the attachment stops.
func (a *attachment) pump(ctx context.Context) {
	defer close(a.done)
	defer func() {
		a.sub.Close()
		a.dmu.Lock()
		a.dead = true
		a.cond.Broadcast()
		a.dmu.Unlock()
	}()
	var buf []engine.Event
	for {
		var err error
		buf, err = a.sub.NextBatch(ctx, buf[:0])
		if len(buf) > 0 {
			a.gate.Lock()
			werr := a.emitBatch(buf)
			a.gate.Unlock()
			a.setDelivered(buf[len(buf)-1].Seq)
			if werr != nil {
				return
			}
		}
		if errors.Is(err, engine.ErrLagged) {
			// The reader fell out of the replay window: say so, then follow from now on. The
			// client recovers with session.events.since (truncated:true) or session.resume.
			last := a.l.s.LastSeq()
			a.gate.Lock()
			werr := a.c.conn.Notify("event", eventParams{Type: "error", SessionID: a.l.rid, Payload: map[string]any{"message": "event stream lagged; refetch with session.events.since", "code": "lagged"}})
			a.gate.Unlock()
			if werr != nil {
				return
			}
			a.sub.Close()
			a.sub = a.l.s.Subscribe(last)
			a.setDelivered(last)
			continue
		}
		if err != nil {
			return
		}
	}
}

// emitBatch writes a run of engine events: notifications go out in one write, a server→client
// request flushes what precedes it so order is kept.
func (a *attachment) emitBatch(evs []engine.Event) error {
	frames := a.frames[:0]
	defer func() { a.frames = frames[:0] }()
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case engine.RequestResolved:
			a.noteSent(d.ID, false)
		case engine.RequestCancel:
			a.noteSent(d.ID, false)
		}
		if req, ok := ev.Data.(engine.Request); ok {
			if err := a.c.conn.WriteFrames(frames); err != nil {
				return err
			}
			frames = frames[:0]
			if err := a.emitRequest(req); err != nil {
				return err
			}
			continue
		}
		p, ok := render(a.l, ev)
		if !ok {
			continue
		}
		f, err := jsonrpc.NotificationFrame("event", p)
		if err != nil {
			a.c.g.log.Error("event not encodable", "type", ev.Type, "err", err)
			continue
		}
		frames = append(frames, f)
	}
	return a.c.conn.WriteFrames(frames)
}

// emitRequest turns an open engine request into a server→client request frame.
func (a *attachment) emitRequest(req engine.Request) error {
	attached, answers := a.l.gateRequests()
	if attached && !answers && gatewayTurn(req.Origin) {
		// Every attached client predates server→client requests: fail fast rather than
		// leave the agent waiting out the deadline. A turn another surface started (a run
		// over HTTP, an editor over ACP) is answered there: an observer here leaves it be.
		_ = a.l.s.Withdraw(req.ID, "no attached client answers server requests")
		return nil
	}
	if !a.c.answersRequests() {
		return nil
	}
	a.noteSent(req.ID, true)
	return a.c.conn.WriteRequest(req.ID, req.Kind, requestParams(a.l, req))
}

// gatewayTurn reports whether a turn of this origin was started over this process's gateway,
// so that only its clients can answer its requests. A request of a turn another process runs
// has no origin here: it is left to its deadline or to a client that answers.
func gatewayTurn(origin string) bool {
	return origin == "tui" || origin == "background"
}

// eventParams is the params object of an event notification.
type eventParams struct {
	Type       string `json:"type"`
	SessionID  string `json:"session_id"`
	Payload    any    `json:"payload,omitempty"`
	Seq        uint64 `json:"seq,omitempty"`
	Generation string `json:"replay_generation,omitempty"`
}

func requestParams(l *live, req engine.Request) map[string]any {
	p := make(map[string]any, len(req.Payload)+4)
	for k, v := range req.Payload {
		p[k] = v
	}
	p["session_id"] = l.rid
	p["request_id"] = req.ID
	if req.Kind == engine.KindApproval {
		choices := []string{"once", "session", "always", "deny"}
		if ap, _ := p["allow_permanent"].(bool); !ap {
			choices = []string{"once", "session", "deny"}
		}
		p["choices"] = choices
		if t, ok := p["tool"]; ok {
			p["tool_name"] = t
		}
	}
	return p
}

func trimText(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
