package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/tool/browser"
)

// BrowserControl configures browser control: a browser extension registers as the controller
// of its API key's principal and connects a WebSocket; the agent's browser tool calls of turns
// that principal started are carried out by it, and by nobody else.
type BrowserControl struct {
	Enabled bool
	// Capabilities is the server's allow-list: a controller may register for these actions
	// only (default: every action of the browser tool).
	Capabilities []string
	// Timeout bounds one browser action, controller round trip included (default 30s).
	Timeout time.Duration
}

// Close codes of /v1/browser-control/ws.
const (
	CloseControllerReplaced = 4409 // the principal registered a new controller
)

// Browser-controller wire messages (JSON text frames).
const (
	msgReady   = "browser.controller.ready"   // server → controller, once connected
	msgCommand = "browser.controller.command" // server → controller
	msgCancel  = "browser.controller.cancel"  // server → controller: stop working on a command
	msgResult  = "browser.controller.result"  // controller → server
	msgError   = "browser.controller.error"   // server → controller: a frame it could not use
)

// broker binds controllers to principals and turns to the principals that started them.
type broker struct {
	s    *Server
	caps []string // the server's allow-list
	tool *browser.Tool

	mu       sync.Mutex
	ctls     map[string]*controller // by principal
	owners   map[string]turnOwner   // by session id: whose request started the running turn
	starting map[string]*startLock  // by session id: turn starts in progress
}

type turnOwner struct {
	turnID    string
	principal string
}

// startLock serialises turn starts of one session with owner lookups: a lookup waits for a
// start in progress, so a tool call of a just-started turn never sees the previous owner.
type startLock struct {
	mu   sync.Mutex
	refs int
}

// controller is one registered controller; conn is set while its WebSocket is connected.
type controller struct {
	id        string
	principal string
	caps      []string

	// wmu serialises writes and is held by whoever uses conn from outside the connection's
	// own goroutine: detach takes it too, so the connection (which fiber recycles once its
	// handler returns) outlives every such use. Lock order: wmu, then mu.
	wmu     sync.Mutex
	mu      sync.Mutex // guards conn, pending, gone, replaced
	conn    *websocket.Conn
	pending map[string]chan browser.Reply
	gone    chan struct{} // closed when the current connection ends
	// replaced: the principal registered a newer controller; this one takes no connection.
	replaced bool
}

func (s *Server) initBrowser() error {
	bc := s.opts.BrowserControl
	if !bc.Enabled {
		return nil
	}
	caps := bc.Capabilities
	if len(caps) == 0 {
		caps = browser.Actions
	}
	for _, c := range caps {
		if !browser.KnownAction(c) {
			return fmt.Errorf("httpapi: browser control: unknown capability %q (known: %s)", c, strings.Join(browser.Actions, ", "))
		}
	}
	b := &broker{s: s, caps: slices.Clone(caps), ctls: map[string]*controller{}, owners: map[string]turnOwner{}, starting: map[string]*startLock{}}
	b.tool = browser.New(b, browser.Options{Timeout: bc.Timeout})
	if _, err := s.eng.Tools().Get(browser.Name); err == nil {
		return fmt.Errorf("httpapi: browser control: the engine already has a %q tool", browser.Name)
	}
	// The registry is the engine's: New runs before the server takes requests, so no turn
	// reads it concurrently.
	s.eng.Tools().Add(b.tool)
	s.browser = b
	if s.gw != nil {
		s.gw.SetTurnHook(b.gatewayTurn)
	}
	return nil
}

// turnCtx is the context a handler starts a turn with: the server's (ended by Shutdown),
// carrying the request's principal for the browser broker.
func (s *Server) turnCtx(c *fiber.Ctx) context.Context {
	return withTrace(withPrincipal(s.ctx, principal(c)), requestTrace(c))
}

// withPrincipal is ctx carrying principal p, for a turn started after its request returned
// (a queued run): startTurn, or broker.bind, then records p as the turn's owner.
func withPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

type principalKey struct{}

// bind runs start (which submits a turn) and records the principal of ctx as the owner of the
// turn it started. Without browser control, or without a principal, it only runs start.
func (b *broker) bind(ctx context.Context, sess *engine.Session, start func() (*turnRun, error)) (*turnRun, error) {
	p, _ := ctx.Value(principalKey{}).(string)
	if b == nil || p == "" {
		return start()
	}
	unlock := b.lockStart(sess.ID())
	defer unlock()
	r, err := start()
	if err == nil {
		b.own(sess.ID(), r.turnID, p)
	}
	return r, err
}

func (b *broker) own(sessionID, turnID, principal string) {
	b.mu.Lock()
	b.owners[sessionID] = turnOwner{turnID: turnID, principal: principal}
	b.mu.Unlock()
}

// gatewayTurn is the gateway's turn hook on /api/ws: a turn a prompt.submit starts is owned
// by the connection's principal, like one an API request starts, until it ends. A prompt
// queued or steered into a running turn changes no owner.
func (b *broker) gatewayTurn(p engine.Principal, sess *engine.Session, submit func() (engine.Admission, error)) (engine.Admission, error) {
	digest, ok := b.s.digestOf(p)
	if !ok {
		return submit()
	}
	unlock := b.lockStart(sess.ID())
	defer unlock()
	adm, err := submit()
	if err != nil || adm.Status != engine.AdmitStarted || adm.TurnID == "" {
		return adm, err
	}
	b.own(sess.ID(), adm.TurnID, digest)
	go func() { // ends with the turn, or when the server shuts down
		_, _ = sess.Wait(b.s.ctx, adm.TurnID)
		b.unbind(sess.ID(), adm.TurnID)
	}()
	return adm, nil
}

// unbind forgets the owner of a turn that ended (a later turn's owner is left alone).
func (b *broker) unbind(sessionID, turnID string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	if o, ok := b.owners[sessionID]; ok && o.turnID == turnID {
		delete(b.owners, sessionID)
	}
	b.mu.Unlock()
}

func (b *broker) lockStart(id string) (unlock func()) {
	b.mu.Lock()
	l := b.starting[id]
	if l == nil {
		l = &startLock{}
		b.starting[id] = l
	}
	l.refs++
	b.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		b.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(b.starting, id)
		}
		b.mu.Unlock()
	}
}

// owner returns the principal that started the session's running turn: an API request's or
// an /api/ws connection's. A turn started elsewhere (the stdio gateway, a queued follow-up, a
// sub-agent) has none.
func (b *broker) owner(sessionID string) (string, bool) {
	b.lockStart(sessionID)() // wait out a start in progress
	b.mu.Lock()
	o, ok := b.owners[sessionID]
	b.mu.Unlock()
	if !ok {
		return "", false
	}
	sess, live := b.s.eng.Live(sessionID)
	if !live {
		return "", false
	}
	in := sess.Snapshot().Inflight
	if in == nil || in.TurnID != o.turnID {
		return "", false
	}
	return o.principal, true
}

// Do implements browser.Controller: the command goes to the controller of the principal that
// started the session's running turn, if the action is in that controller's allow-list.
func (b *broker) Do(ctx context.Context, sessionID string, cmd browser.Command) (browser.Reply, error) {
	p, ok := b.owner(sessionID)
	if !ok {
		return browser.Reply{}, fmt.Errorf("%w: this turn was not started by an API request of a principal with a registered controller", browser.ErrNoController)
	}
	b.mu.Lock()
	ctl := b.ctls[p]
	b.mu.Unlock()
	if ctl == nil {
		return browser.Reply{}, fmt.Errorf("%w: register one with POST /v1/browser-control/register", browser.ErrNoController)
	}
	if !slices.Contains(ctl.caps, cmd.Action) {
		return browser.Reply{}, fmt.Errorf("%w: %q is not in the controller's capability allow-list (%s)", browser.ErrNotAllowed, cmd.Action, strings.Join(ctl.caps, ", "))
	}
	return ctl.do(ctx, sessionID, cmd)
}

func (ctl *controller) do(ctx context.Context, sessionID string, cmd browser.Command) (browser.Reply, error) {
	id := "cmd_" + newHex(12)
	ch := make(chan browser.Reply, 1)
	ctl.mu.Lock()
	if ctl.conn == nil {
		ctl.mu.Unlock()
		return browser.Reply{}, fmt.Errorf("%w: the registered controller is not connected to /v1/browser-control/ws", browser.ErrNoController)
	}
	ctl.pending[id] = ch
	gone := ctl.gone
	ctl.mu.Unlock()
	defer func() {
		ctl.mu.Lock()
		delete(ctl.pending, id)
		ctl.mu.Unlock()
	}()
	if err := ctl.send(map[string]any{"type": msgCommand, "command_id": id, "session_id": sessionID, "action": cmd.Action, "arguments": cmd.Arguments}); err != nil {
		return browser.Reply{}, fmt.Errorf("%w: %v", browser.ErrControllerGone, err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-gone:
		return browser.Reply{}, browser.ErrControllerGone
	case <-ctx.Done():
		reason := "timeout"
		if errors.Is(ctx.Err(), context.Canceled) {
			reason = "interrupted"
		}
		_ = ctl.send(map[string]any{"type": msgCancel, "command_id": id, "reason": reason})
		return browser.Reply{}, ctx.Err()
	}
}

func (ctl *controller) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctl.wmu.Lock()
	defer ctl.wmu.Unlock()
	ctl.mu.Lock()
	conn := ctl.conn
	ctl.mu.Unlock()
	if conn == nil {
		return errors.New("not connected")
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return conn.WriteMessage(websocket.TextMessage, b)
}

// detach ends conn's tenure: commands waiting on it fail at once, and the controller may
// connect again (unless it was replaced).
func (ctl *controller) detach(conn *websocket.Conn) {
	ctl.wmu.Lock()
	defer ctl.wmu.Unlock()
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if ctl.conn == conn {
		ctl.conn = nil
		close(ctl.gone)
		ctl.gone = make(chan struct{})
	}
}

// browserOff answers every browser-control route while the feature is disabled.
func browserOff(*fiber.Ctx) error {
	return &apiError{Status: fiber.StatusNotFound, Message: "browser control is disabled on this server (enable browser_control in the configuration)", Type: "invalid_request_error", Code: "browser_control_disabled"}
}

type registerRequest struct {
	Capabilities []string `json:"capabilities"`
}

// browserRegister binds a new controller to the caller's principal, replacing (and
// disconnecting) a previous one: a principal has at most one controller.
func (s *Server) browserRegister(c *fiber.Ctx) error {
	var req registerRequest
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if len(req.Capabilities) == 0 {
		return badRequest("capabilities", "missing_capabilities", "'capabilities' must list the browser actions this controller may perform (allowed: "+strings.Join(s.browser.caps, ", ")+")")
	}
	var caps []string
	for i, a := range req.Capabilities {
		if !slices.Contains(s.browser.caps, a) {
			return badRequest(fmt.Sprintf("capabilities[%d]", i), "invalid_capability", fmt.Sprintf("capability %q is not allowed on this server (allowed: %s)", a, strings.Join(s.browser.caps, ", ")))
		}
		if !slices.Contains(caps, a) {
			caps = append(caps, a)
		}
	}
	p := principal(c)
	ctl := &controller{id: "bc_" + newHex(16), principal: p, caps: caps, pending: map[string]chan browser.Reply{}, gone: make(chan struct{})}
	b := s.browser
	b.mu.Lock()
	old := b.ctls[p]
	b.ctls[p] = ctl
	b.mu.Unlock()
	if old != nil {
		old.wmu.Lock()
		old.mu.Lock()
		old.replaced = true
		conn := old.conn
		old.mu.Unlock()
		if conn != nil {
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseControllerReplaced, "replaced by a new registration"), time.Now().Add(time.Second))
			_ = conn.Close()
		}
		old.wmu.Unlock()
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{
		"object":        "hermes.browser_control.controller",
		"controller_id": ctl.id,
		"principal":     p,
		"capabilities":  caps,
		"websocket":     fiber.Map{"method": "GET", "path": "/v1/browser-control/ws?controller_id=" + ctl.id},
		"timeout_ms":    s.browserTimeout().Milliseconds(),
	})
}

func (s *Server) browserTimeout() time.Duration {
	if t := s.opts.BrowserControl.Timeout; t > 0 {
		return t
	}
	return 30 * time.Second
}

// browserUpgrade checks, before the upgrade, that the controller exists, belongs to the
// caller's principal and is not already connected.
func (s *Server) browserUpgrade(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return &apiError{Status: fiber.StatusUpgradeRequired, Message: "this endpoint takes a WebSocket upgrade", Type: "invalid_request_error", Code: "upgrade_required"}
	}
	id := c.Query("controller_id")
	b := s.browser
	b.mu.Lock()
	ctl := b.ctls[principal(c)]
	b.mu.Unlock()
	// A controller of another principal is reported exactly like an unknown one.
	if id == "" || ctl == nil || ctl.id != id {
		return &apiError{Status: fiber.StatusNotFound, Message: "no registered controller " + strconv.Quote(id) + " for this API key", Type: "invalid_request_error", Param: "controller_id", Code: "controller_not_found"}
	}
	ctl.mu.Lock()
	busy := ctl.conn != nil
	ctl.mu.Unlock()
	if busy {
		return &apiError{Status: fiber.StatusConflict, Message: "controller " + id + " is already connected", Type: "invalid_request_error", Code: "controller_connected", NoRetry: true}
	}
	c.Locals("hermes.controller", ctl)
	return c.Next()
}

type controllerMessage struct {
	Type      string          `json:"type"`
	CommandID string          `json:"command_id"`
	OK        *bool           `json:"ok"`
	Content   json.RawMessage `json:"content"`
	Error     string          `json:"error"`
}

// parseResult reads a controller frame. Content may be a string (used as is) or any JSON
// value (passed to the model as JSON text); a failed action carries error.
func parseResult(frame []byte) (id string, r browser.Reply, err error) {
	var m controllerMessage
	if err := json.Unmarshal(frame, &m); err != nil {
		return "", r, fmt.Errorf("invalid JSON: %v", err)
	}
	if m.Type != msgResult {
		return "", r, fmt.Errorf("unknown message type %q (want %s)", m.Type, msgResult)
	}
	if m.CommandID == "" || m.OK == nil {
		return "", r, errors.New("a result needs command_id and ok")
	}
	var text string
	if len(m.Content) > 0 && json.Unmarshal(m.Content, &text) != nil && string(m.Content) != "null" {
		text = string(m.Content)
	}
	if !*m.OK {
		if m.Error == "" {
			m.Error = "the browser could not perform the action"
		}
		text = strings.TrimSpace(m.Error + "\n" + text)
	}
	return m.CommandID, browser.Reply{Content: text, IsError: !*m.OK}, nil
}

// serveBrowser runs one controller connection: it delivers results to waiting commands until
// the socket closes.
func (s *Server) serveBrowser(conn *websocket.Conn) {
	ctl, _ := conn.Locals("hermes.controller").(*controller)
	ctl.mu.Lock()
	if ctl.conn != nil || ctl.replaced { // lost a race with another connect or a new registration
		ctl.mu.Unlock()
		_ = conn.Close()
		return
	}
	ctl.conn = conn
	ctl.mu.Unlock()
	s.mu.Lock()
	s.conns[conn] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		ctl.detach(conn)
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		s.wg.Done()
	}()
	conn.SetReadLimit(int64(s.opts.MaxFrame))
	if err := ctl.send(map[string]any{"type": msgReady, "controller_id": ctl.id, "capabilities": ctl.caps}); err != nil {
		return
	}
	for {
		mt, frame, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if mt != websocket.TextMessage {
			continue
		}
		id, rep, err := parseResult(frame)
		if err != nil {
			_ = ctl.send(map[string]any{"type": msgError, "message": err.Error()})
			continue
		}
		ctl.mu.Lock()
		ch := ctl.pending[id]
		ctl.mu.Unlock()
		if ch == nil {
			// Late (timed out, cancelled) or invented: nothing waits for it.
			_ = ctl.send(map[string]any{"type": msgError, "command_id": id, "message": "no pending command with this id"})
			continue
		}
		select {
		case ch <- rep:
		default: // a duplicate answer
		}
	}
}

// browserRoutes mounts browser control, or its refusal when disabled.
func (s *Server) browserRoutes() {
	if s.browser == nil {
		s.app.Post("/v1/browser-control/register", browserOff)
		s.app.Get("/v1/browser-control/ws", browserOff)
		return
	}
	s.app.Post("/v1/browser-control/register", s.browserRegister)
	s.app.Get("/v1/browser-control/ws", s.browserUpgrade, websocket.New(s.serveBrowser, websocket.Config{ReadBufferSize: 8 << 10, WriteBufferSize: 8 << 10}))
}

// digestOf is the key digest of the principal p of one of the server's keys.
func (s *Server) digestOf(p engine.Principal) (string, bool) {
	for _, k := range s.keys {
		if k.who.ID == p.ID && k.who.Admin == p.Admin {
			return k.digest, true
		}
	}
	return "", false
}
