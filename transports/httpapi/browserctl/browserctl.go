// Package browserctl is browser control's broker: it binds browser controllers (a browser
// extension on a WebSocket) to the principals that registered them, and running turns to the
// principals whose requests started them, and carries out the browser tool's calls of a turn
// on the controller of that turn's principal only.
//
// The broker knows principals by an opaque string (the HTTP server's key digest) and speaks
// the controller's wire protocol (JSON text frames, see the msg* constants). Mount serves the
// routes that register and connect controllers, in the API's error form.
package browserctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/tool/browser"
)

// Config configures browser control: a browser extension registers as the controller of its
// API key's principal and connects a WebSocket; the agent's browser tool calls of turns that
// principal started are carried out by it, and by nobody else.
type Config struct {
	Enabled bool
	// Capabilities is the server's allow-list: a controller may register for these actions
	// only (default: every action of the browser tool).
	Capabilities []string
	// Timeout bounds one browser action, controller round trip included (default 30s).
	Timeout time.Duration
}

// CloseControllerReplaced is the close code of a controller connection whose principal
// registered a new controller.
const CloseControllerReplaced = 4409

// Browser-controller wire messages (JSON text frames).
const (
	msgReady   = "browser.controller.ready"   // server → controller, once connected
	msgCommand = "browser.controller.command" // server → controller
	msgCancel  = "browser.controller.cancel"  // server → controller: stop working on a command
	msgResult  = "browser.controller.result"  // controller → server
	msgError   = "browser.controller.error"   // server → controller: a frame it could not use
)

// Refusal is a request the broker turns down; the server answers it in its own error form.
type Refusal struct {
	Status  int    // the HTTP status
	Code    string // a stable machine-readable code
	Param   string // the offending field, if any
	Message string
	NoRetry bool // repeating the request cannot succeed
}

func (r *Refusal) Error() string { return r.Message }

// Broker binds controllers to principals and turns to the principals that started them. It
// is the browser tool's controller (browser.Controller).
type Broker struct {
	eng  *engine.Engine
	ctx  context.Context // the server's lifetime
	caps []string        // the server's allow-list
	// timeout is Config.Timeout (Timeout gives the default).
	timeout time.Duration

	mu       sync.Mutex
	ctls     map[string]*Controller // by principal
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

// Controller is one registered controller; conn is set while its WebSocket is connected.
type Controller struct {
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

// ID is the controller's id (bc_...).
func (ctl *Controller) ID() string { return ctl.id }

// Capabilities are the actions the controller registered for.
func (ctl *Controller) Capabilities() []string { return ctl.caps }

// New checks cfg and adds the browser tool to eng's registry, its calls carried out by the
// returned browserctl. It must run before eng takes turns: nothing reads the registry meanwhile.
// ctx is the server's lifetime.
func New(ctx context.Context, eng *engine.Engine, cfg Config) (*Broker, error) {
	caps := cfg.Capabilities
	if len(caps) == 0 {
		caps = browser.Actions
	}
	for _, c := range caps {
		if !browser.KnownAction(c) {
			return nil, fmt.Errorf("unknown capability %q (known: %s)", c, strings.Join(browser.Actions, ", "))
		}
	}
	if _, err := eng.Tools().Get(browser.Name); err == nil {
		return nil, fmt.Errorf("the engine already has a %q tool", browser.Name)
	}
	b := &Broker{eng: eng, ctx: ctx, caps: slices.Clone(caps), timeout: cfg.Timeout, ctls: map[string]*Controller{}, owners: map[string]turnOwner{}, starting: map[string]*startLock{}}
	eng.Tools().Add(browser.New(b, browser.Options{Timeout: cfg.Timeout}))
	return b, nil
}

// Capabilities is the server's allow-list.
func (b *Broker) Capabilities() []string { return b.caps }

// Bind runs start (which starts a turn of session sessionID and returns its id) and records
// principal as the owner of that turn, until Unbind or the next Bind of the session.
func (b *Broker) Bind(principal, sessionID string, start func() (turnID string, err error)) error {
	unlock := b.lockStart(sessionID)
	defer unlock()
	turnID, err := start()
	if err == nil {
		b.own(sessionID, turnID, principal)
	}
	return err
}

// Own records principal as the owner of a turn the caller has claimed and not started yet
// (engine.Prompt.Claim): no other turn of the session can start meanwhile, so no start lock
// is needed.
func (b *Broker) Own(principal, sessionID, turnID string) { b.own(sessionID, turnID, principal) }

func (b *Broker) own(sessionID, turnID, principal string) {
	b.mu.Lock()
	b.owners[sessionID] = turnOwner{turnID: turnID, principal: principal}
	b.mu.Unlock()
}

// BindGateway is Bind for a turn a gateway prompt.submit starts: the turn is owned by
// principal if submit started one (a prompt queued or steered into a running turn changes no
// owner), until it ends or the server stops.
func (b *Broker) BindGateway(principal string, sess *engine.Session, submit func() (engine.Admission, error)) (engine.Admission, error) {
	unlock := b.lockStart(sess.ID())
	defer unlock()
	adm, err := submit()
	if err != nil || adm.Status != engine.AdmitStarted || adm.TurnID == "" {
		return adm, err
	}
	b.own(sess.ID(), adm.TurnID, principal)
	go func() { // ends with the turn, or when the server shuts down
		_, _ = sess.Wait(b.ctx, adm.TurnID)
		b.Unbind(sess.ID(), adm.TurnID)
	}()
	return adm, nil
}

// Unbind forgets the owner of a turn that ended (a later turn's owner is left alone).
func (b *Broker) Unbind(sessionID, turnID string) {
	b.mu.Lock()
	if o, ok := b.owners[sessionID]; ok && o.turnID == turnID {
		delete(b.owners, sessionID)
	}
	b.mu.Unlock()
}

func (b *Broker) lockStart(id string) (unlock func()) {
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
func (b *Broker) owner(sessionID string) (string, bool) {
	b.lockStart(sessionID)() // wait out a start in progress
	b.mu.Lock()
	o, ok := b.owners[sessionID]
	b.mu.Unlock()
	if !ok {
		return "", false
	}
	sess, live := b.eng.Live(sessionID)
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
func (b *Broker) Do(ctx context.Context, sessionID string, cmd browser.Command) (browser.Reply, error) {
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

func (ctl *Controller) do(ctx context.Context, sessionID string, cmd browser.Command) (browser.Reply, error) {
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

func (ctl *Controller) send(v any) error {
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
func (ctl *Controller) detach(conn *websocket.Conn) {
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

// Register binds a new controller for caps (each in the server's allow-list) to principal,
// replacing (and disconnecting) a previous one: a principal has at most one controller.
func (b *Broker) Register(principal string, caps []string) (*Controller, error) {
	if len(caps) == 0 {
		return nil, &Refusal{Status: 400, Param: "capabilities", Code: "missing_capabilities", Message: "'capabilities' must list the browser actions this controller may perform (allowed: " + strings.Join(b.caps, ", ") + ")"}
	}
	var granted []string
	for i, a := range caps {
		if !slices.Contains(b.caps, a) {
			return nil, &Refusal{Status: 400, Param: fmt.Sprintf("capabilities[%d]", i), Code: "invalid_capability", Message: fmt.Sprintf("capability %q is not allowed on this server (allowed: %s)", a, strings.Join(b.caps, ", "))}
		}
		if !slices.Contains(granted, a) {
			granted = append(granted, a)
		}
	}
	ctl := &Controller{id: "bc_" + newHex(16), principal: principal, caps: granted, pending: map[string]chan browser.Reply{}, gone: make(chan struct{})}
	b.mu.Lock()
	old := b.ctls[principal]
	b.ctls[principal] = ctl
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
	return ctl, nil
}

// Claim returns principal's controller id for a connection: it must exist, belong to
// principal and not be connected already.
func (b *Broker) Claim(principal, id string) (*Controller, error) {
	b.mu.Lock()
	ctl := b.ctls[principal]
	b.mu.Unlock()
	// A controller of another principal is reported exactly like an unknown one.
	if id == "" || ctl == nil || ctl.id != id {
		return nil, &Refusal{Status: 404, Param: "controller_id", Code: "controller_not_found", Message: "no registered controller " + strconv.Quote(id) + " for this API key"}
	}
	ctl.mu.Lock()
	busy := ctl.conn != nil
	ctl.mu.Unlock()
	if busy {
		return nil, &Refusal{Status: 409, Code: "controller_connected", Message: "controller " + id + " is already connected", NoRetry: true}
	}
	return ctl, nil
}

// Status reports the controllers registered and connected, and the server's allow-list.
func (b *Broker) Status() map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	connected := 0
	for _, ctl := range b.ctls {
		ctl.mu.Lock()
		if ctl.conn != nil {
			connected++
		}
		ctl.mu.Unlock()
	}
	return map[string]any{"enabled": true, "controllers": len(b.ctls), "connected": connected, "capabilities": b.caps}
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

// Serve runs one connection of ctl (from Claim): it delivers results to waiting commands
// until the socket closes. A connection that lost a race with another one, or with a new
// registration, is closed at once.
func (b *Broker) Serve(ctl *Controller, conn *websocket.Conn) {
	ctl.mu.Lock()
	if ctl.conn != nil || ctl.replaced {
		ctl.mu.Unlock()
		_ = conn.Close()
		return
	}
	ctl.conn = conn
	ctl.mu.Unlock()
	defer ctl.detach(conn)
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

func newHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
