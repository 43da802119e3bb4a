package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/scripting"
	"github.com/hermes-go/hermes/stdlib"
	hermesapi "github.com/hermes-go/hermes/stdlib/hermes"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// scriptFlags are shared by hermes run, hermes test and hermes repl.
type scriptFlags struct {
	policy, model, cwd string
	grants             listFlag
	maxMemory          int
	ephemeral          bool

	// Set by the command, not by a flag: globals added for the script (test, describe) and a
	// state directory used instead of the configured one (a temporary home).
	globals map[string]any
	home    string
}

func (f *scriptFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.policy, "policy", "", "policy file for the engine (default: HERMES_POLICY, config, or $HERMES_HOME/policy.js|lua)")
	fs.StringVar(&f.model, "model", "", "default model for new sessions (provider:model)")
	fs.StringVar(&f.cwd, "cwd", "", "working directory of new sessions (default: current)")
	fs.Var(&f.grants, "grant", "grant the script a capability: fs, fs:DIR or http:HOST (repeatable; adds to config scripts.grants)")
	fs.IntVar(&f.maxMemory, "max-memory", 0, "interrupt the script when the heap grows by more than this many MiB (0: no limit)")
}

// resolveCwd makes --cwd absolute and refuses one that is not a directory (flagCwd).
func (f *scriptFlags) resolveCwd() error {
	cwd, err := flagCwd(f.cwd)
	f.cwd = cwd
	return err
}

// ephemeralHome makes a temporary HERMES_HOME for one run (--ephemeral, hermes test): the
// sessions the script creates go to a store there, removed when done. The configuration,
// providers and the policy in effect are still those of the real home.
func ephemeralHome() (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp("", "hermes-home-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// scriptEnv is an engine assembled for a script, with the script API bound to it.
type scriptEnv struct {
	a       *assembled
	api     *hermesapi.API
	rt      *scripting.Runtime
	handle  *policyHandle
	watchWG sync.WaitGroup
}

// newScriptEnv builds the engine and a runtime for lang. Output of print goes to out. preload
// makes the script API and the standard modules globals (the REPL).
func newScriptEnv(f scriptFlags, lang, source string, args []string, out, errw io.Writer, watch func(*engine.Session, uint64), preload bool) (*scriptEnv, error) {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return nil, err
	}
	if f.policy != "" {
		cfg.Policy = f.policy
	}
	if f.model != "" {
		cfg.Model = f.model
	}
	if f.home != "" {
		if cfg.Policy == "" { // keep the policy of the real home in effect
			if cfg.Policy, err = policyPath(cfg); err != nil {
				return nil, err
			}
		}
		cfg.Home, cfg.Store.Dir = f.home, filepath.Join(f.home, "state")
	}
	cwd := f.cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	cfg.Scripts.Grants = append(cfg.Scripts.Grants, f.grants...)
	grants, err := stdlib.ParseGrants(cfg.Scripts.Grants, cwd)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	st, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	logger := newLogger(errw, slog.LevelWarn)
	fakes := hermesapi.NewFakeModels() // hermes.fake_model's models, as the "fake" provider
	a, err := build(cfg, st, runtimeOpts{cwd: cwd, logger: logger, providers: map[string]model.Provider{hermesapi.FakeProvider: fakes}})
	if err != nil {
		st.Close()
		return nil, err
	}
	env := &scriptEnv{a: a}
	env.handle, _ = a.policy.(*policyHandle)
	if env.handle != nil {
		env.handle.sessions.SetParent(func(id string) string {
			if s, ok := a.eng.Live(id); ok {
				return s.Record().ParentID
			}
			return ""
		})
	}
	env.api = hermesapi.New(hermesapi.Options{
		Engine: a.eng, Version: version, Args: args, Source: "script",
		BindPolicy: env.bindPolicy(cfg),
		Watch:      watch,
		Warn:       func(msg string) { fmt.Fprintln(errw, "hermes:", msg) },
		Fakes:      fakes,
	})
	globals := map[string]any{}
	for k, v := range f.globals {
		globals[k] = v
	}
	if preload {
		mods, err := scripting.StdModules(source, logger, grants, nil)
		if err != nil {
			a.Close()
			return nil, err
		}
		globals["hermes"] = env.api.Module()
		for _, m := range mods {
			globals[m.Name] = m
		}
	}
	env.rt, err = scripting.NewRuntime(lang, source, scripting.RuntimeOptions{
		Modules: []*stdlib.Module{env.api.Module()}, Globals: globals, Stdout: out, Stderr: errw, Logger: logger, Grants: grants,
		MemoryLimit: int64(f.maxMemory) << 20, ModuleRoot: moduleRoot(source, preload, cwd),
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	return env, nil
}

// moduleRoot is where a script's file modules come from: the script's directory, or the
// working directory for the REPL.
func moduleRoot(source string, repl bool, cwd string) string {
	if repl {
		return cwd
	}
	return filepath.Dir(source)
}

// bindPolicy loads a policy file for one session (hermes.create{policy = …}).
func (e *scriptEnv) bindPolicy(cfg *config.Config) func(id, path string) error {
	return func(id, path string) error {
		if e.handle == nil {
			return errors.New("per-session policies are not available")
		}
		o, err := policyOptions(cfg, e.a.eng.Tools(), policy.Set{})
		if err != nil {
			return err
		}
		p, err := scripting.Open(path, o)
		if err != nil {
			return err
		}
		e.handle.add(p)
		e.handle.sessions.Bind(id, p.Own())
		return nil
	}
}

// interruptAll stops every running turn of the script's sessions (Ctrl-C).
func (e *scriptEnv) interruptAll() {
	for _, s := range e.api.Sessions() {
		s.Interrupt("user")
	}
}

// settle waits, for a bounded time, for the interrupted turns of the script's sessions to end,
// so what the user sees next is their final state.
func (e *scriptEnv) settle() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range e.api.Sessions() {
		_ = s.WaitIdle(ctx)
	}
}

// Close ends subscriptions, closes the engine (which ends every session journal, and so the
// event watchers) and the store, then waits for the watchers.
func (e *scriptEnv) Close() error {
	e.api.Close()
	e.rt.Close()
	err := e.a.Close()
	e.watchWG.Wait()
	return err
}

// scriptExit maps a script's end to an exit code and prints why it failed.
func scriptExit(err error, w io.Writer) int {
	if err == nil {
		return 0
	}
	var ex *hermesapi.ExitError
	if errors.As(err, &ex) {
		return ex.Code
	}
	var se *stdlib.ScriptError
	if errors.As(err, &se) {
		fmt.Fprintln(w, se.Trace())
	} else {
		fmt.Fprintln(w, "hermes:", err)
	}
	return 1
}

func runRun(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.err)
	var f scriptFlags
	f.register(fs)
	jsonOut := fs.Bool("json", false, "print every event of the script's sessions as JSON lines on stdout (print goes to stderr)")
	timeout := fs.Duration("timeout", defaultRunTimeout, "stop the script after this long (exit 1); 0: no limit")
	fs.BoolVar(&f.ephemeral, "ephemeral", false, "keep the script's sessions in a temporary home, removed at the end")
	watchFiles := fs.Bool("watch", false, "run again whenever the script (or a file next to it) changes; Ctrl-C stops")
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: hermes run [flags] FILE.js|FILE.ts|FILE.lua [args...]\n\nRuns the script against the engine; no terminal needed. Exit 0 when it ends, 1 on a failed\nassertion or an uncaught error (printed with file:line and stack), 2 on usage errors;\nhermes.exit(n) exits with n (0 to 255).\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if err := f.resolveCwd(); err != nil {
		fmt.Fprintln(io.err, "hermes run:", err)
		return 2
	}
	file := fs.Arg(0)
	if *watchFiles {
		return watchLoop(ctx, io, []string{file}, func(ctx context.Context) int {
			return runScript(ctx, f, file, fs.Args()[1:], *jsonOut, *timeout, io)
		})
	}
	return runScript(ctx, f, file, fs.Args()[1:], *jsonOut, *timeout, io)
}

// defaultRunTimeout bounds hermes run unless --timeout says otherwise: a script that follows
// a live session forever ends instead of hanging a CI job.
const defaultRunTimeout = 30 * time.Minute

// scriptResult is the last line of hermes run --json.
type scriptResult struct {
	Type     string `json:"type"`
	Status   string `json:"status"` // ok, failed, timeout, interrupted
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
}

func resultOf(file string, err error, code int, timedOut bool) scriptResult {
	r := scriptResult{Type: "script.result", Status: "ok", ExitCode: code, File: file}
	switch {
	case code == 130:
		r.Status = "interrupted"
	case timedOut && code != 0:
		r.Status = "timeout"
	case code != 0:
		r.Status = "failed"
	}
	var se *stdlib.ScriptError
	switch {
	case errors.As(err, new(*hermesapi.ExitError)): // hermes.exit(n): the code says it all
	case errors.As(err, &se):
		r.Error, r.File, r.Line = se.Message, se.File, se.Line
	case err != nil:
		r.Error = err.Error()
	}
	return r
}

// runScript is one run of a script (hermes run; again on each change with --watch).
func runScript(ctx context.Context, f scriptFlags, file string, args []string, jsonOut bool, timeout time.Duration, io stdio) int {
	lang, err := scripting.Lang(file)
	if err != nil {
		fmt.Fprintln(io.err, "hermes run:", err)
		return 2
	}
	src, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(io.err, "hermes run:", err)
		return 2
	}
	if f.ephemeral {
		home, remove, err := ephemeralHome()
		if err != nil {
			return fail(io, err)
		}
		defer remove()
		f.home = home
	}
	var enc *json.Encoder
	printTo := io.out
	var watch func(*engine.Session, uint64)
	var env *scriptEnv
	if jsonOut {
		printTo = io.err
		var mu sync.Mutex
		enc = json.NewEncoder(io.out)
		enc.SetEscapeHTML(false)
		watch = func(s *engine.Session, since uint64) {
			sub := s.Subscribe(since)
			env.watchWG.Go(func() {
				defer sub.Close()
				for {
					ev, err := sub.Next(context.Background())
					if err != nil {
						return // the journal closed (engine closed) or this watcher lagged
					}
					mu.Lock()
					_ = enc.Encode(ev)
					mu.Unlock()
				}
			})
		}
	}
	env, err = newScriptEnv(f, lang, file, args, printTo, io.err, watch, false)
	if err != nil {
		return fail(io, err)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timedOut := false
	if timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, timeout, fmt.Errorf("%w: hermes run: --timeout %s reached (0 disables it)", scripting.ErrTimeout, timeout))
		defer stop()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	var sigWG sync.WaitGroup
	sigDone := make(chan struct{})
	interrupted := false
	sigWG.Go(func() {
		select {
		case <-sig:
			interrupted = true
			env.interruptAll()
			cancel(errors.New("interrupted (Ctrl-C)"))
		case <-sigDone:
		}
	})
	runErr := env.rt.Run(runCtx, file, string(src))
	close(sigDone)
	sigWG.Wait()
	if runCtx.Err() != nil && runErr != nil && !errors.As(runErr, new(*hermesapi.ExitError)) {
		timedOut = errors.Is(context.Cause(runCtx), scripting.ErrTimeout)
		env.interruptAll() // a timeout or Ctrl-C also stops the turns the script started
	}
	code := scriptExit(runErr, io.err)
	if err := env.Close(); err != nil && code == 0 {
		fmt.Fprintln(io.err, "hermes:", err)
		code = 1
	}
	if interrupted && code != 0 {
		code = 130
	}
	if jsonOut {
		_ = enc.Encode(resultOf(file, runErr, code, timedOut)) // after Close: the watchers are done
	}
	return code
}
