package httpapi

import (
	"encoding/base64"
	"net"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/transports/dashboard"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// uiRoutes mounts the dashboard at /ui (Options.UI), before authentication: a browser loads
// the page and its modules without a key, and the page then sends the key on every API call.
// With the dashboard off, /ui is a 404 like any unknown path.
func (s *Server) uiRoutes() {
	serve := func(c *fiber.Ctx) error {
		if !s.opts.UI {
			return &wire.Error{Status: fiber.StatusNotFound, Message: "the dashboard is not enabled (hermes serve --ui, or server.ui: true)", Type: "invalid_request_error", Code: "not_found"}
		}
		body, ct, ok := dashboard.File(c.Params("*"))
		if !ok {
			return &wire.Error{Status: fiber.StatusNotFound, Message: "no such dashboard file", Type: "invalid_request_error", Code: "not_found"}
		}
		h := &c.Response().Header
		h.Set("Content-Security-Policy", dashboard.CSP)
		h.Set("Cache-Control", "no-cache")
		c.Set(fiber.HeaderContentType, ct)
		return c.Send(body)
	}
	s.app.Get("/ui", serve)
	s.app.Get("/ui/*", serve)
}

// sameOrigin reports whether the request's Origin is the server's own (the dashboard's
// requests): a browser sends Origin on its same-origin POSTs and WebSocket handshakes, and
// those are not cross-origin requests for CORS to refuse. Only with the dashboard on, and only
// for a Host that is an IP address or localhost: a page of another site whose name was made to
// resolve to this server (DNS rebinding) sends its own name as Host and as Origin, and must
// meet the CORS check like any other origin. A dashboard served under a name has its origin
// listed in HERMES_CORS_ORIGINS.
func (s *Server) sameOrigin(c *fiber.Ctx, origin string) bool {
	if !s.opts.UI {
		return false
	}
	host := string(c.Request().Host())
	return host != "" && addressHost(host) && (origin == "http://"+host || origin == "https://"+host)
}

// addressHost reports whether a Host header names the server by address (an IP literal) or
// as localhost, names no other site can take over.
func addressHost(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	_, err = netip.ParseAddr(h)
	return err == nil
}

// wsProtocolKey returns the API key a browser sent as a subprotocol of /api/ws
// (dashboard.KeyProtocolPrefix + base64url of the key), or "".
func wsProtocolKey(header string) string {
	for _, p := range strings.Split(header, ",") {
		enc, ok := strings.CutPrefix(strings.TrimSpace(p), dashboard.KeyProtocolPrefix)
		if !ok {
			continue
		}
		key, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			return ""
		}
		return string(key)
	}
	return ""
}
