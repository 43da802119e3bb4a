package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// Close codes of /api/ws refusals.
const (
	CloseBadCredential = 4401
)

// wsUpgrade lets only WebSocket upgrades through and notes the credential; the check happens
// after the upgrade so a refusal can carry close code 4401.
func (s *Server) wsUpgrade(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return fiber.ErrUpgradeRequired
	}
	tok := c.Query("token")
	if tok == "" {
		tok = BearerToken(c.Get(fiber.HeaderAuthorization))
	}
	if tok == "" {
		// A browser cannot set headers on a WebSocket: the dashboard offers the key as a
		// subprotocol, which stays out of URLs and access logs.
		tok = wsProtocolKey(c.Get(fiber.HeaderSecWebSocketProtocol))
	}
	p, ok := s.principalOf(tok)
	c.Locals("authorized", ok)
	c.Locals(localWho, p.who)
	return c.Next()
}

func (s *Server) serveWS(c *websocket.Conn) {
	if ok, _ := c.Locals("authorized").(bool); !ok {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseBadCredential, "bad credential"), time.Now().Add(time.Second))
		_ = c.Close()
		return
	}
	defer s.track(c)()
	c.SetReadLimit(int64(s.opts.MaxFrame))
	alive, stop := s.wsLiveness(c)
	defer stop()
	f := &wsFramer{c: c, alive: alive}
	// The connection acts for the key's principal: it sees only that principal's sessions.
	p, _ := c.Locals(localWho).(engine.Principal)
	if err := s.gw.ServeAs(context.Background(), p, f, true, nil); err != nil && !errors.Is(err, jsonrpc.ErrClosed) {
		s.log.Debug("websocket ended", "err", err)
	}
}

// wsFramer carries one JSON-RPC message per WebSocket text frame.
type wsFramer struct {
	c     *websocket.Conn
	alive func() // a frame arrived: the peer is alive (extends the read deadline)
	mu    sync.Mutex
	once  sync.Once
}

func (f *wsFramer) Read(context.Context) ([]byte, error) {
	for {
		mt, msg, err := f.c.ReadMessage()
		if err != nil {
			return nil, err // over the read limit the socket is closed with 1009
		}
		if f.alive != nil {
			f.alive()
		}
		if mt != websocket.TextMessage && mt != websocket.BinaryMessage {
			continue
		}
		if len(msg) == 0 {
			continue
		}
		return msg, nil
	}
}

func (f *wsFramer) Write(_ context.Context, msg []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return f.c.WriteMessage(websocket.TextMessage, msg)
}

func (f *wsFramer) Close() error {
	var err error
	f.once.Do(func() { err = f.c.Close() })
	return err
}
