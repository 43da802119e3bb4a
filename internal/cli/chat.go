package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
)

type chatFlags struct {
	query   string
	session string
	model   string
	approve string
	record  string
	cwd     string
	policy  string
	verbose bool
}

func runChat(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(io.err)
	var f chatFlags
	fs.StringVar(&f.query, "q", "", "run one turn with this prompt and exit")
	fs.StringVar(&f.session, "session", "", "continue this session id")
	fs.StringVar(&f.model, "model", "", "model as provider:model (default HERMES_MODEL or config)")
	fs.StringVar(&f.approve, "approve", "", "answer approvals without asking: once | deny (default: ask on the terminal, deny without one)")
	fs.StringVar(&f.record, "record", "", "record every live model call into this cassette file")
	fs.StringVar(&f.cwd, "cwd", "", "working directory for a new session (default: current)")
	fs.StringVar(&f.policy, "policy", "", "policy script (.js or .lua) deciding approvals, busy input, steer and routing (default HERMES_POLICY, then $HERMES_HOME/policy.js|lua)")
	fs.BoolVar(&f.verbose, "v", false, "show reasoning and tool results on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if f.approve != "" && f.approve != "once" && f.approve != "deny" {
		fmt.Fprintln(io.err, "hermes chat: --approve must be once or deny")
		return 2
	}
	queried := false
	fs.Visit(func(fl *flag.Flag) { queried = queried || fl.Name == "q" })
	if queried && strings.TrimSpace(f.query) == "" {
		// An unset variable in a CI job (-q "$PROMPT"): not the interactive loop, not a pass.
		fmt.Fprintln(io.err, "hermes chat: -q needs a prompt (it was empty)")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(io.err, "hermes chat: unexpected argument %q (the prompt goes after -q, quoted)\n", fs.Arg(0))
		return 2
	}
	cwd, err := flagCwd(f.cwd)
	if err != nil {
		fmt.Fprintln(io.err, "hermes chat:", err)
		return 2
	}
	f.cwd = cwd
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	if f.policy != "" {
		cfg.Policy = f.policy
	}
	st, err := openStore(cfg)
	if err != nil {
		return fail(io, err)
	}
	a, err := build(cfg, st, runtimeOpts{record: f.record, cwd: f.cwd})
	if err != nil {
		st.Close()
		return fail(io, err)
	}
	defer func() {
		if err := a.Close(); err != nil {
			fmt.Fprintln(io.err, "hermes:", err)
		}
	}()
	var s *engine.Session
	if f.session != "" {
		s, err = a.eng.Open(ctx, f.session)
		// The CLI is the local owner; a session an API key of hermes serve created is that
		// key's (see hermes sessions -all).
		if err == nil && !engine.LocalOwner.Sees(s.Record().Principal) {
			err = fmt.Errorf("session %s belongs to another principal (an API key of hermes serve)", f.session)
		}
		if err == nil && f.model != "" {
			_, err = s.SetModel(ctx, f.model)
		}
	} else {
		s, err = a.eng.Create(ctx, engine.CreateOptions{Model: f.model, Source: "cli"})
	}
	if err != nil {
		return fail(io, err)
	}
	term := newTerminal(io, f)
	term.reloadMCP = a.mcp.Reload
	if f.query != "" {
		out, err := term.turn(ctx, s, f.query)
		if err != nil {
			return fail(io, err)
		}
		fmt.Fprintf(io.err, "[session %s · %s]\n", s.ID(), reasonClass(out))
		return exitCode(out)
	}
	return term.interactive(ctx, s)
}

// reasonClass is an outcome's exit reason for a person: a failed turn's reason without the
// error it carries in parentheses (provider_error(…) is provider_error), since the error line
// says it whole; a completed turn's reason unchanged (text_response(finish_reason=stop)).
func reasonClass(o engine.Outcome) string {
	if o.Status == engine.StatusCompleted || o.Error == "" {
		return o.ExitReason
	}
	class, _, _ := strings.Cut(o.ExitReason, "(")
	return class
}

// exitCode maps an outcome: 0 completed, 1 failed, 130 cancelled (as for SIGINT).
func exitCode(o engine.Outcome) int {
	switch o.Status {
	case engine.StatusCompleted:
		return 0
	case engine.StatusCancelled:
		return 130
	}
	return 1
}

// terminal renders a session's events on stdout/stderr and answers requests from the keyboard
// (or from --approve when there is none).
type terminal struct {
	io      stdio
	f       chatFlags
	lines   *bufio.Reader
	isTTY   bool
	linesMu sync.Mutex
	// reloadMCP re-reads the MCP server configuration in the running process (/reload-mcp);
	// nil where there is nothing to reload.
	reloadMCP func(ctx context.Context) []mcptool.Status
}

func newTerminal(io stdio, f chatFlags) *terminal {
	t := &terminal{io: io, f: f, lines: bufio.NewReader(io.in)}
	if file, ok := io.in.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS)
		t.isTTY = err == nil // /dev/null is a character device too; only a terminal has termios
	}
	return t
}

func (t *terminal) readLine() (string, error) {
	t.linesMu.Lock()
	defer t.linesMu.Unlock()
	s, err := t.lines.ReadString('\n')
	if err != nil && s == "" {
		return "", err
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// turn submits one prompt and renders until its outcome. Ctrl-C interrupts the turn.
func (t *terminal) turn(ctx context.Context, s *engine.Session, prompt string) (engine.Outcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	adm, f, err := s.Run(ctx, engine.Prompt{Text: prompt, Origin: "cli"})
	if err != nil {
		return engine.Outcome{}, err
	}
	defer f.Close()
	if adm.Status == engine.AdmitCommand {
		fmt.Fprintln(t.io.out, adm.Message)
		return engine.Outcome{Status: engine.StatusCompleted, ExitReason: "command"}, nil
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-sig:
			fmt.Fprintln(t.io.err, "\n[interrupting…]")
			s.Interrupt("user")
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	midLine := false
	shown := "" // the last error event printed: the outcome does not say it again
	for ev, err := range f.Events(ctx) {
		if err != nil {
			return engine.Outcome{}, err
		}
		switch d := ev.Data.(type) {
		case nil:
			switch ev.Type {
			case engine.EvMessageDelta:
				fmt.Fprint(t.io.out, ev.Text)
				midLine = !strings.HasSuffix(ev.Text, "\n")
			case engine.EvReasoningDelta:
				if t.f.verbose {
					fmt.Fprint(t.io.err, ev.Text)
				}
			}
		case engine.ToolStart:
			if midLine {
				fmt.Fprintln(t.io.out)
				midLine = false
			}
			fmt.Fprintf(t.io.err, "⚙ %s %s\n", d.Name, clipLine(string(d.Args), 160))
		case engine.ToolComplete:
			mark := "✓"
			if d.Result.IsError {
				mark = "✗"
			}
			fmt.Fprintf(t.io.err, "%s %s (%s)\n", mark, d.Name, d.Duration.Round(time.Millisecond))
			if t.f.verbose || d.Result.IsError {
				fmt.Fprintln(t.io.err, indent(clipLine(d.Result.Content, 2000)))
			}
		case engine.SteerDelivered:
			fmt.Fprintf(t.io.err, "↳ steer delivered: %s\n", d.Text)
		case engine.Request:
			wg.Add(1)
			go func() { defer wg.Done(); t.answer(ctx, s, d) }()
		case engine.RequestCancel:
			fmt.Fprintf(t.io.err, "[%s request %s withdrawn: %s]\n", d.Kind, d.ID, d.Reason)
		case engine.ErrorInfo:
			fmt.Fprintf(t.io.err, "error: %s\n", d.Message)
			shown = d.Message
		case engine.Outcome:
			out := d
			if midLine || out.Text != "" && !strings.HasSuffix(out.Text, "\n") {
				fmt.Fprintln(t.io.out)
			}
			if out.PendingSteer != "" {
				fmt.Fprintf(t.io.err, "[pending steer, not delivered: %s]\n", out.PendingSteer)
			}
			if out.Status != engine.StatusCompleted {
				msg := out.ExitReason
				if out.Error != "" && out.Error != shown {
					msg = reasonClass(out) + ": " + out.Error
				} else if out.Error != "" {
					msg = reasonClass(out) // said by the error line above
				}
				fmt.Fprintf(t.io.err, "[turn %s: %s]\n", out.Status, msg)
			}
			cancel()
			return out, nil
		}
	}
	// Steered into or rejected by a running turn (a session another surface uses).
	fmt.Fprintf(t.io.err, "[prompt %s: %s]\n", adm.Status, adm.Message)
	return engine.Outcome{Status: engine.StatusCompleted, ExitReason: adm.Status}, nil
}

// answer handles one server-to-client request on the terminal.
func (t *terminal) answer(ctx context.Context, s *engine.Session, req engine.Request) {
	switch req.Kind {
	case engine.KindApproval:
		desc, _ := req.Payload["description"].(string)
		cmd, _ := req.Payload["command"].(string)
		if cmd == "" {
			cmd = fmt.Sprint(req.Payload["tool"])
		}
		fmt.Fprintf(t.io.err, "⚠ approval needed (%s): %s\n", desc, cmd)
		choice := t.f.approve
		if choice == "" && t.isTTY {
			fmt.Fprint(t.io.err, "  allow? [o]nce / [s]ession / [a]lways / [d]eny: ")
			line, err := t.readLine()
			if err != nil {
				line = "d"
			}
			choice = map[string]string{"o": "once", "once": "once", "s": "session", "session": "session", "a": "always", "always": "always"}[strings.ToLower(strings.TrimSpace(line))]
		}
		if choice == "" {
			choice = engine.ChoiceDeny
		}
		fmt.Fprintf(t.io.err, "  → %s\n", choice)
		_ = s.Answer(req.ID, map[string]any{"choice": choice})
	case engine.KindClarify:
		q, _ := req.Payload["question"].(string)
		if !t.isTTY {
			_ = s.Withdraw(req.ID, "no terminal to ask: "+q)
			return
		}
		fmt.Fprintf(t.io.err, "? %s\n", q)
		if ch, ok := req.Payload["choices"].([]string); ok {
			for i, c := range ch {
				fmt.Fprintf(t.io.err, "  %d) %s\n", i+1, c)
			}
		}
		fmt.Fprint(t.io.err, "> ")
		line, err := t.readLine()
		if err != nil {
			_ = s.Withdraw(req.ID, "no answer")
			return
		}
		_ = s.Answer(req.ID, map[string]any{"answer": line})
	default:
		if !t.isTTY {
			_ = s.Withdraw(req.ID, "no terminal")
			return
		}
		fmt.Fprintf(t.io.err, "%s requested: ", req.Kind)
		line, err := t.readLine()
		if err != nil {
			_ = s.Withdraw(req.ID, "no answer")
			return
		}
		_ = s.Answer(req.ID, map[string]any{"value": line})
	}
}

// interactive runs a read-prompt loop until EOF or /exit.
func (t *terminal) interactive(ctx context.Context, s *engine.Session) int {
	fmt.Fprintf(t.io.err, "hermes chat — session %s (%s). /model provider:model switches, /reload-mcp re-reads the MCP servers, /exit quits.\n", s.ID(), s.Record().Model)
	last := 0
	for {
		fmt.Fprint(t.io.err, "› ")
		line, err := t.readLine()
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(t.io.err)
			return last
		}
		if err != nil {
			return fail(t.io, err)
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return last
		case "/reload-mcp":
			t.reportMCP(ctx)
			continue
		}
		out, err := t.turn(ctx, s, line)
		if err != nil {
			fmt.Fprintln(t.io.err, "error:", err)
			last = 1
			continue
		}
		last = exitCode(out)
	}
}

// reportMCP reloads the MCP servers from config.yaml (the session and its history stay) and
// prints one line per server.
func (t *terminal) reportMCP(ctx context.Context) {
	if t.reloadMCP == nil {
		fmt.Fprintln(t.io.err, "no MCP servers to reload")
		return
	}
	st := t.reloadMCP(ctx)
	if len(st) == 0 {
		fmt.Fprintln(t.io.err, "mcp: no servers configured")
	}
	for _, s := range st {
		state := fmt.Sprintf("connected, %d tools", s.Tools)
		if !s.Connected {
			state = "not connected: " + s.Error
		}
		fmt.Fprintf(t.io.err, "mcp %s (%s): %s\n", s.Name, s.Transport, state)
	}
}

func clipLine(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
