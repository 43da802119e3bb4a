package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/httpapi/browserctl"
)

// BrowserControl configures browser control (package browserctl): a browser extension registers
// as the controller of its API key's principal and connects a WebSocket; the agent's browser
// tool calls of turns that principal started are carried out by it, and by nobody else.
type BrowserControl = browserctl.Config

// Close codes of /v1/browser-control/ws.
const (
	CloseControllerReplaced = browserctl.CloseControllerReplaced // the principal registered a new controller
)

// controllers is what the server uses of the browser browserctl.
type controllers interface {
	Bind(principal, sessionID string, start func() (turnID string, err error)) error
	Own(principal, sessionID, turnID string)
	Unbind(sessionID, turnID string)
	Register(principal string, caps []string) (*browserctl.Controller, error)
	Claim(principal, id string) (*browserctl.Controller, error)
	Serve(ctl *browserctl.Controller, conn *websocket.Conn)
	Status() map[string]any
}

// broker is browser control on this server (the broker of package browserctl behind the
// interface the server uses); nil when browser control is off.
type broker struct {
	b    controllers
	caps []string // the server's allow-list
}

func (s *Server) initBrowser() error {
	bc := s.opts.BrowserControl
	if !bc.Enabled {
		return nil
	}
	b, err := browserctl.New(s.ctx, s.eng, bc)
	if err != nil {
		return fmt.Errorf("httpapi: browser control: %w", err)
	}
	s.browser = &broker{b: b, caps: b.Capabilities()}
	if s.gw != nil {
		// A turn a prompt.submit on /api/ws starts is owned by the connection's principal,
		// like one an API request starts, until it ends.
		s.gw.SetTurnHook(func(p engine.Principal, sess *engine.Session, submit func() (engine.Admission, error)) (engine.Admission, error) {
			digest, ok := s.digestOf(p)
			if !ok {
				return submit()
			}
			return b.BindGateway(digest, sess, submit)
		})
	}
	return nil
}

// turnCtx is the context a handler starts a turn with: the server's (ended by Shutdown),
// carrying the request's principal for the browser browserctl.
func (s *Server) turnCtx(c *fiber.Ctx) context.Context {
	return withTrace(withPrincipal(s.ctx, principal(c)), requestTrace(c))
}

// withPrincipal is ctx carrying principal p, for a turn started after its request returned
// (a queued run): startTurn, or broker.bind, then records p as the turn's owner.
func withPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

type principalKey struct{}

// own records the principal of ctx as the owner of a claimed turn that has not started
// (engine.Prompt.Claim). Without browser control, or without a principal, it does nothing.
func (bc *broker) own(ctx context.Context, sessionID, turnID string) {
	if p, _ := ctx.Value(principalKey{}).(string); bc != nil && p != "" && turnID != "" {
		bc.b.Own(p, sessionID, turnID)
	}
}

// bind runs start (which submits a turn) and records the principal of ctx as the owner of the
// turn it started. Without browser control, or without a principal, it only runs start.
func (bc *broker) bind(ctx context.Context, sess *engine.Session, start func() (*turnRun, error)) (*turnRun, error) {
	p, _ := ctx.Value(principalKey{}).(string)
	if bc == nil || p == "" {
		return start()
	}
	var r *turnRun
	err := bc.b.Bind(p, sess.ID(), func() (string, error) {
		var err error
		if r, err = start(); err != nil {
			return "", err
		}
		return r.turnID, nil
	})
	return r, err
}

// unbind forgets the owner of a turn that ended (a later turn's owner is left alone).
func (bc *broker) unbind(sessionID, turnID string) {
	if bc != nil {
		bc.b.Unbind(sessionID, turnID)
	}
}

// refused answers a broker's refusal in the API's error form.
func refused(err error) error {
	var r *browserctl.Refusal
	if !errors.As(err, &r) {
		return err
	}
	return &apiError{Status: r.Status, Message: r.Message, Type: "invalid_request_error", Param: r.Param, Code: r.Code, NoRetry: r.NoRetry}
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
	p := principal(c)
	ctl, err := s.browser.b.Register(p, req.Capabilities)
	if err != nil {
		return refused(err)
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{
		"object":        "hermes.browser_control.controller",
		"controller_id": ctl.ID(),
		"principal":     p,
		"capabilities":  ctl.Capabilities(),
		"websocket":     fiber.Map{"method": "GET", "path": "/v1/browser-control/ws?controller_id=" + ctl.ID()},
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
	ctl, err := s.browser.b.Claim(principal(c), c.Query("controller_id"))
	if err != nil {
		return refused(err)
	}
	c.Locals("hermes.controller", ctl)
	return c.Next()
}

// serveBrowser runs one controller connection, which Shutdown closes.
func (s *Server) serveBrowser(conn *websocket.Conn) {
	ctl, _ := conn.Locals("hermes.controller").(*browserctl.Controller)
	defer s.track(conn)()
	conn.SetReadLimit(int64(s.opts.MaxFrame))
	s.browser.b.Serve(ctl, conn)
}

// track counts conn among the server's WebSocket connections (Shutdown closes them and waits
// for their handlers) until the returned func is called.
func (s *Server) track(conn *websocket.Conn) (untrack func()) {
	s.mu.Lock()
	s.conns[conn] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		s.wg.Done()
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
