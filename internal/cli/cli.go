// Package cli is the hermes command: every subcommand, the command table that names them
// (commands.go) and the composition root they share. It reads configuration, opens the store,
// builds providers, tools and policy, assembles the engine and starts the chosen surface. The
// hermes binary's main package only calls Main.
package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/replay"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/postgres"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/agent"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/engine/tool/danger"
	"github.com/hermes-go/hermes/internal/metrics"
	"github.com/hermes-go/hermes/internal/telemetry"
)

// version is the build's version: Main sets it from the hermes binary's own (which -ldflags
// "-X main.version=…" sets at build time).
var version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdio stdio) int
}

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "hermes — an AI agent over durable sessions, driven from the terminal and by other programs.\n\n")
	fmt.Fprintf(w, "Usage:\n  hermes <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'hermes <command> -h' for a command's flags.\n")
	fmt.Fprintf(w, "\nEnvironment: HERMES_HOME (default ~/.hermes), HERMES_MODEL (provider:model), OPENAI_BASE_URL,\n")
	fmt.Fprintf(w, "OPENAI_API_KEY, HERMES_API_KEY (or API_SERVER_KEY), HERMES_POLICY, HERMES_MAX_ITERATIONS.\n")
}

// Main runs hermes with args (the command line without the program name) on the given
// standard streams and returns the exit status. ver is the build's version ("dev" when not
// set). Every command starts with $HERMES_HOME/.env loaded (dotenv.go).
func Main(ctx context.Context, ver string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if ver != "" {
		version = ver
	}
	startEnv(stderr)
	return run(ctx, args, stdio{stdin, stdout, stderr})
}

func run(ctx context.Context, args []string, io stdio) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(io.out)
		return 0
	}
	if args[0] == "--version" || args[0] == "-v" {
		args[0] = "version"
	}
	if c, ok := lookup(args[0]); ok {
		if helpRequested(c.name, args[1:]) {
			return commandHelp(ctx, c, args[1:], io)
		}
		tr := startTracing(ctx, io.err)
		defer tr.Shutdown(ctx)
		return c.run(ctx, args[1:], io)
	}
	fmt.Fprintf(io.err, "hermes: unknown command %q\n\n", args[0])
	usage(io.err)
	return 2
}

// helpRequested reports whether -h, -help or --help asks for a command's usage: right after
// the command, or after the subcommand word of config, mcp and policy (config show --help). A
// script's own arguments (run FILE --help) are the script's.
func helpRequested(name string, args []string) bool {
	isHelp := func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }
	switch {
	case len(args) > 0 && isHelp(args[0]):
		return true
	case name == "config" || name == "mcp" || name == "policy":
		return len(args) > 1 && isHelp(args[1])
	}
	return false
}

// commandHelp prints a command's usage on stdout and exits 0, as asking for help is not a
// mistake: a command with flags prints them (its flag parsing stops at the help flag, before
// it does anything); one without prints its line of the command table.
func commandHelp(ctx context.Context, c command, args []string, io stdio) int {
	sub := ""
	if len(args) > 1 {
		sub = args[0]
	}
	switch {
	case c.name == "version", c.name == "config" && sub == "show", c.name == "policy" && sub == "show", c.name == "mcp" && sub == "status":
		fmt.Fprintf(io.out, "usage: hermes %s\n\n%s\n", strings.TrimSpace(c.name+" "+sub), c.summary)
		return 0
	}
	var buf bytes.Buffer
	code := c.run(ctx, args, stdio{io.in, &buf, &buf})
	out := buf.String()
	// The flag package's "Usage of NAME:" becomes a usage line and the command's summary.
	if rest, ok := strings.CutPrefix(out, "Usage of "); ok {
		if name, flags, ok := strings.Cut(rest, ":\n"); ok {
			out = fmt.Sprintf("usage: hermes %s [flags]\n\n%s\n\nflags:\n%s", name, c.summary, flags)
		}
	}
	fmt.Fprint(io.out, out)
	if code != 2 {
		return code
	}
	return 0
}

func runVersion(_ context.Context, _ []string, io stdio) int {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	fmt.Fprintf(io.out, "hermes %s\n", v)
	return 0
}

func runConfig(_ context.Context, args []string, io stdio) int {
	if len(args) == 0 || args[0] != "show" {
		fmt.Fprintln(io.err, "usage: hermes config show")
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	fmt.Fprint(io.out, cfg.Show())
	return 0
}

func runSessions(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	fs.SetOutput(io.err)
	limit := fs.Int("n", 20, "how many sessions to list (0: all)")
	all := fs.Bool("all", false, "list every principal's sessions, also those API keys of hermes serve created")
	jsonOut := fs.Bool("json", false, "print one JSON object a session (the stored record)")
	empty := fs.Bool("empty", false, "list also the sessions never used (no message, no title)")
	if err := fs.Parse(args); err != nil || !noArgs(fs, io) {
		return 2
	}
	if *limit < 0 {
		fmt.Fprintf(io.err, "hermes sessions: -n must be 0 (all) or more, not %d\n", *limit)
		return 2
	}
	// One write for the listing, not one a line (10,000 sessions are 10,000 writes otherwise).
	buf := bufio.NewWriterSize(io.out, 64<<10)
	defer buf.Flush()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		fmt.Fprintln(io.err, "hermes:", err)
		return 1
	}
	st, err := openStore(cfg)
	if err != nil {
		fmt.Fprintln(io.err, "hermes:", err)
		return 1
	}
	defer st.Close()
	list, err := st.ListSessions(ctx, store.ListOptions{})
	if err != nil {
		fmt.Fprintln(io.err, "hermes:", err)
		return 1
	}
	// The table: aligned columns under a header, written once the widths are known.
	var tab table
	if !*jsonOut {
		defer func() { tab.write(buf) }()
		if *all {
			tab.add("ID", "UPDATED", "MODEL", "ROWS", "TITLE", "OWNER")
		} else {
			tab.add("ID", "UPDATED", "MODEL", "ROWS", "TITLE")
		}
	}
	// The CLI is the local owner: another principal's sessions are listed only with -all.
	n := 0
	for _, s := range list {
		if *limit > 0 && n == *limit {
			break
		}
		if s.Meta[engine.MetaDeleted] != "" { // deleted: gone on every surface
			continue
		}
		if !*all && !engine.LocalOwner.Sees(s.Principal) {
			continue
		}
		if !*empty && engine.Untouched(s) { // opened and left without a word
			continue
		}
		n++
		if *jsonOut {
			if err := enc.Encode(s); err != nil {
				fmt.Fprintln(io.err, "hermes:", err)
				return 1
			}
			continue
		}
		updated, rows := s.UpdatedAt.Local().Format("2006-01-02 15:04"), strconv.FormatInt(s.RowCount, 10)
		if *all {
			tab.add(s.ID, updated, cell(s.Model), rows, cell(s.Title), cell(s.Principal))
		} else {
			tab.add(s.ID, updated, cell(s.Model), rows, cell(s.Title))
		}
	}
	return 0
}

// table is a terminal table: rows of cells, written with each column as wide as its widest cell
// (in runes) and two spaces between columns; the last column is not padded.
type table struct {
	rows   [][]string
	widths []int
}

func (t *table) add(cells ...string) {
	for i, c := range cells {
		if i == len(t.widths) {
			t.widths = append(t.widths, 0)
		}
		t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
	}
	t.rows = append(t.rows, cells)
}

func (t *table) write(w *bufio.Writer) {
	for _, r := range t.rows {
		for i, c := range r {
			w.WriteString(c)
			if i < len(r)-1 {
				for range t.widths[i] - utf8.RuneCountInString(c) + 2 {
					w.WriteByte(' ')
				}
			}
		}
		w.WriteByte('\n')
	}
}

// cell is a stored string as one cell of a terminal table: "-" when empty, and every control
// character (a newline or tab would break the table, an escape sequence would reach the
// terminal) as a space. Titles and models are set by API clients, not only by this user.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, s)
}

func openStore(cfg *config.Config) (store.Store, error) { return openStoreLog(cfg, nil) }

// openStoreLog is openStore for a command with a logger of its own (serve, gateway): what the
// store reports (a lost listening connection) goes there, in the command's format. nil: the
// default logger.
func openStoreLog(cfg *config.Config, logger *slog.Logger) (store.Store, error) {
	if u := cfg.Store.URL; u != "" {
		// A shared store (store.url in config.yaml, or HERMES_STORE).
		if !postgres.IsURL(u) {
			scheme, _, _ := strings.Cut(u, ":")
			return nil, fmt.Errorf("store url: %q stores are not supported (postgres:// is)", scheme)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := postgres.Open(ctx, u, postgres.Options{Logger: logger})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return openHomeStore(cfg) // store_open.go
}

// runtimeOpts adjust how the engine is assembled for one command.
type runtimeOpts struct {
	record string // write a cassette of every live model call here
	cwd    string
	logger *slog.Logger
	// providers replace configured providers of the same name (the demo's embedded cassette).
	providers map[string]model.Provider
	// metrics, when set, is fed by the engine's events, store operations and policy hooks.
	metrics *metrics.Metrics
	// remote: model names come from network clients (hermes serve), so a replay provider
	// opens only the cassettes the configuration names (cassettes.serveOnly).
	remote bool
}

// leaseOwner names this process in session lease records (hermes doctor lists them):
// host, pid, command and a random suffix.
func leaseOwner() string {
	host, _ := os.Hostname()
	cmd := "hermes"
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		cmd = os.Args[1]
	}
	return fmt.Sprintf("%s:%d:%s:%s", host, os.Getpid(), cmd, rand.Text()[:8])
}

// assembled is a built engine and what must be closed after it.
type assembled struct {
	eng      *engine.Engine
	st       store.Store
	recorder *replay.Recorder
	recPath  string
	busy     *policy.BusySetting // the Go busy-input policy; config.set busy changes it
	policy   io.Closer           // the policy script's VMs
	mcp      *mcpTools           // MCP server connections and the tools they added
}

func (a *assembled) Close() error {
	err := a.eng.Close()
	a.mcp.Close()
	if a.policy != nil {
		a.policy.Close()
	}
	if a.recorder != nil {
		if e := a.recorder.Save(a.recPath); e != nil && err == nil {
			err = fmt.Errorf("save cassette: %w", e)
		}
	}
	if e := a.st.Close(); e != nil && err == nil {
		err = e
	}
	return err
}

// build assembles the engine from configuration.
func build(cfg *config.Config, st store.Store, o runtimeOpts) (*assembled, error) {
	if o.cwd == "" && cfg.Cwd != "" {
		if err := configCwd(cfg.Cwd); err != nil {
			return nil, err
		}
	}
	a := &assembled{st: st, busy: policy.NewBusySetting(cfg.BusyInputMode)}
	var httpClient *http.Client
	if o.record != "" {
		a.recorder = replay.NewRecorder(http.DefaultTransport)
		a.recorder.Provider = recordDialect(cfg)
		a.recPath = o.record
		httpClient = &http.Client{Transport: a.recorder}
	}
	providers := map[string]model.Provider{}
	for name, p := range cfg.Providers {
		if pr := providerFor(p, httpClient); pr != nil {
			if c, ok := pr.(*cassettes); ok && o.remote {
				c.serveOnly(cfg, name)
			}
			if env := config.MissingKey(name, p); env != "" {
				pr = keyless{name: name, env: env}
			}
			providers[name] = pr
		}
	}
	for name, p := range o.providers {
		providers[name] = p
	}
	opts := danger.Options{Home: homeDir(), HermesHome: cfg.Home}
	check := func(cmd string) tool.Verdict {
		r := danger.Check(cmd, opts)
		v := tool.Verdict{Blocked: r.Hardline, Reason: r.Reason, Command: cmd}
		for _, m := range r.Matches {
			v.Patterns = append(v.Patterns, m.Key)
		}
		return v
	}
	reg := tool.NewRegistry(builtin.DefaultsEnv(check, toolEnv(cfg))...)
	reg.Add(agent.Clarify{})
	reg.Add(agent.Delegate{})
	cwd := o.cwd
	if cwd == "" {
		cwd = cfg.Cwd
	}
	logger := o.logger
	if logger == nil {
		logger = newLogger(os.Stderr, slog.LevelWarn)
	}
	a.mcp = addMCPTools(cfg, reg, logger)
	pol, polCloser, err := loadPolicy(cfg, reg, policy.Set{Approver: policy.Defaults{}, Busy: a.busy})
	if err != nil {
		a.mcp.Close()
		return nil, err
	}
	a.policy = polCloser
	est, onEvent := st, (func(engine.Event))(nil)
	if m := o.metrics; m != nil {
		est, pol, onEvent = m.Store(st), m.Policy(pol), m.OnEvent
	}
	eng, err := engine.New(engine.Config{
		Store: est, Providers: providers, DefaultModel: cfg.Model, Tools: reg,
		Policy:                pol,
		Fallback:              policy.Set{Busy: a.busy},
		OnEvent:               onEvent,
		SystemPrompt:          cfg.SystemPrompt,
		Cwd:                   cwd,
		MaxIterations:         cfg.MaxIterations,
		SubagentMaxIterations: cfg.Delegation.MaxIterations,
		MaxDelegateDepth:      cfg.Delegation.MaxDepth,
		MaxDelegates:          cfg.Delegation.MaxConcurrent,
		ApprovalTimeout:       time.Duration(cfg.Approvals.Timeout),
		HookTimeout:           time.Duration(cfg.Scripts.HookTimeout),
		AllowOutsideCwd:       cfg.Files.AllowOutsideCwd,
		Logger:                logger,
		TraceContent:          telemetry.CaptureContent(os.Getenv, cfg.Telemetry.CaptureContent),
		Catalog:               cfg.Catalog(),
		FallbackModels:        cfg.FallbackModels,
		ContextWindow:         cfg.Compression.ContextWindow,
		CompactThreshold:      cfg.Compression.CompactThreshold(),
		ToolOutputBudget:      cfg.Tools.OutputBudget,
		ToolOutputBudgets:     cfg.Tools.OutputBudgets,
		// Every command takes session leases: any other process on the home may run the
		// same sessions.
		Leases: engine.LeaseConfig{Owner: leaseOwner()},
	})
	if err != nil {
		polCloser.Close()
		a.mcp.Close()
		return nil, err
	}
	a.eng = eng
	if m := o.metrics; m != nil {
		m.WatchEngine(eng)
		m.WatchLeases(st)
	}
	return a, nil
}

func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}

// cassettes is the replay provider: the model part of "replay:<name>" names a cassette file
// (absolute, relative to the working directory, or to the provider's dir). Each cassette is
// loaded once and played in order.
type cassettes struct {
	dir string
	// offered, when not nil, are the only cassettes this provider opens besides those under
	// dir: model names come from network clients (hermes serve), and a model name of this
	// provider is a path on the server. Nil: the local user names any file.
	offered map[string]bool
	mu      sync.Mutex
	loaded  map[string]*replay.Provider
}

var (
	_ model.Provider = (*cassettes)(nil)
	_ model.Checker  = (*cassettes)(nil)
)

// serveOnly makes c open only what the configuration names for provider name: the default
// and fallback models of this provider, its models list, and relative names under its dir.
func (c *cassettes) serveOnly(cfg *config.Config, name string) {
	c.offered = map[string]bool{}
	for _, m := range append([]string{cfg.Model}, cfg.FallbackModels...) {
		if prov, cas := model.ParseName(m); prov == name && cas != "" {
			c.offered[cas] = true
		}
	}
	for _, m := range cfg.Providers[name].Models {
		c.offered[m] = true
	}
}

// CheckModel loads the cassette name stands for: a session is not switched to a cassette that
// is missing, broken or not offered.
func (c *cassettes) CheckModel(name string) error {
	_, err := c.provider(name)
	return err
}

func (c *cassettes) provider(name string) (*replay.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.loaded[name]; ok {
		return p, nil
	}
	path := name
	switch {
	case c.offered != nil && !c.offered[name]:
		// Nothing is opened, not even looked at: whether a path exists on the server is not
		// a client's to learn.
		if c.dir == "" || !filepath.IsLocal(name) {
			return nil, fmt.Errorf("cassette %q is not offered by this server (list it in the replay provider's models, or put it under its dir)", name)
		}
		path = filepath.Join(c.dir, name)
	case !filepath.IsAbs(path) && c.dir != "":
		if _, err := os.Stat(path); err != nil {
			path = filepath.Join(c.dir, name)
		}
	}
	cas, err := replay.Load(path)
	if err != nil {
		return nil, err
	}
	if c.loaded == nil {
		c.loaded = map[string]*replay.Provider{}
	}
	p := replay.New(cas)
	c.loaded[name] = p
	return p, nil
}

func (c *cassettes) Stream(ctx context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		p, err := c.provider(r.Model)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		for ch, err := range p.Stream(ctx, r) {
			if !yield(ch, err) || err != nil {
				return
			}
		}
	}
}

// keyless is a hosted provider without its key: a turn that calls it fails at once saying what
// to set, instead of sending a request to be turned away (or retried against an endpoint that
// cannot answer). Switching a session to one of its models stays allowed, as it always was on
// the wire: the key may be set before the next turn.
type keyless struct {
	name, env string
}

func (k keyless) Stream(context.Context, model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		yield(model.Chunk{}, fmt.Errorf("provider %s has no API key: set %s (in the environment or $HERMES_HOME/.env)", k.name, k.env))
	}
}

// flagCwd resolves a --cwd flag the way hermes.create({cwd}) does in a script: a relative
// path is taken from the process's working directory, so the session stores an absolute one.
// A path that is not an existing directory is refused here, as every other surface refuses
// it (engine.ErrInvalidCwd), instead of failing the session's first tool call. Empty stays
// empty: the command's default.
func flagCwd(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--cwd %q: %w", dir, err)
	}
	named := strconv.Quote(dir)
	if abs != dir {
		named += " (" + abs + ")"
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("--cwd %s: no such directory", named)
	case err != nil:
		return "", fmt.Errorf("--cwd %s: %w", named, errors.Unwrap(err))
	case !fi.IsDir():
		return "", fmt.Errorf("--cwd %s: not a directory", named)
	}
	return abs, nil
}

// noArgs refuses arguments after a command's flags where it takes none (a typo such as
// `hermes sessions all` for -all would otherwise be ignored). Usage error: exit 2.
func noArgs(fs *flag.FlagSet, io stdio) bool {
	if fs.NArg() == 0 {
		return true
	}
	fmt.Fprintf(io.err, "hermes %s: unexpected argument %q (hermes %s --help lists the flags)\n", fs.Name(), fs.Arg(0), fs.Name())
	return false
}

// configCwd checks the cwd of config.yaml, every new session's working directory when no
// --cwd names one: it must be an absolute path to an existing directory (a relative one would
// mean another folder for each process sharing the home).
func configCwd(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("cwd %q in config.yaml is not an absolute path", dir)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cwd %q in config.yaml: no such directory", dir)
	case err != nil:
		return fmt.Errorf("cwd %q in config.yaml: %w", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("cwd %q in config.yaml: not a directory", dir)
	}
	return nil
}

// exitError reports a command failure with its exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func fail(io stdio, err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintln(io.err, "hermes:", redact.String(fmt.Sprint(ee.err)))
		return ee.code
	}
	// A configuration or store error may quote a value it could not use: a key, a DSN.
	fmt.Fprintln(io.err, "hermes:", redact.String(err.Error()))
	return 1
}
