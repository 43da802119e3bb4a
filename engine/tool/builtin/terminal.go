package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/toolenv"
)

// Terminal limits and defaults.
const (
	DefaultTimeout       = 180  // seconds a foreground command may run
	MaxTimeout           = 3600 // seconds; longer work belongs in the background
	DefaultOutputCap     = 50_000
	DefaultBackgroundCap = 256 << 10
	DefaultKillGrace     = 3 * time.Second
)

// Terminal is the `terminal` tool: it runs a shell command in the session working directory
// (or a workdir inside it), in its own process group, in the foreground with a timeout or in
// the background as an entry of Env.Processes.
//
// A foreground command that exits non-zero is not an IsError result: its output and exit code
// are what the model needs, and many useful commands (grep, diff, test runners) use the code to
// answer. The exit code is stated on the last line of the content and in Meta["exit_code"], so
// surfaces can still show the call as failed. A command that times out or is interrupted is an
// IsError result.
type Terminal struct {
	// CheckCommand is the dangerous-command policy consulted by the Guard method Check (a
	// field cannot share that name); nil means every command is safe.
	CheckCommand func(command string) tool.Verdict
	// OutputCap is the byte budget of a foreground result (head and tail are kept); 0 means
	// DefaultOutputCap.
	OutputCap int
	// BackgroundCap is the byte budget kept per background process; 0 means
	// DefaultBackgroundCap.
	BackgroundCap int
	// KillGrace is how long a process group has between SIGTERM and SIGKILL; 0 means
	// DefaultKillGrace.
	KillGrace time.Duration
	// Shell runs the command as `Shell -c command`; empty means bash when it is installed,
	// else /bin/sh.
	Shell string
	// Env decides which of Hermes' environment variables commands see. The zero value passes
	// the allow-list only (toolenv.Allowed), never Hermes' or the providers' API keys.
	Env toolenv.Policy
}

var _ tool.Guard = (*Terminal)(nil)

var terminalSchema = func() *schema {
	lo, hi := intRange(1, MaxTimeout)
	return object([]string{"command"}, map[string]*schema{
		"command": {Type: "string", Description: "The shell command to run (bash syntax; pipes, &&, redirections and " +
			"subshells work). It runs non-interactively with stdin closed: pass flags such as -y, and avoid " +
			"editors and pagers."},
		"background": {Type: "boolean", Default: false, Description: "Start the command and return at once with a " +
			"process id instead of waiting. Use it for servers, watchers and anything long-running (do not use " +
			"'&'); check on it with the process tool."},
		"timeout": {Type: "integer", Minimum: lo, Maximum: hi, Default: DefaultTimeout, Description: "Seconds to wait " +
			"for a foreground command before its whole process tree is killed. Ignored with background."},
		"workdir": {Type: "string", Description: "Directory to run in, relative to the session working directory " +
			"(which is the default); it must stay inside it."},
	})
}()

type terminalArgs struct {
	Command    string `json:"command"`
	Background bool   `json:"background"`
	Timeout    int    `json:"timeout"`
	Workdir    string `json:"workdir"`
}

// Spec describes the tool to the model.
func (t *Terminal) Spec() model.ToolSpec {
	return toolSpec("terminal",
		"Run a shell command in the session working directory and return its combined stdout and stderr "+
			"followed by its exit code. Output longer than the cap keeps its beginning and end. A foreground "+
			"command is killed (with everything it started) when the timeout expires. For long-running "+
			"processes set background=true and manage them with the process tool. Prefer read_file, "+
			"search_files, write_file and patch over cat, grep, sed and echo for working with files.",
		terminalSchema)
}

// Check implements tool.Guard: it hands the command to the dangerous-command policy. Arguments
// that do not decode get a safe verdict because Call rejects them before anything runs.
func (t *Terminal) Check(args json.RawMessage, env *tool.Env) tool.Verdict {
	var a terminalArgs
	if err := decodeArgs("terminal", terminalSchema, args, &a); err != nil {
		return tool.Verdict{}
	}
	var v tool.Verdict
	if t.CheckCommand != nil {
		v = t.CheckCommand(a.Command)
	}
	if v.Command == "" {
		v.Command = a.Command
	}
	return v
}

// Call runs the command.
func (t *Terminal) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a terminalArgs
	if err := decodeArgs("terminal", terminalSchema, c.Args, &a); err != nil {
		return argsResult(err), nil
	}
	if strings.TrimSpace(a.Command) == "" {
		return tool.Errorf("command is empty"), nil
	}
	dir, shown, res := workdir(env, a.Workdir)
	if res != nil {
		return *res, nil
	}
	if ctx.Err() != nil {
		return tool.Errorf("interrupted before the command started"), nil
	}
	if a.Background {
		return t.background(a, dir, shown, env)
	}
	timeout := a.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}

	out := newCapture(orDefault(t.OutputCap, DefaultOutputCap))
	var pump *progressPump
	var tee io.Writer
	if env.Progress != nil {
		pump = newProgressPump(env.Progress)
		tee = pump
	}
	p, err := startProc(t.shell(), a.Command, dir, t.Env.Environ(dir, nil), out, tee)
	if err != nil {
		if pump != nil {
			pump.close()
		}
		return tool.Result{}, fmt.Errorf("terminal: start shell: %w", err)
	}
	timer := time.NewTimer(time.Duration(timeout) * time.Second)
	var ended, endedKey string // why the command was killed, and the Meta flag saying so
	select {
	case <-p.done:
	case <-timer.C:
		ended, endedKey = fmt.Sprintf("command timed out after %ds; its process group was killed", timeout), "timed_out"
		_ = p.stop(t.grace())
	case <-ctx.Done():
		ended, endedKey = "interrupted; the command's process group was killed", "interrupted"
		_ = p.stop(t.grace())
	}
	timer.Stop()
	if pump != nil {
		pump.close() // the reader has finished: done is closed only after it
	}

	text, truncated := out.String()
	code, _ := p.exited()
	var b strings.Builder
	if text == "" {
		b.WriteString("(no output)\n")
	} else {
		b.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
	}
	if ended != "" {
		fmt.Fprintf(&b, "[%s (exit code %d)]", ended, code)
	} else {
		fmt.Fprintf(&b, "[exit code %d]", code)
	}
	meta := map[string]any{
		"command":      a.Command,
		"exit_code":    code,
		"truncated":    truncated,
		"output_bytes": out.Total(),
	}
	if shown != "" {
		meta["workdir"] = shown
	}
	if endedKey != "" {
		meta[endedKey] = true
	}
	return tool.Result{Content: b.String(), IsError: ended != "", Meta: meta}, nil
}

func (t *Terminal) background(a terminalArgs, dir, shown string, env *tool.Env) (tool.Result, error) {
	if env.Processes == nil {
		return tool.Errorf("background processes are not available in this session; run the command in the foreground"), nil
	}
	out := newCapture(orDefault(t.BackgroundCap, DefaultBackgroundCap))
	// Streamed output waits for the process id, which exists once the process is added.
	var id string
	named := make(chan struct{})
	var pump *progressPump
	var tee io.Writer
	if env.Processes.Streams() {
		pump = newProgressPump(func(chunk string) {
			<-named
			env.Processes.OnOutput(id, chunk)
		})
		tee = pump
	}
	p, err := startProc(t.shell(), a.Command, dir, t.Env.Environ(dir, nil), out, tee)
	if err != nil {
		if pump != nil {
			close(named)
			pump.close()
		}
		return tool.Result{}, fmt.Errorf("terminal: start shell: %w", err)
	}
	grace := t.grace()
	tp := &tool.Process{
		Command: a.Command,
		PID:     p.pid(),
		Stop:    func() error { return p.stop(grace) },
		Output: func() string {
			s, _ := out.String()
			return s
		},
		Done: p.done,
		ExitCode: func() int {
			code, ok := p.exited()
			if !ok {
				return -1
			}
			return code
		},
	}
	id = env.Processes.Add(tp)
	close(named)
	if pump != nil {
		go func() {
			<-p.done
			pump.close() // the reader has finished: done is closed only after it
			if env.Processes.OnExit != nil {
				env.Processes.OnExit(id, tp.ExitCode())
			}
		}()
	}
	meta := map[string]any{"command": a.Command, "process_id": id, "pid": tp.PID, "background": true}
	if shown != "" {
		meta["workdir"] = shown
	}
	return tool.Result{
		Content: fmt.Sprintf("Started background process %s (pid %d). Use the process tool with id %q: "+
			"action \"poll\" for its status and latest output, \"log\" for its output, \"wait\" to wait for it "+
			"to exit, \"kill\" to stop it.", id, tp.PID, id),
		Meta: meta,
	}, nil
}

// workdir resolves the directory a command runs in. It returns the directory, its display
// form ("" for the session working directory) or a model-visible error.
func workdir(env *tool.Env, wd string) (dir, shown string, res *tool.Result) {
	if wd == "" {
		cwd, err := sessionCwd(env)
		if err != nil {
			r := tool.Errorf("%v", err)
			return "", "", &r
		}
		return cwd, "", nil
	}
	abs, realCwd, err := resolve(env, wd)
	if err != nil {
		r := tool.Errorf("workdir: %v", err)
		return "", "", &r
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		r := tool.Errorf("workdir %q does not exist", wd)
		return "", "", &r
	case !fi.IsDir():
		r := tool.Errorf("workdir %q is not a directory", wd)
		return "", "", &r
	}
	return abs, displayPath(realCwd, abs), nil
}

func (t *Terminal) shell() string {
	if t.Shell != "" {
		return t.Shell
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

func (t *Terminal) grace() time.Duration {
	if t.KillGrace > 0 {
		return t.KillGrace
	}
	return DefaultKillGrace
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
