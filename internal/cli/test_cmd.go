package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/scripting"
)

// defaultTestTimeout bounds one test unless --timeout says otherwise.
const defaultTestTimeout = 5 * time.Minute

const testUsage = `usage: hermes test [flags] [FILE|DIR]...

Runs the tests that *_test.js, *_test.lua and *_test.ts files register with test(name, fn) and
describe(name, fn) (default: the current directory, recursively). Each test runs on its own:
the sessions it created are closed after it, and a failure does not stop the next. Each file
gets a fresh engine whose sessions live in a temporary home (--ephemeral=false keeps them in
the configured one). Exit 0 when every test passed, 1 when one failed or a file did not load,
2 on usage errors.

Flags:`

func runTest(ctx context.Context, args []string, io stdio) int {
	fset := flag.NewFlagSet("test", flag.ContinueOnError)
	fset.SetOutput(io.err)
	var f scriptFlags
	f.register(fset)
	fset.BoolVar(&f.ephemeral, "ephemeral", true, "run each file against a temporary home, removed at the end")
	filter := fset.String("filter", "", "run only the tests whose full name (\"describe > name\") matches this regular expression")
	reporter := fset.String("reporter", "pretty", "output format: pretty, tap, junit (JUnit XML) or json (a JSON object a line)")
	timeout := fset.Duration("timeout", defaultTestTimeout, "stop a test that runs longer than this (it fails); 0: no limit")
	watch := fset.Bool("watch", false, "run again whenever a file under the given paths changes; Ctrl-C stops")
	fset.Usage = func() {
		fmt.Fprintln(io.err, testUsage)
		fset.PrintDefaults()
	}
	paths, err := parseInterleaved(fset, args)
	if err != nil {
		return 2
	}
	if err := f.resolveCwd(); err != nil {
		fmt.Fprintln(io.err, "hermes test:", err)
		return 2
	}
	var re *regexp.Regexp
	if *filter != "" {
		var err error
		if re, err = regexp.Compile(*filter); err != nil {
			fmt.Fprintln(io.err, "hermes test: --filter:", err)
			return 2
		}
	}
	if !slices.Contains(scripting.Reporters, *reporter) {
		fmt.Fprintf(io.err, "hermes test: unknown --reporter %q (want %s)\n", *reporter, strings.Join(scripting.Reporters, ", "))
		return 2
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	once := func(ctx context.Context) int {
		files, err := testFiles(paths)
		if err != nil {
			fmt.Fprintln(io.err, "hermes test:", err)
			return 2
		}
		if len(files) == 0 {
			fmt.Fprintf(io.err, "hermes test: no *_test.js, *_test.lua or *_test.ts files under %s\n", strings.Join(paths, ", "))
			return 2
		}
		rep, err := scripting.NewReporter(*reporter, io.out)
		if err != nil {
			fmt.Fprintln(io.err, "hermes test:", err)
			return 2
		}
		return runTestFiles(ctx, f, files, re, *timeout, rep, scripting.CapturesOutput(*reporter), io)
	}
	if *watch {
		return watchLoop(ctx, io, paths, once)
	}
	return once(ctx)
}

// isTestFile reports whether name is a test file by its name.
func isTestFile(name string) bool {
	for _, ext := range []string{"_test.js", "_test.lua", "_test.ts"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// testFiles expands the arguments: a file is taken as is, a directory is searched (skipping
// hidden directories and node_modules) for test files, in lexical order.
func testFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != p && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && isTestFile(d.Name()) {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// switchWriter sends what tests print either through (pretty) or into the current test's
// buffer (the machine reporters).
type switchWriter struct {
	mu      sync.Mutex
	through io.Writer
	buf     *bytes.Buffer
}

func (w *switchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf != nil {
		return w.buf.Write(p)
	}
	return w.through.Write(p)
}

// capture starts a new buffer (nil: pass through) and returns what the last one held.
func (w *switchWriter) capture(on bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out string
	if w.buf != nil {
		out = w.buf.String()
	}
	w.buf = nil
	if on {
		w.buf = &bytes.Buffer{}
	}
	return out
}

func runTestFiles(ctx context.Context, f scriptFlags, files []string, filter *regexp.Regexp, timeout time.Duration, rep scripting.Reporter, capture bool, io stdio) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var sum scripting.Summary
	matched := 0
	for _, file := range files {
		if ctx.Err() != nil {
			break
		}
		sum.Files++
		runTestFile(ctx, f, file, filter, timeout, capture, io, func(r scripting.TestResult) {
			if !errors.Is(r.Err, errFilterMismatch) {
				matched++
			}
			if r.Pass() {
				sum.Passed++
			} else {
				sum.Failed++
			}
			rep.Result(r)
		})
	}
	sum.Duration = time.Since(start)
	if filter != nil && matched == 0 && ctx.Err() == nil {
		fmt.Fprintf(io.err, "hermes test: no test matched --filter %q\n", filter.String())
	}
	if err := rep.End(sum); err != nil {
		fmt.Fprintln(io.err, "hermes test:", err)
		return 1
	}
	if ctx.Err() != nil {
		return 130
	}
	if sum.Failed > 0 {
		return 1
	}
	return 0
}

// errFilterMismatch is the result of a test --filter left out: not run, counted as filtered out.
var errFilterMismatch = fmt.Errorf("%w by --filter", scripting.ErrFiltered)

// runTestFile loads one test file in a fresh engine and runs its tests one by one, reporting
// each as it ends.
func runTestFile(ctx context.Context, f scriptFlags, file string, filter *regexp.Regexp, timeout time.Duration, capture bool, io stdio, report func(scripting.TestResult)) {
	loadFail := func(err error, d time.Duration, out string) {
		report(scripting.TestResult{File: file, Err: err, Duration: d, Output: out})
	}
	start := time.Now()
	lang, err := scripting.Lang(file)
	if err != nil {
		loadFail(err, 0, "")
		return
	}
	src, err := os.ReadFile(file)
	if err != nil {
		loadFail(err, 0, "")
		return
	}
	if f.ephemeral {
		home, remove, err := ephemeralHome()
		if err != nil {
			loadFail(err, 0, "")
			return
		}
		defer remove()
		f.home = home
	}
	var tests scripting.Tests
	f.globals = tests.Globals()
	out := &switchWriter{through: io.out}
	out.capture(capture)
	env, err := newScriptEnv(f, lang, file, nil, out, io.err, nil, false)
	if err != nil {
		loadFail(err, time.Since(start), out.capture(false))
		return
	}
	defer env.Close()
	bounded := func(ctx context.Context) (context.Context, context.CancelFunc) {
		if timeout <= 0 {
			return context.WithCancel(ctx)
		}
		return context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w: the test ran past --timeout %s", scripting.ErrTimeout, timeout))
	}
	loadCtx, cancel := bounded(ctx)
	err = env.rt.Run(loadCtx, file, string(src))
	cancel()
	if err != nil {
		env.interruptAll()
		loadFail(err, time.Since(start), out.capture(false))
		return
	}
	for _, c := range tests.Cases() {
		if filter != nil && !filter.MatchString(c.Name) {
			report(scripting.TestResult{File: file, Name: c.Name, Err: errFilterMismatch})
			continue
		}
		if ctx.Err() != nil {
			break
		}
		held := len(env.api.Sessions())
		out.capture(capture)
		t0 := time.Now()
		testCtx, cancel := bounded(ctx)
		err := tests.Run(testCtx, env.rt, c)
		cancel()
		// The test's sessions end with it: their turns stop, so the next test starts clean.
		closeCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		for _, s := range env.api.Sessions()[held:] {
			if s.Status() == engine.StatusClosed {
				continue
			}
			if cerr := s.Close(closeCtx, "test ended"); cerr != nil && err == nil && !errors.Is(cerr, context.Canceled) {
				err = fmt.Errorf("closing session %s after the test: %w", s.ID(), cerr)
			}
		}
		done()
		report(scripting.TestResult{File: file, Name: c.Name, Err: err, Duration: time.Since(t0), Output: out.capture(false)})
	}
}

// watchLoop runs fn, then again whenever a script file under paths (or next to a file in
// paths) changes, until ctx ends (Ctrl-C). It polls modification times, so it needs no
// file-notification support from the system.
func watchLoop(ctx context.Context, io stdio, paths []string, fn func(ctx context.Context) int) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	last := watchState(paths)
	code := fn(ctx)
	fmt.Fprintf(io.err, "hermes: watching %s for changes (Ctrl-C stops)\n", strings.Join(paths, ", "))
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return code
		case <-tick.C:
			if cur := watchState(paths); cur != last {
				last = cur
				code = fn(ctx)
				fmt.Fprintf(io.err, "hermes: exit %d; watching for changes (Ctrl-C stops)\n", code)
			}
		}
	}
}

// watchState fingerprints the script files under paths: name, size and modification time.
func watchState(paths []string) string {
	var b strings.Builder
	add := func(path string, d fs.DirEntry) {
		switch filepath.Ext(path) {
		case ".js", ".lua", ".ts", ".json", ".mjs", ".cjs":
		default:
			return
		}
		if info, err := d.Info(); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", path, info.Size(), info.ModTime().UnixNano())
		}
	}
	for _, p := range paths {
		root := p
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			root = filepath.Dir(p)
		}
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() {
				add(path, d)
			}
			return nil
		})
	}
	return b.String()
}

// parseInterleaved parses flags wherever they stand among the paths (`hermes test dir --filter
// x`, as deno test and go test take them) and returns the paths; after "--" every argument is
// a path.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var paths []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(paths, rest...), nil
		}
		if len(rest) == 0 {
			return paths, nil
		}
		paths, args = append(paths, rest[0]), rest[1:]
	}
}
