package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
	"github.com/hermes-go/hermes/transports/mcpserver"
)

func runMCP(ctx context.Context, args []string, io stdio) int {
	if len(args) == 1 && args[0] == "status" {
		return mcpStatus(ctx, io)
	}
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(io.err, "usage: hermes mcp serve [--http ADDR] | hermes mcp status")
		return 2
	}
	fs := flag.NewFlagSet("mcp serve", flag.ContinueOnError)
	fs.SetOutput(io.err)
	httpAddr := fs.String("http", "", "serve streamable HTTP on ADDR (e.g. 127.0.0.1:8765) instead of stdio")
	if err := fs.Parse(args[1:]); err != nil || !noArgs(fs, io) {
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	// On stdio, stdout carries protocol frames only; every diagnostic goes to stderr.
	logger := newLogger(io.err, slog.LevelWarn)
	a, err := assemble(cfg, logger)
	if err != nil {
		return fail(io, err)
	}
	defer a.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := mcpserver.New(a.eng, mcpserver.Options{Version: version, Logger: logger})
	if *httpAddr == "" {
		if err := srv.ServeStdio(ctx, io.in, io.out); err != nil {
			return fail(io, err)
		}
		return 0
	}
	return serveMCPHTTP(ctx, *httpAddr, srv, io)
}

func serveMCPHTTP(ctx context.Context, addr string, srv *mcpserver.Server, io stdio) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail(io, err)
	}
	hs := &http.Server{Handler: srv.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(io.err, "hermes mcp: streamable HTTP on http://%s/mcp\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = hs.Shutdown(sctx)
		cancel()
		<-done
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(io, err)
	}
	return 0
}

// addMCPTools connects the configured MCP servers and adds their tools to reg. Servers start
// here, not on first use, because the model must see their tools from the first turn; one that
// fails is logged and left out. It returns nil when no server is configured.
func addMCPTools(cfg *config.Config, reg *tool.Registry, logger *slog.Logger) *mcpTools {
	mt := &mcpTools{m: newMCPManager(cfg, logger), reg: reg, log: logger, names: map[string]bool{}}
	if len(cfg.MCP.Servers) > 0 {
		mt.sync(mt.m.Tools(context.Background()))
	}
	return mt
}

// mcpTools is the MCP manager of a process and the registry entries its servers contributed,
// so a reload can add the tools of servers that appeared and drop those of servers that went:
// the next model request of every session sees the new set.
type mcpTools struct {
	m   *mcptool.Manager
	reg *tool.Registry
	log *slog.Logger

	reload sync.Mutex // one reload at a time, so the registry ends up matching the last one
	mu     sync.Mutex
	names  map[string]bool // registry names that came from MCP servers
}

// sync makes the registry's MCP entries exactly tools; a name a built-in tool holds is
// skipped.
func (mt *mcpTools) sync(tools []tool.Tool) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	fresh := make(map[string]tool.Tool, len(tools))
	for _, t := range tools {
		fresh[t.Spec().Name] = t
	}
	for name := range mt.names {
		if fresh[name] == nil {
			mt.reg.Remove(name)
			delete(mt.names, name)
		}
	}
	for name, t := range fresh {
		if _, err := mt.reg.Get(name); err == nil && !mt.names[name] {
			mt.log.Warn("mcp tool skipped: the name is taken", "tool", name)
			continue
		}
		mt.reg.Add(t)
		mt.names[name] = true
	}
}

// Reload re-reads the configuration, restarts the servers and updates the tool registry.
func (mt *mcpTools) Reload(ctx context.Context) []mcptool.Status {
	mt.reload.Lock()
	defer mt.reload.Unlock()
	mt.m.Reload(ctx)
	mt.sync(mt.m.Tools(ctx))
	return mt.m.Status() // after listing: servers started by it report connected
}

// Status reports every configured server.
func (mt *mcpTools) Status() []mcptool.Status { return mt.m.Status() }

// Close stops every server.
func (mt *mcpTools) Close() error { return mt.m.Close() }

func newMCPManager(cfg *config.Config, logger *slog.Logger) *mcptool.Manager {
	return mcptool.New(mcpServers(cfg), mcptool.Options{
		Logger: logger, ClientName: "hermes", ClientVersion: version, Env: toolEnv(cfg),
		// reload.mcp re-reads the configuration, so a server added, changed or removed in
		// config.yaml takes effect without a restart (and without touching the sessions). The
		// file is read from the home the running configuration came from.
		Reconfigure: func() (map[string]mcptool.ServerConfig, error) {
			fresh, err := config.Load(func(k string) string {
				if k == "HERMES_HOME" {
					return cfg.Home
				}
				return os.Getenv(k)
			})
			if err != nil {
				return nil, err
			}
			return mcpServers(fresh), nil
		},
	})
}

// mcpServers converts the configured MCP servers.
func mcpServers(cfg *config.Config) map[string]mcptool.ServerConfig {
	servers := make(map[string]mcptool.ServerConfig, len(cfg.MCP.Servers))
	for name, s := range cfg.MCP.Servers {
		servers[name] = mcptool.ServerConfig{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers, Timeout: time.Duration(s.Timeout)}
	}
	return servers
}

// mcpStatus connects every configured MCP server once and prints its state and tools. It
// exits 1 when a server is unusable.
func mcpStatus(ctx context.Context, io stdio) int {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	if len(cfg.MCP.Servers) == 0 {
		fmt.Fprintln(io.out, "no MCP servers configured (mcp.servers in config.yaml)")
		return 0
	}
	// Start errors are in the status lines; the log would only repeat them.
	m := newMCPManager(cfg, newLogger(io.err, slog.LevelError+1))
	defer m.Close()
	tools := m.Tools(ctx)
	code := 0
	for _, st := range m.Status() {
		if !st.Connected {
			code = 1
			fmt.Fprintf(io.out, "%s (%s): FAIL %s\n", st.Name, st.Transport, st.Error)
			continue
		}
		prefix := mcptool.ToolName(st.Name, "")
		fmt.Fprintf(io.out, "%s (%s): ok, %d tools\n", st.Name, st.Transport, st.Tools)
		for _, t := range tools {
			if name := t.Spec().Name; strings.HasPrefix(name, prefix) {
				fmt.Fprintf(io.out, "  %s\n", name)
			}
		}
		for _, why := range st.Skipped {
			fmt.Fprintf(io.out, "  skipped %s\n", why)
		}
	}
	return code
}
