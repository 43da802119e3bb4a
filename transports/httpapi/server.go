package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// Options configure the HTTP server.
type Options struct {
	APIKey   string // required: every route but /health needs "Authorization: Bearer <key>"
	Version  string
	MaxFrame int // WebSocket message limit (default jsonrpc.DefaultMaxFrame)
	Logger   *slog.Logger
}

// Server is the fiber app and what it serves.
type Server struct {
	app   *fiber.App
	eng   *engine.Engine
	gw    *gateway.Server
	opts  Options
	log   *slog.Logger
	start time.Time

	mu    sync.Mutex
	conns map[*websocket.Conn]struct{}
	wg    sync.WaitGroup // WebSocket connections
}

// ErrNoKey is returned by New without an API key.
var ErrNoKey = errors.New("httpapi: an API key is required")

// New builds the app.
func New(eng *engine.Engine, gw *gateway.Server, opts Options) (*Server, error) {
	if len(opts.APIKey) == 0 {
		return nil, ErrNoKey
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = jsonrpc.DefaultMaxFrame
	}
	s := &Server{eng: eng, gw: gw, opts: opts, log: opts.Logger, start: time.Now(), conns: map[*websocket.Conn]struct{}{}}
	s.app = fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             10 << 20,
		ErrorHandler:          s.errorHandler,
	})
	s.app.Get("/health", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok"})
	})
	s.app.Get("/api/ws", s.wsUpgrade, websocket.New(s.serveWS, websocket.Config{ReadBufferSize: 8 << 10, WriteBufferSize: 8 << 10}))
	s.app.Use(s.auth)
	s.app.Get("/health/detailed", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok", "version": opts.Version, "uptime_s": int(time.Since(s.start).Seconds()), "live_sessions": len(eng.LiveSessions())})
	})
	return s, nil
}

// App exposes the fiber app (tests, extra routes).
func (s *Server) App() *fiber.App { return s.app }

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.app.Listener(ln) }

// Shutdown stops accepting, closes WebSocket connections (fiber does not) and waits for them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	for c := range s.conns {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1001, "server shutting down"), time.Now().Add(time.Second))
		_ = c.Close()
	}
	s.mu.Unlock()
	err := s.app.ShutdownWithContext(ctx)
	s.wg.Wait()
	return err
}

// keyOK compares in constant time.
func (s *Server) keyOK(got string) bool {
	return len(got) > 0 && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.APIKey)) == 1
}

func bearer(h string) string {
	if v, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

func (s *Server) auth(c *fiber.Ctx) error {
	if !s.keyOK(bearer(c.Get(fiber.HeaderAuthorization))) {
		return openAIError(c, fiber.StatusUnauthorized, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
	}
	return c.Next()
}

// openAIError writes the OpenAI error envelope.
func openAIError(c *fiber.Ctx, status int, msg, typ, code string) error {
	var cd any
	if code != "" {
		cd = code
	}
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"message": msg, "type": typ, "param": nil, "code": cd}})
}

func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusRequestEntityTooLarge:
			return openAIError(c, fe.Code, "request body too large (limit 10 MB)", "invalid_request_error", "request_too_large")
		case fiber.StatusNotFound:
			return openAIError(c, fe.Code, "unknown route "+c.Method()+" "+c.Path(), "invalid_request_error", "not_found")
		}
		return openAIError(c, fe.Code, fe.Message, "invalid_request_error", "")
	}
	s.log.Error("handler failed", "path", c.Path(), "err", err)
	return openAIError(c, fiber.StatusInternalServerError, "internal error", "server_error", "")
}
