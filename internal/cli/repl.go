package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"

	"github.com/peterh/liner"
	"golang.org/x/sys/unix"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/stdlib"
)

const replHelp = `The script API is preloaded as hermes (also json, assert, log, time, re, path):
  s = hermes.create({model, cwd, title, policy})   s.run("prompt", {approval, clarify})
  t = s.prompt("…"); for each event in t.events() …; s.answer(id, "once"); t.wait()
  s.steer("…")  s.interrupt()  s.branch({})  s.history({tail})  hermes.sessions({})
Tab completes names; an unfinished statement continues on the next line; Ctrl-C cancels the
running evaluation and the turns of your sessions (not the REPL); Ctrl-D or .exit quits.`

// isTerminal reports whether f is a terminal (a character device with termios).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func runRepl(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("repl", flag.ContinueOnError)
	fs.SetOutput(io.err)
	var f scriptFlags
	f.register(fs)
	lang := fs.String("lang", "js", "language: js or lua")
	plain := fs.Bool("no-tty", false, "read plain lines even on a terminal (no editing, no prompt)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *lang != "js" && *lang != "lua" || fs.NArg() > 0 {
		fmt.Fprintln(io.err, "usage: hermes repl [--lang js|lua] [flags]")
		return 2
	}
	if err := f.resolveCwd(); err != nil {
		fmt.Fprintln(io.err, "hermes repl:", err)
		return 2
	}
	env, err := newScriptEnv(f, *lang, "repl", nil, io.out, io.err, nil, true)
	if err != nil {
		return fail(io, err)
	}
	defer env.Close()
	r := &repl{env: env, io: io, lang: *lang}
	in, tty := io.in.(*os.File)
	out, ttyOut := io.out.(*os.File)
	if tty && ttyOut && !*plain && isTerminal(in) && isTerminal(out) {
		defaultWindowSize(out)
		return r.interactive(ctx)
	}
	return r.lines(ctx)
}

// defaultWindowSize gives a terminal that reports no size (a pty opened without one, some CI
// and container consoles) 80 columns and 24 rows: the line editor needs a width for completion
// and cursor movement.
func defaultWindowSize(f *os.File) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col != 0 {
		return
	}
	ws.Col, ws.Row = 80, max(ws.Row, 24)
	_ = unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, ws)
}

// repl evaluates input in one runtime whose globals are the script API.
type repl struct {
	env  *scriptEnv
	io   stdio
	lang string

	mu     sync.Mutex
	cancel context.CancelCauseFunc // of the evaluation in progress, nil between
}

var errCtrlC = errors.New("interrupted (Ctrl-C)")

// eval runs one input; Ctrl-C meanwhile interrupts it and every running turn of the
// script's sessions.
func (r *repl) eval(ctx context.Context, src string) (any, error) {
	v, _, err := r.evalInterruptible(ctx, src)
	return v, err
}

// evalInterruptible is eval that also reports whether Ctrl-C ended it.
func (r *repl) evalInterruptible(ctx context.Context, src string) (any, bool, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cancel = nil
		r.mu.Unlock()
	}()
	v, err := r.env.rt.Eval(ctx, src)
	return v, err != nil && errors.Is(context.Cause(ctx), errCtrlC), err
}

// interrupt is what Ctrl-C does while an evaluation runs.
func (r *repl) interrupt() bool {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel == nil {
		return false
	}
	r.env.interruptAll()
	cancel(errCtrlC)
	return true
}

// show prints a value or an error; it reports whether the input failed.
func (r *repl) show(v any, err error) bool {
	if err != nil {
		var se *stdlib.ScriptError
		if errors.As(err, &se) {
			fmt.Fprintln(r.io.err, se.Trace())
		} else {
			fmt.Fprintln(r.io.err, "error:", err)
		}
		return true
	}
	if v != nil {
		fmt.Fprintln(r.io.out, stdlib.Format(v))
	}
	return false
}

// command handles REPL dot-commands; done reports .exit.
func (r *repl) command(line string) (handled, done bool) {
	switch strings.TrimSpace(line) {
	case ".exit", ".quit":
		return true, true
	case ".help":
		fmt.Fprintln(r.io.out, replHelp)
		return true, false
	}
	return false, false
}

// lines is the plain mode: input from a pipe or file, no prompt, results on stdout, errors on
// stderr; the exit code is 1 when any input failed.
func (r *repl) lines(ctx context.Context) int {
	sc := bufio.NewScanner(r.io.in)
	sc.Buffer(nil, 16<<20)
	var buf strings.Builder
	failed := false
	for sc.Scan() {
		line := sc.Text()
		if buf.Len() == 0 {
			if handled, done := r.command(line); done {
				break
			} else if handled || strings.TrimSpace(line) == "" {
				continue
			}
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if r.env.rt.Incomplete(buf.String()) {
			continue
		}
		if r.show(r.eval(ctx, buf.String())) {
			failed = true
		}
		buf.Reset()
	}
	if strings.TrimSpace(buf.String()) != "" {
		fmt.Fprintln(r.io.err, "error: unfinished input at end of file")
		failed = true
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(r.io.err, "error:", err)
		failed = true
	}
	if failed {
		return 1
	}
	return 0
}

// interactive is the liner console.
func (r *repl) interactive(ctx context.Context) int {
	ln := liner.NewLiner()
	defer ln.Close()
	ln.SetCtrlCAborts(true)
	ln.SetMultiLineMode(true)
	ln.SetTabCompletionStyle(liner.TabPrints)
	ln.SetCompleter(r.env.rt.Complete)
	cfg, _ := config.Load(os.Getenv)
	histPath := ""
	if cfg != nil {
		histPath = filepath.Join(cfg.Home, "repl_history")
		if f, err := os.Open(histPath); err == nil {
			ln.ReadHistory(f)
			f.Close()
		}
	}
	// Between prompts the terminal is in cooked mode and Ctrl-C is a signal: it interrupts the
	// evaluation in progress. At a prompt liner reads it as a key.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() {
		for {
			select {
			case <-sig:
				r.interrupt()
			case <-stop:
				return
			}
		}
	})
	fmt.Fprintf(r.io.out, "hermes repl (%s) — hermes is preloaded; .help for help, Ctrl-D to quit\n", r.lang)
	prompt := r.lang + "> "
	var buf strings.Builder
	for {
		p := prompt
		if buf.Len() > 0 {
			p = "... "
		}
		line, err := ln.Prompt(p)
		if errors.Is(err, liner.ErrPromptAborted) {
			if buf.Len() == 0 {
				fmt.Fprintln(r.io.out, "(Ctrl-D or .exit to quit)")
			}
			buf.Reset()
			continue
		}
		if err != nil { // io.EOF: Ctrl-D
			fmt.Fprintln(r.io.out)
			break
		}
		if buf.Len() == 0 {
			if handled, done := r.command(line); done {
				break
			} else if handled || strings.TrimSpace(line) == "" {
				continue
			}
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if r.env.rt.Incomplete(buf.String()) {
			continue
		}
		entry := strings.TrimSpace(buf.String())
		buf.Reset()
		// A multi-line entry is kept as one history line, as liner stores one entry a line.
		ln.AppendHistory(strings.Join(strings.Fields(strings.ReplaceAll(entry, "\n", " ")), " "))
		v, interrupted, err := r.evalInterruptible(ctx, entry)
		if interrupted {
			r.env.settle()
			fmt.Fprintln(r.io.err, "[interrupted]")
			continue
		}
		r.show(v, err)
	}
	if histPath != "" {
		if f, err := os.OpenFile(histPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
			ln.WriteHistory(f)
			f.Close()
		}
	}
	return 0
}
