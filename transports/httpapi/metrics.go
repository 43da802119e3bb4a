package httpapi

import (
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// metricsRoutes serves Options.Metrics at /metrics, behind the API key like every route. The
// figures are server-wide (every principal's turns, tools and costs), so, as with
// /health/detailed, only the local owner's key and the admin key read them; an extra key
// gets 403.
func (s *Server) metricsRoutes() {
	if s.opts.Metrics == nil {
		return
	}
	h := adaptor.HTTPHandler(s.opts.Metrics)
	s.app.Get("/metrics", func(c *fiber.Ctx) error {
		if w := who(c); w.ID != engine.LocalOwner.ID && !w.Admin {
			return writeError(c, &wire.Error{Status: fiber.StatusForbidden, Message: "metrics are server-wide: use the server's API key or the admin key", Type: "invalid_request_error", Code: "permission_denied"})
		}
		return h(c)
	})
}

// Stats are the server's open connections and streams at one moment.
type Stats struct {
	Conns      int // TCP connections on the listeners Serve was given (WebSocket ones included)
	WebSockets int // /api/ws connections
	Streams    int // server-sent event responses being written
}

// Stats counts the open connections and streams now.
func (s *Server) Stats() Stats {
	var st Stats
	s.lns.mu.Lock()
	list := s.lns.list
	s.lns.mu.Unlock()
	for _, l := range list {
		l.mu.Lock()
		st.Conns += len(l.conns)
		l.mu.Unlock()
	}
	s.mu.Lock()
	st.WebSockets = len(s.conns)
	s.mu.Unlock()
	st.Streams = int(s.streams.Load())
	return st
}

// streaming counts an event stream until the returned function is called.
func (s *Server) streaming() func() {
	s.streams.Add(1)
	return func() { s.streams.Add(-1) }
}

// rejected reports work refused at admission to Options.OnReject.
func (s *Server) rejected(reason string) {
	if s.opts.OnReject != nil {
		s.opts.OnReject(reason)
	}
}
