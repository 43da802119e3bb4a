package browserctl

import (
	"errors"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// Host is what browser control's routes take from the server that mounts them.
type Host struct {
	// Principal is the key digest of the request's principal: a controller belongs to it.
	Principal func(c *fiber.Ctx) string
	// Track counts a controller's connection among the server's WebSocket connections (its
	// shutdown closes them and waits for their handlers) until untrack is called.
	Track func(conn *websocket.Conn) (untrack func())
	// MaxFrame is the connection's message limit.
	MaxFrame int
}

// Mount mounts browser control's routes on r: POST /v1/browser-control/register binds a
// controller to the caller's principal, GET /v1/browser-control/ws connects it. With b nil
// (browser control off) both answer that it is disabled.
func Mount(r fiber.Router, b *Broker, h Host) {
	if b == nil {
		r.Post("/v1/browser-control/register", off)
		r.Get("/v1/browser-control/ws", off)
		return
	}
	r.Post("/v1/browser-control/register", b.register(h))
	r.Get("/v1/browser-control/ws", b.upgrade(h), websocket.New(func(conn *websocket.Conn) {
		ctl, _ := conn.Locals(localController).(*Controller)
		defer h.Track(conn)()
		conn.SetReadLimit(int64(h.MaxFrame))
		b.Serve(ctl, conn)
	}, websocket.Config{ReadBufferSize: 8 << 10, WriteBufferSize: 8 << 10}))
}

// Timeout bounds one browser action, controller round trip included (Config.Timeout, default
// 30s).
func (b *Broker) Timeout() time.Duration {
	if b.timeout > 0 {
		return b.timeout
	}
	return 30 * time.Second
}

// localController is the c.Locals key of the controller a connection claimed.
const localController = "hermes.controller"

// refused answers a broker's refusal in the API's error form.
func refused(err error) error {
	var r *Refusal
	if !errors.As(err, &r) {
		return err
	}
	return &wire.Error{Status: r.Status, Message: r.Message, Type: "invalid_request_error", Param: r.Param, Code: r.Code, NoRetry: r.NoRetry}
}

// off answers every browser-control route while the feature is disabled.
func off(*fiber.Ctx) error {
	return &wire.Error{Status: fiber.StatusNotFound, Message: "browser control is disabled on this server (enable browser_control in the configuration)", Type: "invalid_request_error", Code: "browser_control_disabled"}
}

// register binds a new controller to the caller's principal, replacing (and disconnecting) a
// previous one: a principal has at most one controller.
func (b *Broker) register(h Host) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var req struct {
			Capabilities []string `json:"capabilities"`
		}
		if err := wire.DecodeJSON(c.Body(), &req); err != nil {
			return err
		}
		p := h.Principal(c)
		ctl, err := b.Register(p, req.Capabilities)
		if err != nil {
			return refused(err)
		}
		return c.Status(fiber.StatusCreated).JSON(fiber.Map{
			"object":        "hermes.browser_control.controller",
			"controller_id": ctl.ID(),
			"principal":     p,
			"capabilities":  ctl.Capabilities(),
			"websocket":     fiber.Map{"method": "GET", "path": "/v1/browser-control/ws?controller_id=" + ctl.ID()},
			"timeout_ms":    b.Timeout().Milliseconds(),
		})
	}
}

// upgrade checks, before the upgrade, that the controller exists, belongs to the caller's
// principal and is not already connected.
func (b *Broker) upgrade(h Host) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if !websocket.IsWebSocketUpgrade(c) {
			return &wire.Error{Status: fiber.StatusUpgradeRequired, Message: "this endpoint takes a WebSocket upgrade", Type: "invalid_request_error", Code: "upgrade_required"}
		}
		ctl, err := b.Claim(h.Principal(c), c.Query("controller_id"))
		if err != nil {
			return refused(err)
		}
		c.Locals(localController, ctl)
		return c.Next()
	}
}
