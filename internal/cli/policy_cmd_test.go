package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const denyRmJS = `export function approval(req) {
  if (req.pattern === "recursive delete") return { decision: "deny", reason: "no rm -r here" };
  return "allow";
}
export const examples = [
  { input: { command: "rm -r build" }, want: { decision: "deny", reason: "no rm -r here" } },
  { input: { command: "ls" }, want: "allow" },
];
`

func TestPolicyTestCommand(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	good := writeTemp(t, dir, "good.js", denyRmJS)
	goodLua := writeTemp(t, dir, "good.lua", `function approval(req)
  if req.pattern == "recursive delete" then return { decision = "deny", reason = "no rm -r here" } end
  return "allow"
end
examples = {
  { input = { command = "rm -rf build" }, want = "deny" },
  { hook = "busy_input", input = { text = "hi" }, want = "interrupt" },
}
`)
	r := hermes(t, dir, env, "policy", "test", good, goodLua)
	if r.code != 0 || !strings.Contains(r.stdout, "4 passed, 0 failed") {
		t.Fatalf("good: %d\n%s%s", r.code, r.stdout, r.err)
	}
	bad := writeTemp(t, dir, "bad.js", strings.Replace(denyRmJS, `want: "allow"`, `want: "ask"`, 1))
	r = hermes(t, dir, env, "policy", "test", bad)
	if r.code != 1 || !strings.Contains(r.stdout, `FAIL bad.js:7 #2 approval "ls": want "ask", got {"decision":"allow","reason":""}`) || !strings.Contains(r.stdout, "1 passed, 1 failed") {
		t.Fatalf("bad: %d\n%s%s", r.code, r.stdout, r.err)
	}
	broken := writeTemp(t, dir, "broken.lua", "function approval(req)\n  return 'allow'\n")
	r = hermes(t, dir, env, "policy", "test", broken)
	if r.code != 1 || !strings.Contains(r.stdout, "broken.lua") || !strings.Contains(r.stdout, "syntax error") {
		t.Fatalf("broken: %d\n%s%s", r.code, r.stdout, r.err)
	}
	if r := hermes(t, dir, env, "policy", "test"); r.code != 2 {
		t.Fatalf("usage: %d", r.code)
	}
	if r := hermes(t, dir, env, "policy", "frob"); r.code != 2 {
		t.Fatalf("unknown subcommand: %d", r.code)
	}
}

// TestPolicyDecidesChatAndReplay: the policy in HERMES_HOME decides a chat turn's approval
// without asking anyone; replaying the session under another policy prints the change.
func TestPolicyDecidesChatAndReplay(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(work, "build"), 0o755)
	cassette := repoPath("scripts", "demo", "demo.cassette.json")
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + cassette}
	writeTemp(t, home, "policy.js", denyRmJS)

	r := hermes(t, work, env, "chat", "--approve", "once", "-q", demoPrompt)
	if r.code != 0 || strings.Contains(r.err, "approval needed") {
		t.Fatalf("chat: %d\n%s\n%s", r.code, r.stdout, r.err)
	}
	if !strings.Contains(r.err, "no rm -r here") {
		t.Fatalf("the denial reason is not shown: %s", r.err)
	}
	if _, err := os.Stat(filepath.Join(work, "build")); err != nil {
		t.Fatal("the policy denied rm -r build, yet it ran")
	}
	id := regexp.MustCompile(`\[session (\S+) ·`).FindStringSubmatch(r.err)
	if id == nil {
		t.Fatalf("no session id: %s", r.err)
	}
	show := hermes(t, work, env, "policy", "show")
	if show.code != 0 || !strings.Contains(show.stdout, "approval   script") || !strings.Contains(show.stdout, "busy_input built-in default") {
		t.Fatalf("show: %s %s", show.stdout, show.err)
	}

	allowAll := writeTemp(t, t.TempDir(), "allow.lua", "function approval(req) return 'allow' end\n")
	rp := hermes(t, work, env, "policy", "replay", id[1], "--policy", allowAll, "--exit-code")
	if rp.code != 1 || !strings.Contains(rp.stdout, "≠ #3 terminal rm -r build") ||
		!strings.Contains(rp.stdout, "deny (no rm -r here) → allow   (stored call blocked)") ||
		!strings.Contains(rp.stdout, "1 of 3 tool calls would be decided differently") {
		t.Fatalf("replay: %d\n%s\n%s", rp.code, rp.stdout, rp.err)
	}
	rp = hermes(t, work, env, "policy", "replay", id[1], "--policy", allowAll, "--against", allowAll, "--all")
	if rp.code != 0 || !strings.Contains(rp.stdout, "0 of 3") || !strings.Contains(rp.stdout, "#1 write_file") {
		t.Fatalf("replay --all: %d\n%s\n%s", rp.code, rp.stdout, rp.err)
	}
	rp = hermes(t, work, env, "policy", "replay", id[1], "--policy", allowAll, "--json")
	lines := jsonLines(t, rp.stdout)
	if rp.code != 0 || len(lines) != 4 || lines[2]["tool"] != "terminal" || lines[2]["changed"] != true || lines[2]["now"] != "allow" ||
		lines[3]["type"] != "summary" || lines[3]["changed"] != 1.0 || lines[3]["calls"] != 3.0 {
		t.Fatalf("replay --json: %d\n%s\n%s", rp.code, rp.stdout, rp.err)
	}
	ls := hermes(t, work, env, "sessions", "--json")
	if sl := jsonLines(t, ls.stdout); ls.code != 0 || len(sl) != 1 || sl[0]["id"] != id[1] {
		t.Fatalf("sessions --json: %d\n%s\n%s", ls.code, ls.stdout, ls.err)
	}
	if r := hermes(t, work, env, "policy", "replay", "nope", "--policy", allowAll); r.code != 1 || !strings.Contains(r.err, `no session "nope"`) {
		t.Fatalf("unknown session: %d %s", r.code, r.err)
	}
	// With --exit-code, 1 says the decisions changed: a replay that could not run is 2.
	if r := hermes(t, work, env, "policy", "replay", "nope", "--policy", allowAll, "--exit-code"); r.code != 2 || !strings.Contains(r.err, `no session "nope"`) {
		t.Fatalf("unknown session with --exit-code: %d %s", r.code, r.err)
	}
	broken := writeTemp(t, t.TempDir(), "broken.js", "export function approval( {\n")
	if r := hermes(t, work, env, "policy", "replay", id[1], "--policy", broken, "--exit-code"); r.code != 2 {
		t.Fatalf("a policy that does not load, with --exit-code: %d %s", r.code, r.err)
	}

	// A policy whose examples fail is refused at startup, with the reason.
	writeTemp(t, home, "policy.js", strings.Replace(denyRmJS, `want: "allow"`, `want: "deny"`, 1))
	r = hermes(t, work, env, "chat", "-q", "hi")
	if r.code != 1 || !strings.Contains(r.err, "policy examples failed") || !strings.Contains(r.err, "policy.js") {
		t.Fatalf("failing examples: %d %s", r.code, r.err)
	}
	writeTemp(t, home, "policy.lua", "function approval() return 'allow' end\n")
	if r := hermes(t, work, env, "chat", "-q", "hi"); r.code != 1 || !strings.Contains(r.err, "both") {
		t.Fatalf("two policies: %d %s", r.code, r.err)
	}
}

func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// TestPolicyAuthoring: a misspelt hook fails policy test (exit 1) in each language; every
// example is reported at its file:line, a malformed one failing alone; an example can expect
// an error; --json gives a line per example; policy eval prints one decision.
func TestPolicyAuthoring(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	writeTemp(t, dir, "typo.js", "export function aproval(req) { return 'deny'; }\n")
	writeTemp(t, dir, "typo.lua", "function busyinput(req) return 'queue' end\n")
	r := hermes(t, dir, env, "policy", "test", "typo.js", "typo.lua")
	if r.code != 1 || !strings.Contains(r.stdout, `FAIL typo.js: unknown hook "aproval": did you mean "approval"?`) ||
		!strings.Contains(r.stdout, `FAIL typo.lua: unknown hook "busyinput": did you mean "busy_input"?`) {
		t.Fatalf("misspelt hooks: %d\n%s%s", r.code, r.stdout, r.err)
	}
	writeTemp(t, dir, "p.lua", `function approval(req)
  if req.command == "boom" then error("kaboom") end
  return "allow"
end
examples = {
  { input = { command = "ls" }, want = "allow" },
  { input = { command = "ls" }, wants = "deny" },
  { input = { command = "boom" }, error = "kaboom" },
}
`)
	r = hermes(t, dir, env, "policy", "test", "-v", "p.lua")
	for _, want := range []string{"ok   p.lua:6 #1", `FAIL p.lua:7 #2 approval "ls": examples[2]: unknown field "wants"`, "ok   p.lua:8 #3", "2 passed, 1 failed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("policy test lacks %q:\n%s", want, r.stdout)
		}
	}
	r = hermes(t, dir, env, "policy", "test", "--json", "p.lua", "typo.js")
	lines := jsonLines(t, r.stdout)
	if r.code != 1 || len(lines) != 5 || lines[1]["status"] != "fail" || lines[1]["line"] != 7.0 || lines[2]["status"] != "pass" ||
		lines[3]["type"] != "load_error" || lines[4]["passed"] != 2.0 || lines[4]["failed"] != 2.0 {
		t.Fatalf("policy test --json: %d\n%s", r.code, r.stdout)
	}

	r = hermes(t, dir, env, "policy", "eval", "p.lua", "--hook", "approval", "--input", `{"command":"ls"}`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{"decision":{"decision":"allow","reason":""},"hook":"approval","source":"script"}` {
		t.Fatalf("eval: %d %s %s", r.code, r.stdout, r.err)
	}
	r = hermes(t, dir, env, "policy", "eval", "p.lua", "--input", `{"command":"boom"}`)
	if r.code != 1 || !strings.Contains(r.stdout, `"error":"approval hook: p.lua:2: kaboom"`) {
		t.Fatalf("eval error: %d %s %s", r.code, r.stdout, r.err)
	}
	r = hermes(t, dir, env, "policy", "eval", "p.lua", "--hook", "busy_input", "--input", `{"text":"hi"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"source":"built-in default"`) {
		t.Fatalf("eval default: %d %s %s", r.code, r.stdout, r.err)
	}
	for _, args := range [][]string{{"policy", "eval"}, {"policy", "eval", "p.lua", "--input", "[1"}, {"policy", "eval", "p.lua", "--hook", "nope"}} {
		if r := hermes(t, dir, env, args...); r.code != 2 {
			t.Errorf("%v: exit %d %s", args, r.code, r.err)
		}
	}
}
