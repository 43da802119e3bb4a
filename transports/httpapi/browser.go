package httpapi

import (
	"context"
	"fmt"

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

// broker is browser control on this server (package browserctl); nil when browser control is
// off.
type broker struct {
	b *browserctl.Broker
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
	s.browser = &broker{b: b}
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
	var b *browserctl.Broker
	if s.browser != nil {
		b = s.browser.b
	}
	browserctl.Mount(s.app, b, browserctl.Host{Principal: principal, Track: s.track, MaxFrame: s.opts.MaxFrame})
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
