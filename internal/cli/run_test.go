package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// demoWork is a working directory with the stale build/ the demo cassette removes.
func demoWork(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	return work
}

// TestRunCassetteTurn drives the recorded demo turn from a script in each language; the
// script answers the approval and checks the files.
func TestRunCassetteTurn(t *testing.T) {
	cassette := repoPath("scripts", "demo", "demo.cassette.json")
	for _, script := range []string{"scripts/ci/cassette_turn.js", "scripts/ci/cassette_turn.lua"} {
		t.Run(filepath.Ext(script), func(t *testing.T) {
			work := demoWork(t)
			r := hermes(t, work, []string{"HERMES_HOME=" + t.TempDir()}, "run", "--grant", "fs", repoPath(script), cassette, demoPrompt)
			if r.code != 0 || !strings.Contains(r.stdout, "text_response(finish_reason=stop), 3 tool results") {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.err)
			}
			if _, err := os.Stat(filepath.Join(work, "build")); !os.IsNotExist(err) {
				t.Fatal("build/ is still there: the approval was not answered")
			}
		})
	}
}

// TestRunReviewSession: the review example passes on a clean session and fails (exit 1, with
// the blocked call named) on one where the policy denied a call.
func TestRunReviewSession(t *testing.T) {
	cassette := repoPath("scripts", "demo", "demo.cassette.json")
	review := repoPath("scripts", "ci", "review_session.js")
	home := t.TempDir()
	env := []string{"HERMES_HOME=" + home}
	r := hermes(t, demoWork(t), env, "run", "--grant", "fs", repoPath("scripts", "ci", "cassette_turn.lua"), cassette, demoPrompt)
	id := regexp.MustCompile(`session (\S+) turn`).FindStringSubmatch(r.stdout)
	if r.code != 0 || id == nil {
		t.Fatalf("setup: %d %s %s", r.code, r.stdout, r.err)
	}
	ok := hermes(t, t.TempDir(), env, "run", review, id[1])
	if ok.code != 0 || strings.Count(ok.stdout, "ok      ") != 3 {
		t.Fatalf("clean session: %d\n%s%s", ok.code, ok.stdout, ok.err)
	}
	// The strict CI policy denies the recursive delete, so the review fails.
	work := demoWork(t)
	ci := hermes(t, work, append(env, "HERMES_MODEL=replay:"+cassette, "HERMES_POLICY="+repoPath("scripts", "policies", "ci.js")), "chat", "-q", demoPrompt)
	id = regexp.MustCompile(`\[session (\S+) ·`).FindStringSubmatch(ci.err)
	if id == nil || !strings.Contains(ci.err, "CI never runs flagged commands") {
		t.Fatalf("ci chat: %d %s", ci.code, ci.err)
	}
	bad := hermes(t, t.TempDir(), env, "run", review, id[1])
	if bad.code != 1 || !strings.Contains(bad.stdout, "BLOCKED terminal") || !strings.Contains(bad.err, "review_session.js:27: assertion failed: blocked tool calls") {
		t.Fatalf("blocked session: %d\n%s%s", bad.code, bad.stdout, bad.err)
	}
	if r := hermes(t, t.TempDir(), env, "run", review); r.code != 2 {
		t.Fatalf("no argument: exit %d", r.code)
	}
}

func TestRunJSONEvents(t *testing.T) {
	work := demoWork(t)
	r := hermes(t, work, []string{"HERMES_HOME=" + t.TempDir()}, "run", "--json", "--grant", "fs",
		repoPath("scripts", "ci", "cassette_turn.js"), repoPath("scripts", "demo", "demo.cassette.json"), demoPrompt)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.err)
	}
	if !strings.Contains(r.err, "tool results") {
		t.Fatalf("print must go to stderr with --json: %s", r.err)
	}
	seen := map[string]int{}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if last := lines[len(lines)-1]; last != `{"type":"script.result","status":"ok","exit_code":0,"file":"`+repoPath("scripts", "ci", "cassette_turn.js")+`"}` {
		t.Errorf("the last line is not the result: %s", last)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Seq  uint64 `json:"seq"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Type == "" {
			t.Fatalf("not an event line: %q (%v)", sc.Text(), err)
		}
		seen[ev.Type]++
	}
	for _, typ := range []string{"message.start", "tool.start", "request.open", "request.resolved", "message.complete", "policy.decision"} {
		if seen[typ] == 0 {
			t.Errorf("no %s event in %v", typ, seen)
		}
	}
}

// TestRunJSONResult: the result line of a failed script names the error and where it was
// raised, in each language; a script past --timeout ends with status timeout.
func TestRunJSONResult(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	for _, c := range []struct{ name, src, want string }{
		{"f.js", "const assert = require('assert');\n\nassert.equal(1, 2, 'n');\n", `{"type":"script.result","status":"failed","exit_code":1,"error":"assertion failed: n: expected 2, got 1","file":"f.js","line":3}`},
		{"f.lua", "local assert = require 'assert'\nassert.equal(1, 2, 'n')\n", `{"type":"script.result","status":"failed","exit_code":1,"error":"assertion failed: n: expected 2, got 1","file":"f.lua","line":2}`},
		{"x.js", "require('hermes').exit(3)\n", `{"type":"script.result","status":"failed","exit_code":3,"file":"x.js"}`},
	} {
		writeTemp(t, dir, c.name, c.src)
		r := hermes(t, dir, env, "run", "--json", c.name)
		if strings.TrimSpace(r.stdout) != c.want {
			t.Errorf("%s: exit %d\nstdout %s\nwant   %s\nstderr %s", c.name, r.code, r.stdout, c.want, r.err)
		}
	}
	writeTemp(t, dir, "spin.lua", "while true do end\n")
	r := hermes(t, dir, env, "run", "--json", "--timeout", "200ms", "spin.lua")
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 1 || res["status"] != "timeout" || !strings.Contains(res["error"].(string), "--timeout 200ms") {
		t.Fatalf("timeout: exit %d %s %v", r.code, r.stdout, err)
	}
}

func TestRunFailures(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	failJS := writeTemp(t, dir, "fail.js", "const assert = require('assert');\nfunction check(n) {\n  assert.equal(n, 2, 'count');\n}\ncheck(1);\n")
	r := hermes(t, dir, env, "run", failJS)
	if r.code != 1 || !strings.Contains(r.err, "fail.js:3: assertion failed: count: expected 2, got 1") || !strings.Contains(r.err, "at check (") {
		t.Fatalf("assertion (js): %d\n%s", r.code, r.err)
	}
	failLua := writeTemp(t, dir, "fail.lua", "local assert = require 'assert'\nlocal function check(n)\n  assert.equal(n, 2, 'count')\nend\ncheck(1)\n")
	r = hermes(t, dir, env, "run", failLua)
	if r.code != 1 || !strings.Contains(r.err, "fail.lua:3: assertion failed: count: expected 2, got 1") || !strings.Contains(r.err, "at ") {
		t.Fatalf("assertion (lua): %d\n%s", r.code, r.err)
	}
	throw := writeTemp(t, dir, "throw.js", "\nnull.x;\n")
	if r := hermes(t, dir, env, "run", throw); r.code != 1 || !strings.Contains(r.err, "throw.js:2: TypeError") {
		t.Fatalf("uncaught: %d %s", r.code, r.err)
	}
	syntax := writeTemp(t, dir, "syntax.lua", "x = = 1\n")
	if r := hermes(t, dir, env, "run", syntax); r.code != 1 || !strings.Contains(r.err, "syntax.lua:1: syntax error") {
		t.Fatalf("syntax: %d %s", r.code, r.err)
	}
	exit := writeTemp(t, dir, "exit.lua", "require('hermes').exit(3)\nerror('not reached')\n")
	if r := hermes(t, dir, env, "run", exit); r.code != 3 || r.err != "" {
		t.Fatalf("exit: %d %q", r.code, r.err)
	}
	ok := writeTemp(t, dir, "ok.js", "const h = require('hermes');\nprint(h.args.join('+'));\n")
	if r := hermes(t, dir, env, "run", ok, "a", "--b", "c"); r.code != 0 || r.stdout != "a+--b+c\n" {
		t.Fatalf("args: %d %q %s", r.code, r.stdout, r.err)
	}
	for _, args := range [][]string{{"run"}, {"run", "x.py"}, {"run", filepath.Join(dir, "missing.js")}, {"run", "--frob", ok}, {"run", "--grant", "exec", ok}} {
		if r := hermes(t, dir, env, args...); r.code != 2 {
			t.Errorf("%v: exit %d (want 2)\n%s", args, r.code, r.err)
		}
	}
}

// TestRunEphemeralAndFollowWarning: --ephemeral leaves no session in the home; a loop over
// s.events() that reaches the stored end warns that it now waits, and the timeout ends it.
func TestRunEphemeralAndFollowWarning(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	writeTemp(t, dir, "follow.js", `const hermes = require("hermes");
const s = hermes.create({ model: hermes.fake_model([{ text: "hi" }]), title: "follow" });
s.run("hello");
for (const ev of s.events({ since: 0 })) print(ev.type);
`)
	r := hermes(t, dir, env, "run", "--ephemeral", "--timeout", "1s", "follow.js")
	if r.code != 1 || !strings.Contains(r.stdout, "message.complete") || !strings.Contains(r.err, "now waits for new ones; pass {follow: false}") ||
		!strings.Contains(r.err, "--timeout 1s reached") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	if ls := hermes(t, dir, env, "sessions", "--json"); ls.code != 0 || strings.TrimSpace(ls.stdout) != "" {
		t.Fatalf("--ephemeral left sessions behind: %s", ls.stdout)
	}
	// Without --ephemeral the session is kept, and a second run with the same title works.
	writeTemp(t, dir, "titled.lua", "local hermes = require 'hermes'\nprint(hermes.create({ title = 'nightly' }):info().title)\n")
	first, second := hermes(t, dir, env, "run", "titled.lua"), hermes(t, dir, env, "run", "titled.lua")
	if first.code != 0 || second.code != 0 || strings.TrimSpace(first.stdout) != "nightly" || strings.TrimSpace(second.stdout) != "nightly #2" {
		t.Fatalf("rerun with a fixed title: %d %q, %d %q %s", first.code, first.stdout, second.code, second.stdout, second.err)
	}
}

// TestRunUnhandledRejection: a promise left rejected with no handler when the script ends
// fails the run like an uncaught exception (exit 1, file:line and stack); hermes.exit in an
// async function still sets the exit code; a handled rejection is no failure.
func TestRunUnhandledRejection(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	writeTemp(t, dir, "reject.js", "Promise.reject(new Error(\"x\"));\n")
	writeTemp(t, dir, "main.js", "async function main() {\n  await null;\n  throw new Error(\"x\");\n}\nmain();\n")
	writeTemp(t, dir, "exit.js", "async function main() {\n  await null;\n  require(\"hermes\").exit(4);\n}\nmain();\n")
	writeTemp(t, dir, "handled.js", "Promise.reject(new Error(\"x\")).catch((e) => print(\"caught\", e.message));\n")
	if r := hermes(t, dir, env, "run", "reject.js"); r.code != 1 || !strings.Contains(r.err, "reject.js:1: Uncaught (in promise) Error: x") {
		t.Errorf("reject: exit %d %s", r.code, r.err)
	}
	if r := hermes(t, dir, env, "run", "main.js"); r.code != 1 || !strings.Contains(r.err, "main.js:3: Uncaught (in promise) Error: x\n    at main (main.js:3") {
		t.Errorf("async main: exit %d %s", r.code, r.err)
	}
	r := hermes(t, dir, env, "run", "--json", "main.js")
	if want := `{"type":"script.result","status":"failed","exit_code":1,"error":"Uncaught (in promise) Error: x","file":"main.js","line":3}`; r.code != 1 || strings.TrimSpace(r.stdout) != want {
		t.Errorf("--json: exit %d %s", r.code, r.stdout)
	}
	if r := hermes(t, dir, env, "run", "exit.js"); r.code != 4 || r.err != "" {
		t.Errorf("exit in async: exit %d %q", r.code, r.err)
	}
	if r := hermes(t, dir, env, "run", "handled.js"); r.code != 0 || r.stdout != "caught x\n" {
		t.Errorf("handled: exit %d %q %s", r.code, r.stdout, r.err)
	}
}

// TestRunExitCodeRange: hermes.exit refuses a code outside 0–255 (a process exit status is one
// byte, so 256 would end the script as a success) with an error at its line, exit 1 and the
// same in the --json result; 255 is kept.
func TestRunExitCodeRange(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	for name, src := range map[string]string{
		"big.js":  "const hermes = require('hermes');\nhermes.exit(256);\n",
		"neg.js":  "const hermes = require('hermes');\nhermes.exit(-1);\n",
		"big.lua": "local hermes = require 'hermes'\nhermes.exit(300)\n",
	} {
		writeTemp(t, dir, name, src)
		r := hermes(t, dir, env, "run", name)
		if r.code != 1 || !strings.Contains(r.err, name+":2: ") || !strings.Contains(r.err, "the code must be 0 to 255") {
			t.Errorf("%s: exit %d %s", name, r.code, r.err)
		}
		r = hermes(t, dir, env, "run", "--json", name)
		var res struct {
			Status   string `json:"status"`
			ExitCode int    `json:"exit_code"`
			Error    string `json:"error"`
			Line     int    `json:"line"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 1 || res.Status != "failed" || res.ExitCode != 1 || res.Line != 2 || !strings.Contains(res.Error, "0 to 255") {
			t.Errorf("%s --json: exit %d %s %v", name, r.code, r.stdout, err)
		}
	}
	writeTemp(t, dir, "max.js", "require('hermes').exit(255);\n")
	if r := hermes(t, dir, env, "run", "max.js"); r.code != 255 || r.err != "" {
		t.Errorf("exit(255): exit %d %q", r.code, r.err)
	}
}

// TestRunStackOverflow: a runaway recursion fails with the message the README documents, in
// each language, and its stack is printed short (the first and last frames, the count left
// out), also in the JUnit report of hermes test.
func TestRunStackOverflow(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	writeTemp(t, dir, "so.js", "function f(n) { return f(n + 1) + 1; }\nf(0);\n")
	writeTemp(t, dir, "so.lua", "local function f(n) return f(n + 1) + 1 end\nf(0)\n")
	for name, want := range map[string]string{
		"so.js":  "so.js:1: script call stack limit exceeded (more than 10000 nested calls)\n    at f (so.js:1:",
		"so.lua": "so.lua:1: script call stack limit exceeded (lua callstack overflow)\n    at ",
	} {
		r := hermes(t, dir, env, "run", name)
		if r.code != 1 || !strings.HasPrefix(r.err, want) || len(r.err) > 2000 {
			t.Errorf("%s: exit %d, %d bytes\n%.3000s", name, r.code, len(r.err), r.err)
		}
	}
	if r := hermes(t, dir, env, "run", "so.js"); !strings.Contains(r.err, "\n    … 9986 frames omitted\n") || strings.Count(r.err, "\n") != 17 {
		t.Errorf("js stack not elided:\n%.3000s", r.err)
	}
	writeTemp(t, dir, "so_test.js", "test('recurses', () => { const f = (n) => f(n + 1) + 1; f(0); });\n")
	r := hermes(t, dir, env, "test", "--reporter", "junit", "so_test.js")
	if r.code != 1 || !strings.Contains(r.stdout, `message="script call stack limit exceeded (more than 10000 nested calls)"`) ||
		!strings.Contains(r.stdout, "frames omitted") || len(r.stdout) > 4000 {
		t.Errorf("junit: exit %d, %d bytes\n%.3000s", r.code, len(r.stdout), r.stdout)
	}
}
