//go:build unix

package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/tool"
)

// eventually polls cond until it holds, failing the test after a generous deadline. It waits
// for an outcome that has no channel to wait on (another process's state); it asserts nothing
// about how long that takes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone reports whether pid no longer runs. A zombie counts as gone: it has exited and only
// waits for its (new) parent to reap it.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	// Field 3, after the parenthesised command name, is the state.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X')
}

var childRe = regexp.MustCompile(`child=(\d+)`)

func childPID(t *testing.T, out string) int {
	t.Helper()
	m := childRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no child pid in output %q", out)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

func TestTerminalRuns(t *testing.T) {
	env := newEnv(t)
	term := &Terminal{}
	res := mustOK(t, call(t, term, env, map[string]any{"command": "echo out; echo err >&2; pwd"}))
	for _, w := range []string{"out\n", "err\n", env.Cwd + "\n", "[exit code 0]"} {
		if !strings.Contains(res.Content, w) {
			t.Fatalf("output %q lacks %q", res.Content, w)
		}
	}
	if res.Meta["exit_code"] != 0 || res.Meta["command"] != "echo out; echo err >&2; pwd" || res.Meta["truncated"] != false {
		t.Fatalf("meta %v", res.Meta)
	}

	// A non-zero exit is information, not a tool failure.
	res = mustOK(t, call(t, term, env, map[string]any{"command": "echo oops; exit 3"}))
	if !strings.HasSuffix(res.Content, "oops\n[exit code 3]") || res.Meta["exit_code"] != 3 {
		t.Fatalf("exit 3: %q %v", res.Content, res.Meta)
	}

	res = mustOK(t, call(t, term, env, map[string]any{"command": "true"}))
	if res.Content != "(no output)\n[exit code 0]" {
		t.Fatalf("no output: %q", res.Content)
	}

	// stdin is closed: a command that reads it does not hang.
	res = mustOK(t, call(t, term, env, map[string]any{"command": "cat; echo done"}))
	if !strings.Contains(res.Content, "done") {
		t.Fatalf("cat: %q", res.Content)
	}
}

func TestTerminalWorkdir(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "sub/f.txt", "x")
	term := &Terminal{}
	res := mustOK(t, call(t, term, env, map[string]any{"command": "pwd; ls", "workdir": "sub"}))
	if !strings.Contains(res.Content, env.Cwd+"/sub\nf.txt\n") || res.Meta["workdir"] != "sub" {
		t.Fatalf("workdir: %q %v", res.Content, res.Meta)
	}
	mustFail(t, call(t, term, env, map[string]any{"command": "pwd", "workdir": ".."}), "outside the working directory")
	mustFail(t, call(t, term, env, map[string]any{"command": "pwd", "workdir": "nope"}), "does not exist")
	mustFail(t, call(t, term, env, map[string]any{"command": "pwd", "workdir": "sub/f.txt"}), "not a directory")
}

func TestTerminalArgErrors(t *testing.T) {
	env := newEnv(t)
	term := &Terminal{}
	mustFail(t, call(t, term, env, `{"command": 5}`), `invalid arguments for terminal: field "command" must be a string`)
	mustFail(t, call(t, term, env, `{}`), `missing required field "command"`)
	mustFail(t, call(t, term, env, `{"command":"true","timeout":7200}`), `field "timeout" must be at most 3600`)
	mustFail(t, call(t, term, env, `{"command":"true","timeout":0}`), `must be at least 1`)
	mustFail(t, call(t, term, env, `{"command":"  "}`), "command is empty")
	mustFail(t, call(t, term, env, `{"command":"true","pty":true}`), `unknown field "pty"`)
}

func TestTerminalGuard(t *testing.T) {
	env := newEnv(t)
	var seen string
	term := &Terminal{CheckCommand: func(cmd string) tool.Verdict {
		seen = cmd
		return tool.Verdict{Patterns: []string{"recursive_delete"}, Reason: "deletes files"}
	}}
	var g tool.Guard = term
	v := g.Check(json.RawMessage(`{"command":"rm -rf build"}`), env)
	if seen != "rm -rf build" || v.Command != "rm -rf build" || len(v.Patterns) != 1 || v.Reason != "deletes files" {
		t.Fatalf("verdict %+v (saw %q)", v, seen)
	}
	// Arguments that do not decode are rejected by Call, so the guard has nothing to judge.
	seen = ""
	if v := g.Check(json.RawMessage(`{"command":5}`), env); seen != "" || v.Blocked || len(v.Patterns) != 0 {
		t.Fatalf("bad args verdict %+v", v)
	}
	// No policy: every command is safe, and the verdict still names it.
	v = (&Terminal{}).Check(json.RawMessage(`{"command":"ls"}`), env)
	if v.Blocked || len(v.Patterns) != 0 || v.Command != "ls" {
		t.Fatalf("nil policy verdict %+v", v)
	}
}

func TestTerminalOutputCapKeepsHeadAndTail(t *testing.T) {
	env := newEnv(t)
	term := &Terminal{OutputCap: 1000}
	res := mustOK(t, call(t, term, env, map[string]any{
		"command": `printf START; head -c 5000 /dev/zero | tr '\0' x; printf 'END\n'`,
	}))
	// 5 + 5000 + 4 bytes written, 1000 kept.
	if !strings.HasPrefix(res.Content, "START") || !strings.Contains(res.Content, "xxEND\n[exit code 0]") {
		t.Fatalf("head/tail lost: %q", res.Content)
	}
	if !strings.Contains(res.Content, "\n[... 4009 bytes omitted ...]\n") {
		t.Fatalf("marker missing: %q", res.Content)
	}
	if res.Meta["truncated"] != true || res.Meta["output_bytes"] != int64(5009) {
		t.Fatalf("meta %v", res.Meta)
	}
	if n := strings.Count(strings.TrimSuffix(res.Content, "[exit code 0]"), "x"); n != 1000-5-4 {
		t.Fatalf("kept %d x's", n)
	}
}

func TestTerminalTimeoutKillsGroup(t *testing.T) {
	env := newEnv(t)
	// The shell and its child ignore SIGTERM, so only the SIGKILL after the grace ends them.
	term := &Terminal{KillGrace: 100 * time.Millisecond}
	res := call(t, term, env, map[string]any{
		"command": `trap '' TERM; sleep 300 & echo child=$!; wait`,
		"timeout": 1,
	})
	mustFail(t, res, "timed out after 1s", "process group was killed", "child=")
	if res.Meta["timed_out"] != true || res.Meta["exit_code"] != 128+int(syscall.SIGKILL) {
		t.Fatalf("meta %v", res.Meta)
	}
	pid := childPID(t, res.Content)
	eventually(t, fmt.Sprintf("child %d to die", pid), func() bool { return gone(pid) })
}

func TestTerminalCancelKillsGroup(t *testing.T) {
	env := newEnv(t)
	lines := make(chan string, 100)
	env.Progress = func(s string) {
		select {
		case lines <- s:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := &Terminal{KillGrace: 100 * time.Millisecond}
	type outcome struct {
		res tool.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		args := json.RawMessage(`{"command":"sleep 300 & echo child=$!; wait"}`)
		res, err := term.Call(ctx, tool.Call{Name: "terminal", Args: args}, env)
		done <- outcome{res, err}
	}()
	var seen strings.Builder
	for !childRe.MatchString(seen.String()) {
		select {
		case s := <-lines:
			seen.WriteString(s)
		case o := <-done:
			t.Fatalf("command ended before cancel: %+v", o)
		}
	}
	pid := childPID(t, seen.String())
	cancel()
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	mustFail(t, o.res, "interrupted", "process group was killed")
	if o.res.Meta["interrupted"] != true {
		t.Fatalf("meta %v", o.res.Meta)
	}
	eventually(t, fmt.Sprintf("child %d to die", pid), func() bool { return gone(pid) })
}

func TestTerminalProgressStreamsLines(t *testing.T) {
	env := newEnv(t)
	var got []string
	env.Progress = func(s string) { got = append(got, s) } // called from one goroutine at a time
	res := mustOK(t, call(t, &Terminal{}, env, map[string]any{"command": "echo one; echo two; printf three"}))
	all := strings.Join(got, "")
	if all != "one\ntwo\nthree" {
		t.Fatalf("progress %q (result %q)", got, res.Content)
	}
}

func TestTerminalDaemonDoesNotBlock(t *testing.T) {
	env := newEnv(t)
	// `&` leaves a process holding the output pipe; the call still returns once the shell is
	// done, and the leftover keeps running (it was not asked to stop).
	res := mustOK(t, call(t, &Terminal{}, env, map[string]any{"command": "sleep 300 & echo child=$!"}))
	pid := childPID(t, res.Content)
	if gone(pid) {
		t.Fatalf("background child %d was killed", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

func TestBackgroundProcessLifecycle(t *testing.T) {
	env := newEnv(t)
	defer env.Processes.StopAll()
	term := &Terminal{KillGrace: 100 * time.Millisecond}
	pt := &Process{}

	res := mustOK(t, call(t, term, env, map[string]any{
		"command": "trap '' TERM; sleep 300 & echo child=$!; wait", "background": true,
	}))
	id, _ := res.Meta["process_id"].(string)
	if id != "proc_1" || !strings.Contains(res.Content, `"proc_1"`) || res.Meta["background"] != true {
		t.Fatalf("start: %q %v", res.Content, res.Meta)
	}

	res = mustOK(t, call(t, pt, env, map[string]any{"action": "list"}))
	if !strings.Contains(res.Content, "proc_1\tpid ") || !strings.Contains(res.Content, "running") {
		t.Fatalf("list: %q", res.Content)
	}
	var out string
	eventually(t, "the child pid in the log", func() bool {
		out = mustOK(t, call(t, pt, env, map[string]any{"action": "log", "id": id})).Content
		return childRe.MatchString(out)
	})
	pid := childPID(t, out)
	res = mustOK(t, call(t, pt, env, map[string]any{"action": "poll", "session_id": id}))
	if !strings.Contains(res.Content, "running") || !strings.Contains(res.Content, "child=") || res.Meta["status"] != "running" {
		t.Fatalf("poll: %q %v", res.Content, res.Meta)
	}

	res = mustOK(t, call(t, pt, env, map[string]any{"action": "kill", "id": id}))
	if !strings.Contains(res.Content, "Killed proc_1") || !strings.Contains(res.Content, fmt.Sprintf("exit code %d", 128+int(syscall.SIGKILL))) {
		t.Fatalf("kill: %q", res.Content)
	}
	eventually(t, "the killed child to die", func() bool { return gone(pid) })
	res = mustOK(t, call(t, pt, env, map[string]any{"action": "poll", "id": id}))
	if !strings.Contains(res.Content, "exited (code 137)") {
		t.Fatalf("poll after kill: %q", res.Content)
	}
	res = mustOK(t, call(t, pt, env, map[string]any{"action": "kill", "id": id}))
	if !strings.Contains(res.Content, "already exited") {
		t.Fatalf("second kill: %q", res.Content)
	}
}

func TestBackgroundWaitAndLog(t *testing.T) {
	env := newEnv(t)
	defer env.Processes.StopAll()
	term, pt := &Terminal{}, &Process{}
	mustOK(t, call(t, term, env, map[string]any{"command": "for i in 1 2 3 4 5; do echo line$i; done; exit 4", "background": true}))
	res := mustOK(t, call(t, pt, env, map[string]any{"action": "wait", "id": "proc_1"}))
	if !strings.Contains(res.Content, "exited (code 4)") || !strings.Contains(res.Content, "line5") || res.Meta["exit_code"] != 4 {
		t.Fatalf("wait: %q %v", res.Content, res.Meta)
	}
	res = mustOK(t, call(t, pt, env, map[string]any{"action": "log", "id": "proc_1", "offset": 2, "limit": 2}))
	if !strings.Contains(res.Content, "lines 2-3 of 5") || !strings.Contains(res.Content, "line2\nline3\n") || strings.Contains(res.Content, "line4") {
		t.Fatalf("log: %q", res.Content)
	}
	res = mustOK(t, call(t, pt, env, map[string]any{"action": "log", "id": "proc_1", "limit": 2}))
	if !strings.Contains(res.Content, "line4\nline5\n") || strings.Contains(res.Content, "line3") {
		t.Fatalf("log tail: %q", res.Content)
	}

	// wait returns while the process still runs once its timeout passes.
	mustOK(t, call(t, term, env, map[string]any{"command": "sleep 300", "background": true}))
	res = mustOK(t, call(t, pt, env, map[string]any{"action": "wait", "id": "proc_2", "timeout": 1}))
	if !strings.Contains(res.Content, "Still running after waiting 1s") {
		t.Fatalf("wait timeout: %q", res.Content)
	}
	p, _ := env.Processes.Get("proc_2")
	env.Processes.StopAll()
	select {
	case <-p.Done:
	default:
		t.Fatal("StopAll returned before the process was reaped")
	}
}

func TestProcessErrors(t *testing.T) {
	env := newEnv(t)
	pt := &Process{}
	res := mustOK(t, call(t, pt, env, map[string]any{"action": "list"}))
	if res.Content != "No background processes." {
		t.Fatalf("empty list: %q", res.Content)
	}
	mustFail(t, call(t, pt, env, map[string]any{"action": "poll"}), "needs the id")
	mustFail(t, call(t, pt, env, map[string]any{"action": "poll", "id": "proc_9"}), `no background process with id "proc_9"`)
	mustFail(t, call(t, pt, env, map[string]any{"action": "restart", "id": "proc_1"}), `field "action" must be one of`)
	env.Processes = nil
	mustFail(t, call(t, pt, env, map[string]any{"action": "list"}), "not available")
	mustFail(t, call(t, &Terminal{}, env, map[string]any{"command": "true", "background": true}), "not available")
}
