package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/modelopts"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/internal/metrics"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// assemble opens the store and builds the engine for a long-running surface. Diagnostics go to
// the logger on stderr; stdout stays free for protocol frames.
func assemble(cfg *config.Config, logger *slog.Logger) (*assembled, error) {
	return assembleWith(cfg, runtimeOpts{logger: logger})
}

// assembleWith is assemble with more runtime options (serve's metrics).
func assembleWith(cfg *config.Config, o runtimeOpts) (*assembled, error) {
	st, err := openStoreLog(cfg, o.logger)
	if err != nil {
		return nil, err
	}
	a, err := build(cfg, st, o)
	if err != nil {
		st.Close()
		return nil, err
	}
	return a, nil
}

// gatewayOptions wires the gateway to the assembled engine.
func gatewayOptions(cfg *config.Config, a *assembled, logger *slog.Logger) gateway.Options {
	pickerCache := &modelopts.Cache{}
	return gateway.Options{
		Version: version,
		// A provider's models list in config.yaml is the only fixed list session.create holds
		// names to; otherwise the engine's model catalogue decides (it refuses only names
		// known to belong to another provider).
		Models: func(provider string) []string { return cfg.Providers[provider].Models },
		ModelOptions: func(ctx context.Context, refresh bool) map[string]any {
			return modelopts.Build(ctx, a.eng, pickerCache, serveProviders(cfg, a.eng), advertisedModels(cfg, a.eng), refresh)
		},
		BusyMode:    a.busy.Mode,
		SetBusyMode: a.busy.Set,
		CLIAllow:    []string{"version", "sessions", "config"},
		CLI:         runSelf,
		Home:        cfg.Home,
		ReloadEnv:   func() ([]string, error) { return loadDotEnv(filepath.Join(cfg.Home, ".env")) },
		ReloadMCP:   func(ctx context.Context) (any, error) { return a.mcp.Reload(ctx), nil },
		MCPStatus: func() any {
			if st := a.mcp.Status(); len(st) > 0 {
				return st
			}
			return nil
		},
		Logger: logger,
	}
}

// runSelf runs this binary with argv (cli.exec).
func runSelf(ctx context.Context, argv []string) (string, int, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", 0, err
	}
	cmd := exec.CommandContext(ctx, exe, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	// The commands redact their own output; this is the second line of defence for a client
	// that may be remote.
	text := redact.String(out.String())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return text, ee.ExitCode(), nil
	}
	return text, 0, err
}

func runGateway(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(io.err)
	transcript := fs.String("transcript", "", "append every frame (in and out) to this file, for debugging")
	if err := fs.Parse(args); err != nil || !noArgs(fs, io) {
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	logger := newLogger(io.err, slog.LevelWarn)
	var onFrame func(string, []byte)
	if *transcript != "" {
		tf, err := os.OpenFile(*transcript, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fail(io, err)
		}
		defer tf.Close()
		var mu sync.Mutex
		onFrame = func(dir string, frame []byte) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(tf, "%s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), dir, frame)
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := jsonrpc.NewLineFramer(io.in, io.out, nil, 0)
	// gateway.ready goes out before the store is opened; requests wait for it.
	var mu sync.Mutex
	var a *assembled
	var gw *gateway.Server
	served := make(chan error, 1)
	go func() {
		served <- gateway.ServeLazy(ctx, f, onFrame, func(epoch string) (*gateway.Server, error) {
			mu.Lock()
			defer mu.Unlock()
			var err error
			if a, err = assemble(cfg, logger); err != nil {
				return nil, err
			}
			opts := gatewayOptions(cfg, a, logger)
			opts.Epoch = epoch
			gw = gateway.New(a.eng, opts)
			return gw, nil
		})
	}()
	select {
	case err = <-served:
	case <-ctx.Done():
		// A signal: the connection's requests are cancelled and answered. Its line reader
		// blocks on stdin, which a host may keep open and which cannot be interrupted; the
		// process does not wait for it past a moment.
		select {
		case err = <-served:
		case <-time.After(signalGrace):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if gw != nil {
		gw.Close()
	}
	if a != nil {
		a.Close()
	}
	if err != nil {
		return fail(io, err)
	}
	return 0
}

// signalGrace is how long hermes gateway waits after SIGINT or SIGTERM for its connection to
// end by itself before it exits anyway.
const signalGrace = 3 * time.Second

// keyFile is where hermes serve keeps the API key it created, used while none is configured.
func keyFile(cfg *config.Config) string { return filepath.Join(cfg.Home, "api_key") }

// storedKey is the key in keyFile, when it holds one long enough to be served.
func storedKey(cfg *config.Config) (string, bool) {
	b, err := os.ReadFile(keyFile(cfg))
	if k := strings.TrimSpace(string(b)); err == nil && len(k) >= httpapi.MinKeyLength {
		return k, true
	}
	return "", false
}

// serverKey returns the configured API key, or creates one under HERMES_HOME on first start.
func serverKey(cfg *config.Config, io stdio) (string, error) {
	if cfg.Server.APIKey != "" {
		return cfg.Server.APIKey, nil
	}
	path := keyFile(cfg)
	if k, ok := storedKey(cfg); ok {
		redact.Register(k)
		return k, nil
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	key := "hk-" + hex.EncodeToString(raw[:])
	redact.Register(key)
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", err
	}
	fmt.Fprintf(io.err, "hermes serve: created an API key in %s (send it as: Authorization: Bearer <key>)\n", path)
	return key, nil
}

// extraKeys converts server.extra_api_keys; an entry without a name is named by its position.
func extraKeys(in []config.ExtraKey) []httpapi.NamedKey {
	out := make([]httpapi.NamedKey, 0, len(in))
	for _, k := range in {
		out = append(out, httpapi.NamedKey{Name: k.Name, Key: k.Key})
	}
	return out
}

// serveProviders describes the engine's providers for /api/model/options; a provider that is
// not built in is a saved custom endpoint, probed for its model list.
func serveProviders(cfg *config.Config, eng *engine.Engine) []httpapi.ProviderInfo {
	var out []httpapi.ProviderInfo
	for _, name := range eng.Providers() {
		p := cfg.Providers[name]
		out = append(out, httpapi.ProviderInfo{
			Name: name, Type: p.Type, BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers,
			Models: p.Models, Custom: p.Type == "openai" && !config.BuiltinProvider(name),
		})
	}
	return out
}

// splitList splits a comma-separated setting, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// warnKeys logs what hermes doctor says of the configured API keys when it is not ok (a
// placeholder, a weak key): serve starts with them, as it always did, but says so where its
// operator looks.
func warnKeys(logger *slog.Logger, cfg *config.Config) {
	var rep doctorReport
	checkKeys(&rep, cfg)
	for _, c := range rep.Checks {
		if c.Status != statusOK {
			logger.Warn("API key "+c.Name+": "+c.Detail, "fix", c.Fix)
		}
	}
}

func runServe(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.err)
	addr := fs.String("addr", "", "listen address (default server.addr, 127.0.0.1:8642)")
	browserControl := fs.Bool("browser-control", false, "enable browser control (a registered browser extension carries out the agent's browser tool calls)")
	metricsAddr := fs.String("metrics-addr", "", "also serve /metrics on this address (default server.metrics_addr; metrics are always on the API's address)")
	ui := fs.Bool("ui", false, "serve the dashboard at /ui (also server.ui: true)")
	if err := fs.Parse(args); err != nil || !noArgs(fs, io) {
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	if *addr != "" {
		cfg.Server.Addr = *addr
	}
	if *browserControl {
		cfg.BrowserControl.Enabled = true
	}
	if *metricsAddr != "" {
		cfg.Server.MetricsAddr = *metricsAddr
	}
	if *ui {
		cfg.Server.UI = true
	}
	key, err := serverKey(cfg, io)
	if err != nil {
		return fail(io, err)
	}
	if len(key) < 16 {
		from := "server.api_key in config.yaml"
		for _, v := range []string{"HERMES_API_KEY", "API_SERVER_KEY"} {
			if os.Getenv(v) != "" {
				from = v
				break
			}
		}
		return fail(io, fmt.Errorf("the API key must be at least 16 characters (%s)", from))
	}
	logger := newLogger(io.err, slog.LevelInfo)
	warnKeys(logger, cfg)
	m := metrics.New()
	a, err := assembleWith(cfg, runtimeOpts{logger: logger, metrics: m, remote: true})
	if err != nil {
		return fail(io, err)
	}
	defer a.Close()
	gw := gateway.New(a.eng, gatewayOptions(cfg, a, logger))
	defer gw.Close()
	srv, err := httpapi.New(a.eng, gw, httpapi.Options{
		APIKey: key, Version: version, Logger: logger,
		CORSOrigins:        splitList(os.Getenv("HERMES_CORS_ORIGINS")),
		Models:             func() []string { return advertisedModels(cfg, a.eng) },
		ExtraKeys:          extraKeys(cfg.Server.ExtraKeys),
		AdminKey:           cfg.Server.AdminKey,
		MaxConcurrent:      cfg.Server.MaxConcurrent,
		SessionIdleRelease: time.Duration(cfg.Server.SessionIdleRelease),
		Limits:             serveLimits(cfg, logger),
		Metrics:            m.Handler(),
		OnReject:           m.Reject,
		UI:                 cfg.Server.UI,
		BrowserControl: httpapi.BrowserControl{
			Enabled: cfg.BrowserControl.Enabled, Capabilities: cfg.BrowserControl.Capabilities, Timeout: time.Duration(cfg.BrowserControl.Timeout),
		},
		Providers: func() []httpapi.ProviderInfo { return serveProviders(cfg, a.eng) },
		Status: func(context.Context) map[string]any {
			return map[string]any{"mcp": map[string]any{"servers": a.mcp.Status()}}
		},
	})
	if err != nil {
		return fail(io, err)
	}
	watchServer(m, srv)
	ln, err := net.Listen("tcp", cfg.Server.Addr)
	if err != nil {
		return fail(io, err)
	}
	stopMetrics, err := serveMetrics(cfg.Server.MetricsAddr, cfg.Server.MetricsKey, m.Handler(), io)
	if err != nil {
		ln.Close()
		return fail(io, err)
	}
	defer stopMetrics()
	// Catch the signals before announcing the address: a SIGTERM right after it must shut
	// down cleanly, not kill the process.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(io.err, "hermes serve: listening on http://%s (OpenAI-compatible API under /v1, WebSocket gateway at /api/ws)\n", ln.Addr())
	if cfg.Server.UI {
		fmt.Fprintf(io.err, "hermes serve: dashboard at http://%s/ui (log in with an API key)\n", ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fail(io, err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: no new connections; waiting up to 10s for the open ones")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(sctx); err != nil {
		return fail(io, err)
	}
	logger.Info("stopped", "after", time.Since(start).Round(time.Millisecond).String())
	return 0
}

// serveLimits raises the open-file limit as far as it goes and turns the server section of
// the configuration into connection limits. Unset, the connection cap is the default but
// never more than the open-file limit less 1024 descriptors (the store, logs, tools and MCP
// servers need theirs): over the cap a connection gets a clean 503, never EMFILE.
func serveLimits(cfg *config.Config, logger *slog.Logger) httpapi.Limits {
	s := cfg.Server
	l := httpapi.Limits{
		ReadHeaderTimeout: time.Duration(s.ReadHeaderTimeout),
		ReadTimeout:       time.Duration(s.ReadTimeout),
		WriteTimeout:      time.Duration(s.WriteTimeout),
		IdleTimeout:       time.Duration(s.IdleTimeout),
		MaxConns:          s.MaxConns,
		MaxConnsPerIP:     s.MaxConnsPerIP,
		WSPingInterval:    time.Duration(s.WSPingInterval),
		WSPongTimeout:     time.Duration(s.WSPongTimeout),
	}
	soft, err := raiseOpenFiles()
	if err != nil {
		logger.Warn("could not raise the open-file limit", "err", err, "limit", soft)
	}
	if l.MaxConns == 0 && soft > 0 {
		room := int(min(soft, 1<<30)) - 1024
		if soft < 2048 {
			room = int(soft) / 2
		}
		l.MaxConns = min(httpapi.DefaultMaxConns, max(room, 1))
	}
	return l
}
