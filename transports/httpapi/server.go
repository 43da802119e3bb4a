package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/dashboard"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
	"github.com/hermes-go/hermes/transports/httpapi/runsapi"
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
	// ExtraKeys are further API keys. Every key is its own principal: it sees, with 404 for
	// everything else, only the sessions, runs, stored responses, requests and browser
	// controller it created. APIKey is the local owner's key: it also sees the sessions of the
	// CLI, ACP and the stdio gateway, and sessions stored without an owner.
	ExtraKeys []NamedKey
	// AdminKey, when set, is a key that sees and acts on every principal's sessions, runs and
	// responses. The sessions it creates are its own.
	AdminKey string
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
	// Limits bound connections: timeouts, connection caps, WebSocket liveness (see Limits).
	Limits Limits
	// Metrics, when set, is served at /metrics (metrics.go) in the Prometheus text format.
	Metrics http.Handler
	// OnReject, when set, is told of work refused at admission: "turn_cap" (the concurrency
	// cap's 429), "max_conns" and "max_conns_per_ip" (a connection refused over a cap).
	OnReject func(reason string)
	// UI serves the dashboard (package dashboard) at /ui; off, /ui is a 404.
	UI bool
}

// Server is the fiber app and what it serves.
type Server struct {
	app   *fiber.App
	eng   *engine.Engine
	gw    *gateway.Server
	opts  Options
	keys  []keyEntry
	log   *slog.Logger
	start time.Time
	// ctx ends at Shutdown: it interrupts the turns of open HTTP requests, whose handlers
	// otherwise outlive the listener.
	ctx    context.Context
	cancel context.CancelFunc
	reqs   sync.WaitGroup // streaming bodies and waiting handlers
	cors   map[string]bool
	runs   *runsapi.Runs // /v1/runs
	slots  chan struct{} // concurrency cap; nil when uncapped
	// browser is the browser-control broker; nil when browser control is off.
	browser *broker
	catalog modelCatalog
	replays replayBook // remembered answers of chat completions and responses (replay.go)

	mu    sync.Mutex
	conns map[*websocket.Conn]struct{}
	wg    sync.WaitGroup // WebSocket connections

	sweepDone chan struct{} // closed when the idle-session sweeper has stopped

	lns listeners // what Serve listens on, wrapped in the connection limits

	streams atomic.Int64 // event-stream responses being written (Stats)
}

// ErrNoKey is returned by New without an API key.
var ErrNoKey = errors.New("httpapi: an API key is required")

// MinKeyLength is the shortest API key New accepts.
const MinKeyLength = 16

// NamedKey is an API key with the name messages and logs call it by (the key itself is never
// shown). An empty Name is given the key's position: extra_api_keys[0], [1], ...
type NamedKey struct {
	Name string
	Key  string
}

// keyEntry is a configured key and the principal it authenticates.
type keyEntry struct {
	secret []byte
	digest string           // Principal(key): runs and browser controllers are bound to it
	who    engine.Principal // sessions and stored responses are owned by who.ID
}

// loadKeys checks the configured keys (every one at least MinKeyLength characters, no key
// given twice, names unique) and returns them; an error names the key, never shows it.
func loadKeys(o Options) ([]keyEntry, error) {
	if len(o.APIKey) == 0 {
		return nil, ErrNoKey
	}
	named := []NamedKey{{Name: "api_key", Key: o.APIKey}}
	for i, k := range o.ExtraKeys {
		if k.Name == "" {
			k.Name = fmt.Sprintf("extra_api_keys[%d]", i)
		}
		named = append(named, k)
	}
	if o.AdminKey != "" {
		named = append(named, NamedKey{Name: "admin_api_key", Key: o.AdminKey})
	}
	var out []keyEntry
	names := map[string]bool{}
	for i, k := range named {
		if len(k.Key) < MinKeyLength {
			return nil, fmt.Errorf("httpapi: API key %q is shorter than %d characters; every key must have at least %d", k.Name, MinKeyLength, MinKeyLength)
		}
		if i > 0 && (len(k.Name) > 64 || wire.HasControl(k.Name)) {
			return nil, fmt.Errorf("httpapi: the name of extra_api_keys[%d] must be one line of at most 64 characters", i-1)
		}
		if names[k.Name] {
			return nil, fmt.Errorf("httpapi: two API keys are named %q", k.Name)
		}
		names[k.Name] = true
		for _, e := range out {
			if subtle.ConstantTimeCompare(e.secret, []byte(k.Key)) == 1 {
				return nil, fmt.Errorf("httpapi: API keys %q and %q are the same key", e.who.Name, k.Name)
			}
		}
		e := keyEntry{secret: []byte(k.Key), digest: Principal(k.Key), who: engine.Principal{ID: Principal(k.Key), Name: k.Name}}
		switch {
		case i == 0:
			e.who.ID = engine.LocalOwner.ID
		case o.AdminKey != "" && i == len(named)-1:
			e.who.Admin = true
		}
		out = append(out, e)
	}
	return out, nil
}

// New builds the app.
func New(eng *engine.Engine, gw *gateway.Server, opts Options) (*Server, error) {
	keys, err := loadKeys(opts)
	if err != nil {
		return nil, err
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
	s := &Server{eng: eng, gw: gw, opts: opts, keys: keys, log: opts.Logger, start: time.Now(), conns: map[*websocket.Conn]struct{}{}, cors: map[string]bool{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.opts.MaxConcurrent == 0 {
		s.opts.MaxConcurrent = 10
	}
	if s.opts.MaxConcurrent > 0 {
		s.slots = make(chan struct{}, s.opts.MaxConcurrent)
	}
	s.runs, err = runsapi.New(s.ctx, runsapi.Config{Engine: eng, Host: runsHost{s}, Log: s.log, KeepAlive: s.opts.KeepAlive, Slots: s.slots})
	if err != nil {
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
		Immutable: true,
		// Path parameters are ids: "/api/sessions/caf%C3%A9" names the session "café", as
		// the id it was created with in a JSON body.
		UnescapePath: true,
		ErrorHandler: s.errorHandler,
	})
	s.initLimits()
	if err := s.initBrowser(); err != nil {
		return nil, err
	}
	s.app.Use(s.common)
	s.app.Get("/health", s.health)
	s.app.Get("/v1/health", s.health) // where OpenAI-style clients look, relative to their base URL
	s.app.Get("/api/ws", s.wsUpgrade, websocket.New(s.serveWS, websocket.Config{ReadBufferSize: 8 << 10, WriteBufferSize: 8 << 10, Subprotocols: []string{dashboard.WSProtocol}}))
	s.uiRoutes()
	s.app.Use(s.auth)
	s.app.Get("/health/detailed", s.healthDetailed)
	s.routes()
	s.startSweeper()
	return s, nil
}

// App exposes the fiber app (tests, extra routes).
func (s *Server) App() *fiber.App { return s.app }

// Serve serves on ln until Shutdown, within the connection limits of Options.Limits. After
// Shutdown began (even one called before Serve got going) it closes ln and returns nil.
func (s *Server) Serve(ln net.Listener) error {
	l := newLimitListener(ln, s.opts.Limits, s.log)
	l.onReject = s.opts.OnReject
	if !s.lns.add(l) {
		return l.Close()
	}
	return s.app.Listener(l)
}

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
	// Stop accepting first, then close the connections that have no request to finish: one
	// that has not sent a byte would hold fasthttp's shutdown until it looks idle (5 s).
	// What is still open when ctx ends is closed.
	s.lns.close()
	s.lns.closeConns(fasthttp.StateNew, fasthttp.StateIdle)
	err := s.app.ShutdownWithContext(ctx)
	if err != nil {
		s.lns.closeConns()
	}
	s.wg.Wait()
	s.reqs.Wait()
	s.runs.Close() // after its workers, the runs this process left running are unknown
	<-s.sweepDone
	return err
}

// principalOf finds the key got among the configured keys, comparing every key in constant
// time, and returns its entry.
func (s *Server) principalOf(got string) (keyEntry, bool) {
	if len(got) == 0 {
		return keyEntry{}, false
	}
	match := -1
	for i, k := range s.keys {
		if subtle.ConstantTimeCompare([]byte(got), k.secret) == 1 {
			match = i
		}
	}
	if match < 0 {
		return keyEntry{}, false
	}
	return s.keys[match], true
}

// Principal is the identity of an API key: a digest, so the key itself never becomes a map
// key, a log field or part of a response.
func Principal(key string) string {
	h := sha256.Sum256([]byte("hermes principal\x00" + key))
	return "key_" + hex.EncodeToString(h[:8])
}

// principal is the key digest of the request's principal (set by auth): runs and browser
// controllers are bound to it.
func principal(c *fiber.Ctx) string {
	p, _ := c.Locals(localPrincipal).(string)
	return p
}

// who is the principal of the request (set by auth): sessions and stored responses are
// checked against it.
func who(c *fiber.Ctx) engine.Principal {
	p, _ := c.Locals(localWho).(engine.Principal)
	return p
}

// sees reports whether the request's principal may see and act on what owner owns.
func sees(c *fiber.Ctx, owner string) bool { return who(c).Sees(owner) }

const (
	localPrincipal = "hermes.principal"
	localWho       = "hermes.who"
)

// BearerToken is the token of an Authorization header of the Bearer scheme ("" for any
// other). The scheme's name is case-insensitive (RFC 9110 §11.1): "bearer <key>" is a bearer
// token too.
func BearerToken(h string) string {
	const scheme = "bearer "
	if len(h) > len(scheme) && strings.EqualFold(h[:len(scheme)], scheme) {
		return strings.TrimSpace(h[len(scheme):])
	}
	return ""
}

func (s *Server) auth(c *fiber.Ctx) error {
	p, ok := s.principalOf(BearerToken(c.Get(fiber.HeaderAuthorization)))
	if !ok {
		return writeError(c, &wire.Error{Status: fiber.StatusUnauthorized, Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key"})
	}
	c.Locals(localPrincipal, p.digest)
	c.Locals(localWho, p.who)
	return c.Next()
}
