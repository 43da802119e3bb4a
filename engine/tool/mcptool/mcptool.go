// Package mcptool offers the tools of Model Context Protocol servers as ordinary engine tools.
//
// A Manager owns one connection per configured server (a stdio child process, or a streamable
// HTTP endpoint). Servers are connected when the registry is built (Manager.Tools), because the
// model must see the tool list before its first turn; a server that fails to start is logged
// and contributes no tools, and the engine runs without it (Status carries the error). Each
// remote tool is offered as "server__tool" with the server's JSON schema, unchanged; a tool
// whose schema is not an object schema is left out and named in Status.Skipped. Because they
// are plain tools, MCP calls go through the engine's approval policy like any other (the
// policy sees Tool = "server__tool").
//
// A connection that dies (the child exits, the pipe breaks) is dropped and restarted on the
// next call to one of its tools; consecutive failed starts back off exponentially so a broken
// server is not respawned on every call. Reload (and Update with a new server set) restarts
// servers without touching the sessions that use their tools. Close stops every child process.
package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/toolenv"
)

// Separator joins the server name and the remote tool name in the engine tool name.
const Separator = "__"

// Defaults for zero option values.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultStartTimeout   = 30 * time.Second
	DefaultMaxResultBytes = 64 << 10
	maxBackoff            = 30 * time.Second
	firstBackoff          = time.Second
	stderrTail            = 2 << 10
)

var (
	// ErrUnavailable: the server is not running and could not be (re)started.
	ErrUnavailable = errors.New("mcp server unavailable")
	// ErrTimeout: the server did not answer a call within its timeout.
	ErrTimeout = errors.New("mcp call timed out")
	// ErrClosed: the Manager was closed.
	ErrClosed = errors.New("mcp manager closed")
	// ErrConfig: a server's configuration is unusable (neither or both of command and url).
	ErrConfig = errors.New("invalid mcp server config")
	// ErrRemoved: the server was removed from the configuration by Update or Reload; its
	// tools stay in registries built earlier but fail until the next build.
	ErrRemoved = errors.New("mcp server removed from the configuration")
)

// ServerConfig describes one MCP server: either a stdio child (Command, Args, Env) or a
// streamable HTTP endpoint (URL, Headers).
type ServerConfig struct {
	Command string
	Args    []string
	Env     map[string]string // added to the environment Options.Env allows
	URL     string
	Headers map[string]string
	Timeout time.Duration // per call; DefaultCallTimeout when zero
}

// Options tune a Manager.
type Options struct {
	Logger         *slog.Logger
	StartTimeout   time.Duration // start and initialize one server; DefaultStartTimeout when zero
	MaxResultBytes int           // cap on the text handed to the model; DefaultMaxResultBytes when zero
	ClientName     string        // reported to servers; "hermes" when empty
	ClientVersion  string
	// Env decides which of Hermes' environment variables a stdio server gets, before its
	// configured ServerConfig.Env. The zero value passes the allow-list only
	// (toolenv.Allowed), never Hermes' or the providers' API keys.
	Env toolenv.Policy
	// Reconfigure, when set, is called by Reload to re-read the server set (the configuration
	// file may have changed since New); Reload then applies it as Update does. When it fails,
	// Reload logs the error and restarts the servers it has.
	Reconfigure func() (map[string]ServerConfig, error)
}

// Status is one server's state, for surfaces (reload.mcp, status). Error is redacted: it
// never shows a URL's user info, a secret query parameter or a registered secret.
type Status struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // stdio | http
	Connected bool   `json:"connected"`
	Tools     int    `json:"tools"`
	Error     string `json:"error,omitempty"`
	// PID is the process id of a running stdio server (0 for HTTP or when not running).
	PID int `json:"pid,omitempty"`
	// Skipped lists the server's tools that are not offered, each as "tool: why" (a
	// malformed input schema).
	Skipped []string `json:"skipped,omitempty"`
}

// Manager owns the connections to the configured servers. It is safe for concurrent use.
type Manager struct {
	opts Options

	// reload serialises Reload and Update end to end (including stopping removed servers
	// and restarting the rest): a second reload that starts while the first is stopping a
	// server it re-adds would otherwise revive it only to have the first one's late stop
	// close the new connection. Tool calls never take it.
	reload sync.Mutex

	mu      sync.Mutex         // guards the fields below
	servers []*server          // sorted by name; Update replaces it
	removed map[string]*server // servers Update dropped, by name, so a return reuses them
	closed  bool
}

// New returns a Manager for servers. Nothing is started until Tools or a call.
func New(servers map[string]ServerConfig, o Options) *Manager {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.ClientName == "" {
		o.ClientName = "hermes"
	}
	m := &Manager{opts: o}
	for _, n := range sortedNames(servers) {
		m.servers = append(m.servers, &server{name: n, cfg: servers[n], opts: &m.opts})
	}
	return m
}

func sortedNames(servers map[string]ServerConfig) []string {
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// snapshot returns the current server list.
func (m *Manager) snapshot() []*server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servers
}

// Tools connects every server (concurrently), lists its tools and returns them as engine
// tools, in server then remote order. Servers that fail are logged and skipped; so is a tool
// whose input schema is not a JSON object schema.
func (m *Manager) Tools(ctx context.Context) []tool.Tool {
	servers := m.snapshot()
	lists := make([][]tool.Tool, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			ts, err := s.list(ctx)
			if err != nil {
				m.opts.Logger.Error("mcp server skipped", "server", s.name, "err", err)
				return
			}
			lists[i] = ts
		})
	}
	wg.Wait()
	return slices.Concat(lists...)
}

// Status reports every server.
func (m *Manager) Status() []Status {
	if m == nil {
		return []Status{}
	}
	servers := m.snapshot()
	out := make([]Status, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.status())
	}
	return out
}

// Reload re-reads the server set through Options.Reconfigure (when set), restarts every
// server (clearing any start backoff), lists its tools again and returns the resulting
// status. Sessions are not touched: the tools already in a registry keep working against the
// new connections. Tools a server added or removed since Tools was called, and the tools of
// a server added to the configuration, show in Status.Tools but do not change a registry
// built earlier; they are offered from the next build.
func (m *Manager) Reload(ctx context.Context) []Status {
	if m == nil {
		return []Status{}
	}
	m.reload.Lock()
	defer m.reload.Unlock()
	if m.opts.Reconfigure != nil {
		servers, err := m.opts.Reconfigure()
		if err == nil {
			return m.update(ctx, servers)
		}
		m.opts.Logger.Error("mcp reload: cannot re-read the server configuration; restarting the servers as they were", "err", err)
	}
	return m.restart(ctx, m.snapshot())
}

// Update replaces the server set: a server whose name is new is added, one whose
// configuration changed takes the new one, one no longer listed is stopped and its tools fail
// with ErrRemoved. Every remaining server is restarted as by Reload. It returns the status of
// the new set.
func (m *Manager) Update(ctx context.Context, servers map[string]ServerConfig) []Status {
	if m == nil {
		return []Status{}
	}
	m.reload.Lock()
	defer m.reload.Unlock()
	return m.update(ctx, servers)
}

func (m *Manager) update(ctx context.Context, servers map[string]ServerConfig) []Status {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return m.Status()
	}
	old := make(map[string]*server, len(m.servers))
	for _, s := range m.servers {
		old[s.name] = s
	}
	next := make([]*server, 0, len(servers))
	for _, n := range sortedNames(servers) {
		s, ok := old[n]
		delete(old, n)
		if !ok {
			// A server that comes back is the same object, so the tools registries still hold
			// for it work again.
			if s, ok = m.removed[n]; ok {
				delete(m.removed, n)
				s.revive()
			} else {
				s = &server{name: n, opts: &m.opts}
			}
		}
		s.configure(servers[n])
		next = append(next, s)
	}
	m.servers = next
	for n, s := range old {
		if m.removed == nil {
			m.removed = map[string]*server{}
		}
		m.removed[n] = s
	}
	m.mu.Unlock()
	for _, s := range old {
		s.remove()
	}
	return m.restart(ctx, next)
}

// restart resets and relists servers concurrently and returns the Manager's status.
func (m *Manager) restart(ctx context.Context, servers []*server) []Status {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			s.reset()
			if _, err := s.list(ctx); err != nil {
				m.opts.Logger.Error("mcp server reload failed", "server", s.name, "err", err)
			}
		})
	}
	wg.Wait()
	return m.Status()
}

// Close stops every server; later calls fail with ErrClosed. A nil Manager is closed already.
func (m *Manager) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	m.closed = true
	servers := m.servers
	m.mu.Unlock()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.close(ErrClosed))
	}
	return errors.Join(errs...)
}

// server is one configured server and its current connection.
type server struct {
	name string
	cfg  ServerConfig
	opts *Options

	mu       sync.Mutex // serialises starts; guards the fields below
	cli      *client.Client
	stderr   *tailBuffer
	failures int       // consecutive failed starts
	retryAt  time.Time // no start attempt before this
	lastErr  error
	tools    int
	skipped  []string // tools left out of the last listing, "tool: why"
	pid      int      // process group of the stdio child; 0 for HTTP or when not running
	closed   error    // ErrClosed or ErrRemoved once the server is stopped for good
}

// transportName is "http" or "stdio". Called with s.mu held.
func (s *server) transportName() string {
	if s.cfg.URL != "" {
		return "http"
	}
	return "stdio"
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.name, Transport: s.transportName(), Connected: s.cli != nil, Tools: s.tools, PID: s.pid, Skipped: slices.Clone(s.skipped)}
	if s.cli == nil && s.lastErr != nil {
		st.Error = redact.String(s.lastErr.Error())
	}
	return st
}

// configure sets the server's configuration; it takes effect at the next start.
func (s *server) configure(cfg ServerConfig) {
	s.mu.Lock()
	s.cfg = cfg
	s.mu.Unlock()
}

// timeout is the per-call timeout.
func (s *server) timeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Timeout > 0 {
		return s.cfg.Timeout
	}
	return DefaultCallTimeout
}

// connect returns the live client, starting the server if needed.
func (s *server) connect(ctx context.Context) (*client.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return nil, fmt.Errorf("%w: %q", s.closed, s.name)
	}
	if s.cli != nil {
		return s.cli, nil
	}
	if wait := time.Until(s.retryAt); wait > 0 {
		return nil, fmt.Errorf("%w: %q: %s (next start attempt in %s)", ErrUnavailable, s.name, redact.String(s.lastErr.Error()), wait.Round(time.Second))
	}
	cli, err := s.start(ctx)
	if err != nil {
		s.failures++
		s.retryAt = time.Now().Add(backoff(s.failures))
		s.lastErr = err
		return nil, fmt.Errorf("%w: %q: %s", ErrUnavailable, s.name, redact.String(err.Error()))
	}
	s.failures, s.retryAt, s.lastErr = 0, time.Time{}, nil
	s.cli = cli
	return cli, nil
}

// backoff is the pause after n consecutive failed starts: 1s, 2s, 4s … capped at 30s. The
// first start after a crash is immediate; only repeated failures wait.
func backoff(n int) time.Duration {
	d := firstBackoff << min(n-1, 10)
	return min(d, maxBackoff)
}

// start launches and initializes the server. Called with s.mu held.
func (s *server) start(ctx context.Context) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	var cli *client.Client
	switch {
	case (s.cfg.Command == "") == (s.cfg.URL == ""):
		return nil, fmt.Errorf("%w: set exactly one of command and url", ErrConfig)
	case s.cfg.Command != "":
		// The child starts from the allow-listed environment plus its configured env, never
		// from Hermes' own (which holds API keys).
		wd, _ := os.Getwd()
		env := s.opts.Env.Environ(wd, s.cfg.Env)
		s.stderr = &tailBuffer{max: stderrTail}
		// The child's lifetime is the connection's, not this call's: the transport ties the
		// process to the context given to Start, so it gets Background and Close ends it.
		var cmd *exec.Cmd
		tr := transport.NewStdioWithOptions(s.cfg.Command, env, s.cfg.Args,
			transport.WithCommandLogger(s.opts.Logger),
			transport.WithCommandFunc(func(_ context.Context, name string, env, args []string) (*exec.Cmd, error) {
				cmd = exec.Command(name, args...)
				cmd.Env = append([]string{}, env...) // never nil: a nil Env inherits everything
				// exec copies stderr into the buffer and Wait (inside Close) waits for the
				// copy, so after a failed start the buffer holds everything the child said.
				// WaitDelay bounds that wait when a grandchild keeps stderr open.
				cmd.Stderr = s.stderr
				cmd.WaitDelay = 2 * time.Second
				ownGroup(cmd)
				return cmd, nil
			}))
		if err := tr.Start(context.Background()); err != nil {
			return nil, err
		}
		s.pid = cmd.Process.Pid
		cli = client.NewClient(tr)
	default:
		var err error
		// The transport logs through our logger (which redacts), not slog.Default.
		cli, err = client.NewStreamableHttpClient(s.cfg.URL, transport.WithHTTPHeaders(s.cfg.Headers), transport.WithHTTPLogger(s.opts.Logger))
		if err != nil {
			return nil, err
		}
		if err := cli.Start(context.Background()); err != nil {
			cli.Close()
			return nil, err
		}
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: s.opts.ClientName, Version: s.opts.ClientVersion}
	if _, err := cli.Initialize(ctx, req); err != nil {
		shutdown(cli, s.pid)
		s.pid = 0
		if tail := s.stderrTail(); tail != "" {
			return nil, fmt.Errorf("initialize: %w; stderr: %s", err, tail)
		}
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return cli, nil
}

func (s *server) stderrTail() string {
	if s.stderr == nil {
		return ""
	}
	return strings.TrimSpace(strings.ToValidUTF8(s.stderr.String(), "\uFFFD"))
}

// drop forgets cli after it failed, so the next call starts a fresh server.
func (s *server) drop(cli *client.Client, cause error) {
	s.mu.Lock()
	if s.cli != cli {
		s.mu.Unlock()
		return
	}
	s.cli = nil
	s.lastErr = cause
	pid := s.pid
	s.pid = 0
	s.mu.Unlock()
	shutdown(cli, pid)
}

// shutdown closes a connection (a stdio child gets EOF on stdin, then a kill if it lingers)
// and kills whatever the child left in its process group.
func shutdown(cli *client.Client, pid int) error {
	err := cli.Close()
	return errors.Join(err, killGroup(pid))
}

// reset drops the connection and forgets past start failures, so the next use starts afresh.
func (s *server) reset() {
	s.mu.Lock()
	cli, pid := s.cli, s.pid
	s.cli, s.pid, s.failures, s.retryAt, s.lastErr, s.tools, s.skipped = nil, 0, 0, time.Time{}, nil, 0, nil
	s.mu.Unlock()
	if cli != nil {
		shutdown(cli, pid)
	}
}

// remove stops a server dropped from the configuration.
func (s *server) remove() {
	if err := s.close(ErrRemoved); err != nil {
		s.opts.Logger.Warn("mcp server removed", "server", s.name, "err", err)
	}
}

// revive undoes remove: the server starts again on its next use.
func (s *server) revive() {
	s.mu.Lock()
	s.closed = nil
	s.mu.Unlock()
}

// close stops the server; later calls fail with why (ErrClosed, or ErrRemoved until revive).
func (s *server) close(why error) error {
	s.mu.Lock()
	cli, pid := s.cli, s.pid
	s.cli, s.pid, s.closed = nil, 0, why
	s.mu.Unlock()
	if cli == nil {
		return nil
	}
	if err := shutdown(cli, pid); err != nil {
		return fmt.Errorf("mcp server %q: close: %w", s.name, err)
	}
	return nil
}

// list connects and returns the server's tools as engine tools.
func (s *server) list(ctx context.Context) ([]tool.Tool, error) {
	cli, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	listed, err := listTools(lctx, cli)
	if err != nil {
		if dead(err) {
			s.drop(cli, err)
		}
		return nil, fmt.Errorf("list tools: %w", err)
	}
	var out []tool.Tool
	var skipped []string
	for _, rt := range listed {
		if rt.invalid != "" {
			s.opts.Logger.Error("mcp tool skipped", "server", s.name, "tool", rt.Name, "err", rt.invalid)
			skipped = append(skipped, rt.Name+": "+rt.invalid)
			continue
		}
		schema, err := rawInputSchema(rt.InputSchema)
		if err != nil {
			s.opts.Logger.Error("mcp tool skipped: malformed input schema", "server", s.name, "tool", rt.Name, "err", err)
			skipped = append(skipped, fmt.Sprintf("%s: malformed input schema: %v", rt.Name, err))
			continue
		}
		desc := rt.Description
		if desc == "" {
			desc = fmt.Sprintf("Tool %q of the MCP server %q.", rt.Name, s.name)
		}
		out = append(out, &remoteTool{srv: s, remote: rt.Name, spec: model.ToolSpec{
			Name: ToolName(s.name, rt.Name), Description: desc, Parameters: schema,
		}})
	}
	s.mu.Lock()
	s.tools, s.skipped = len(out), skipped
	s.mu.Unlock()
	return out, nil
}

// listedTool is one entry of a server's tool list, with its input schema as sent.
type listedTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	invalid     string          // why the entry itself is unusable
}

// listRequests numbers the raw tools/list requests. Their ids are strings, so they cannot
// collide with the client's own numeric ids on the same connection.
var listRequests atomic.Int64

// listTools returns every tool the server lists. On connections using the initialize
// handshake (every protocol version before 2026-07-28, which is what servers built on the
// official SDKs speak) it sends tools/list itself and decodes each tool on its own: the
// client library decodes the whole list at once into fixed types, so a single malformed
// schema would hide every tool of the server, and the fields of a schema it does not model
// would be lost. The stateless protocol needs per-request metadata only the library adds, so
// there the library lists the tools.
func listTools(ctx context.Context, cli *client.Client) ([]listedTool, error) {
	if mcp.IsModernProtocol(cli.ProtocolVersion()) {
		res, err := cli.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return nil, err
		}
		out := make([]listedTool, 0, len(res.Tools))
		for _, t := range res.Tools {
			raw := t.RawInputSchema
			if raw == nil {
				if raw, err = json.Marshal(t.InputSchema); err != nil {
					raw = nil // reported as missing by rawInputSchema
				}
			}
			out = append(out, listedTool{Name: t.Name, Description: t.Description, InputSchema: raw})
		}
		return out, nil
	}
	var out []listedTool
	seen := map[string]bool{}
	cursor := ""
	for {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		resp, err := cli.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      mcp.NewRequestId(fmt.Sprintf("hermes-tools-list-%d", listRequests.Add(1))),
			Method:  string(mcp.MethodToolsList),
			Params:  params,
		})
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("server error %d: %s", resp.Error.Code, resp.Error.Message)
		}
		tools, next, err := decodeToolPage(resp.Result, len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, tools...)
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("tools/list repeats the cursor %q", next)
		}
		seen[next] = true
		cursor = next
	}
}

// decodeToolPage decodes one tools/list result entry by entry: an entry that cannot be
// decoded is returned marked invalid (named by its position, counting from before+1) rather
// than failing the page. It fails only when the result itself is not a tool list.
func decodeToolPage(result json.RawMessage, before int) ([]listedTool, string, error) {
	var page struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(result, &page); err != nil {
		return nil, "", fmt.Errorf("malformed tools/list result: %w", err)
	}
	out := make([]listedTool, 0, len(page.Tools))
	for i, raw := range page.Tools {
		var t listedTool
		if err := json.Unmarshal(raw, &t); err != nil || t.Name == "" {
			t = listedTool{Name: fmt.Sprintf("#%d", before+i+1), invalid: fmt.Sprintf("malformed tool entry: %.100s", raw)}
		}
		out = append(out, t)
	}
	return out, page.NextCursor, nil
}

// rawInputSchema returns a tool's input schema, unchanged, if it is a JSON object schema (type
// "object"), which is what model providers accept for function parameters.
func rawInputSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("no input schema")
	}
	var probe map[string]any
	if err := json.Unmarshal(raw, &probe); err != nil || probe == nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %.100s", raw)
	}
	if typ, _ := probe["type"].(string); typ != "object" {
		return nil, fmt.Errorf(`input schema type is %v, want "object"`, probe["type"])
	}
	if p, ok := probe["properties"]; ok {
		if _, isObj := p.(map[string]any); !isObj {
			return nil, errors.New("input schema properties is not an object")
		}
	}
	return raw, nil
}

// ToolName is the engine name of a remote tool: server__tool, restricted to the characters
// model providers accept in function names ([A-Za-z0-9_-], at most 64).
func ToolName(serverName, toolName string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
				return r
			}
			return '_'
		}, s)
	}
	n := clean(serverName) + Separator + clean(toolName)
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// dead reports whether err means the connection is gone (the child exited, the pipe broke,
// the HTTP server restarted and forgot the session or stopped listening), as opposed to a
// protocol error or a timeout on a live connection.
func dead(err error) bool {
	return errors.Is(err, transport.ErrTransportClosed) || errors.Is(err, transport.ErrSessionTerminated) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) || errors.Is(err, io.ErrClosedPipe)
}

// remoteTool is one server tool offered to the model.
type remoteTool struct {
	srv    *server
	remote string
	spec   model.ToolSpec
}

func (t *remoteTool) Spec() model.ToolSpec { return t.spec }

func (t *remoteTool) Call(ctx context.Context, c tool.Call, _ *tool.Env) (tool.Result, error) {
	// Always send an object: servers validating with zod reject "arguments": null.
	args := map[string]any{}
	if trimmed := bytes.TrimSpace(c.Args); len(trimmed) > 0 {
		if err := json.Unmarshal(trimmed, &args); err != nil {
			return tool.Errorf("Invalid arguments for %s: %v. Send a JSON object matching the tool's schema.", t.spec.Name, err), nil
		}
		if args == nil {
			args = map[string]any{}
		}
	}
	return t.srv.call(ctx, t.remote, args)
}

func (s *server) call(ctx context.Context, name string, args map[string]any) (tool.Result, error) {
	cli, err := s.connect(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	timeout := s.timeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := cli.CallTool(cctx, req)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return tool.Result{}, ctx.Err()
	case cctx.Err() != nil:
		return tool.Result{}, fmt.Errorf("%w: %q tool %q: no answer within %s", ErrTimeout, s.name, name, timeout)
	case dead(err):
		s.drop(cli, err)
		return tool.Result{}, fmt.Errorf("%w: %q stopped during the call (%v); it is restarted on the next call", ErrUnavailable, s.name, err)
	default:
		return tool.Result{}, fmt.Errorf("mcp server %q tool %q: %w", s.name, name, err)
	}
	r := Convert(res, s.opts.MaxResultBytes)
	r.Meta = map[string]any{"mcp_server": s.name, "mcp_tool": name}
	return r, nil
}

// Convert maps an MCP call result to what the model sees: text parts joined by newlines,
// images, audio and resources summarised with their mime type and uri, structured content as
// JSON when there is no other content, invalid UTF-8 replaced, and the whole capped at max
// bytes. isError becomes Result.IsError.
func Convert(res *mcp.CallToolResult, max int) tool.Result {
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, describe(c))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.ToValidUTF8(strings.Join(parts, "\n"), "\uFFFD")
	return tool.Result{Content: capText(text, max), IsError: res.IsError}
}

func describe(c mcp.Content) string {
	if v, ok := mcp.AsTextContent(c); ok {
		return v.Text
	}
	if v, ok := mcp.AsImageContent(c); ok {
		return fmt.Sprintf("[image %s, %d bytes base64]", v.MIMEType, len(v.Data))
	}
	if v, ok := mcp.AsAudioContent(c); ok {
		return fmt.Sprintf("[audio %s, %d bytes base64]", v.MIMEType, len(v.Data))
	}
	switch v := c.(type) {
	case mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s %q %s]", v.URI, v.Name, v.MIMEType)
	case *mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s %q %s]", v.URI, v.Name, v.MIMEType)
	}
	if v, ok := mcp.AsEmbeddedResource(c); ok {
		if t, ok := mcp.AsTextResourceContents(v.Resource); ok {
			return fmt.Sprintf("[resource %s %s]\n%s", t.URI, t.MIMEType, t.Text)
		}
		if b, ok := mcp.AsBlobResourceContents(v.Resource); ok {
			return fmt.Sprintf("[resource %s %s, %d bytes base64]", b.URI, b.MIMEType, len(b.Blob))
		}
		return "[resource]"
	}
	return fmt.Sprintf("[unsupported content %T]", c)
}

// capText cuts s to at most max bytes on a rune boundary and says how much was dropped.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", cut, len(s))
}

// tailBuffer keeps the last max bytes written (a child's stderr, for start errors).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
