package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
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
	APIKey   string // required: every route but /health and /v1/health needs "Authorization: Bearer <key>"
	Version  string
	MaxFrame int // WebSocket message limit (default jsonrpc.DefaultMaxFrame)
	Logger   *slog.Logger
	// CORSOrigins lists the browser origins allowed to call the API ("*" allows any). A
	// request carrying an Origin not in the list is refused with 403; requests without an
	// Origin (server to server) are unaffected. Empty: no browser origin is allowed.
	CORSOrigins []string
	// Models lists the model names /v1/models advertises and chat requests may pick; the
	// engine's default model is always first. Nil: the default model only.
	Models func() []string
	// KeepAlive is how long an event stream may stay silent before a comment line is sent
	// (default 15s). The write is also how a stream notices that its client went away.
	KeepAlive time.Duration
	// MaxConcurrent caps the agent turns this server runs at once (chat, responses and runs
	// together); beyond it a new request gets 429 with Retry-After. 0 means 10; negative
	// means no cap.
	MaxConcurrent int
	// ExtraKeys are further API keys. Every key is its own principal (see Principal):
	// browser-control controllers are bound to the principal of the key that registered them.
	ExtraKeys []string
	// BrowserControl configures browser control (off by default).
	BrowserControl BrowserControl
	// Providers describes the configured model providers for /api/model/options; nil derives
	// the list from the engine.
	Providers func() []ProviderInfo
	// Status adds subsystem reports (e.g. "mcp") to /health/detailed.
	Status func(ctx context.Context) map[string]any
	// SessionIdleRelease is how long a session created through this API may go unused (no
	// turn, no queued run, no open request, no stream following it) before the engine lets go
	// of it; the next request naming it loads it again from the store. It bounds the memory of
	// a long-running server. 0 means DefaultSessionIdleRelease; negative never releases.
	// Keep it above the WebSocket gateway's orphan grace (20s by default): a session a
	// WebSocket client left is the gateway's until that grace ends.
	SessionIdleRelease time.Duration
}

// Server is the fiber app and what it serves.
type Server struct {
	app   *fiber.App
	eng   *engine.Engine
	gw    *gateway.Server
	opts  Options
	log   *slog.Logger
	start time.Time
	// ctx ends at Shutdown: it interrupts the turns of open HTTP requests, whose handlers
	// otherwise outlive the listener.
	ctx    context.Context
	cancel context.CancelFunc
	reqs   sync.WaitGroup // streaming bodies and waiting handlers
	cors   map[string]bool
	runs   runs
	slots  chan struct{} // concurrency cap; nil when uncapped
	// browser is the browser-control broker; nil when browser control is off.
	browser *broker
	catalog modelCatalog

	mu    sync.Mutex
	conns map[*websocket.Conn]struct{}
	wg    sync.WaitGroup // WebSocket connections

	sweepDone chan struct{} // closed when the idle-session sweeper has stopped
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
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = jsonrpc.DefaultMaxFrame
	}
	if opts.SessionIdleRelease == 0 {
		opts.SessionIdleRelease = DefaultSessionIdleRelease
	}
	s := &Server{eng: eng, gw: gw, opts: opts, log: opts.Logger, start: time.Now(), conns: map[*websocket.Conn]struct{}{}, cors: map[string]bool{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.opts.MaxConcurrent == 0 {
		s.opts.MaxConcurrent = 10
	}
	if s.opts.MaxConcurrent > 0 {
		s.slots = make(chan struct{}, s.opts.MaxConcurrent)
	}
	if err := s.initRuns(); err != nil {
		s.cancel()
		return nil, err
	}
	for _, o := range opts.CORSOrigins {
		s.cors[strings.TrimRight(strings.TrimSpace(o), "/")] = true
	}
	s.app = fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             10 << 20,
		// Header, parameter and body strings outlive the request here (session ids become
		// map keys, session keys go into metadata, idempotency keys are remembered); fiber
		// would otherwise hand out views of buffers it reuses.
		Immutable:    true,
		ErrorHandler: s.errorHandler,
	})
	if err := s.initBrowser(); err != nil {
		return nil, err
	}
	s.app.Use(s.common)
	s.app.Get("/health", s.health)
	s.app.Get("/v1/health", s.health) // where OpenAI-style clients look, relative to their base URL
	s.app.Get("/api/ws", s.wsUpgrade, websocket.New(s.serveWS, websocket.Config{ReadBufferSize: 8 << 10, WriteBufferSize: 8 << 10}))
	s.app.Use(s.auth)
	s.app.Get("/health/detailed", s.healthDetailed)
	s.routes()
	s.startSweeper()
	return s, nil
}

// App exposes the fiber app (tests, extra routes).
func (s *Server) App() *fiber.App { return s.app }

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.app.Listener(ln) }

// Shutdown stops accepting, closes WebSocket connections (fiber does not) and waits for them,
// and stops the idle-session sweeper.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1001, "server shutting down"), time.Now().Add(time.Second))
		_ = c.Close()
	}
	s.mu.Unlock()
	err := s.app.ShutdownWithContext(ctx)
	s.wg.Wait()
	s.reqs.Wait()
	<-s.sweepDone
	return err
}

// keyOK compares in constant time.
func (s *Server) keyOK(got string) bool {
	_, ok := s.principalOf(got)
	return ok
}

// principalOf finds the key got among the configured keys, comparing every key in constant
// time, and returns its principal.
func (s *Server) principalOf(got string) (string, bool) {
	if len(got) == 0 {
		return "", false
	}
	match := ""
	for _, k := range append([]string{s.opts.APIKey}, s.opts.ExtraKeys...) {
		if len(k) > 0 && subtle.ConstantTimeCompare([]byte(got), []byte(k)) == 1 {
			match = k
		}
	}
	if match == "" {
		return "", false
	}
	return Principal(match), true
}

// Principal is the identity of an API key: a digest, so the key itself never becomes a map
// key, a log field or part of a response.
func Principal(key string) string {
	h := sha256.Sum256([]byte("hermes principal\x00" + key))
	return "key_" + hex.EncodeToString(h[:8])
}

// principal is the principal of the request (set by auth).
func principal(c *fiber.Ctx) string {
	p, _ := c.Locals(localPrincipal).(string)
	return p
}

const localPrincipal = "hermes.principal"

func bearer(h string) string {
	if v, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

func (s *Server) auth(c *fiber.Ctx) error {
	p, ok := s.principalOf(bearer(c.Get(fiber.HeaderAuthorization)))
	if !ok {
		return writeError(c, &apiError{Status: fiber.StatusUnauthorized, Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key"})
	}
	c.Locals(localPrincipal, p)
	return c.Next()
}
