package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A suite with a pass, a failed assertion, a thrown error and a pass after them, in each
// language; the second file checks that the first test's session was closed when it ended.
var suiteFiles = map[string]string{
	"math_test.js": `const assert = require("assert");
test("adds", () => { assert.equal(1 + 1, 2); });
describe("group", () => {
  test("fails", () => { print("printed by fails"); assert.equal(1, 2, "one is two"); });
  test("throws", () => { null.x; });
});
test("after the failures", () => { assert.ok(true); });
`,
	"sub/iso_test.lua": `local hermes = require "hermes"
local assert = require "assert"
local held
test("creates a session", function()
  held = hermes.create({title = "iso"})
  assert.equal(held:info().status, "idle")
end)
test("the first test's session is closed", function()
  assert.equal(held:info().status, "closed")
end)
describe("lua group", function()
  test("fails", function() assert.equal("a", "b") end)
end)
`,
	"helper.js": `throw new Error("not a test file: never loaded");`,
}

func TestHermesTestReporters(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, suiteFiles)
	env := []string{"HERMES_HOME=" + t.TempDir()}

	r := hermes(t, dir, env, "test")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.err)
	}
	for _, want := range []string{
		"ok   math_test.js: adds (",
		"FAIL math_test.js: group > fails (",
		"math_test.js:4: assertion failed: one is two: expected 2, got 1",
		"FAIL math_test.js: group > throws (",
		"math_test.js:5: TypeError",
		"ok   math_test.js: after the failures (",
		"ok   sub/iso_test.lua: creates a session (",
		"ok   sub/iso_test.lua: the first test's session is closed (",
		"FAIL sub/iso_test.lua: lua group > fails (",
		"sub/iso_test.lua:12: assertion failed",
		"FAILED: 4 passed, 3 failed (2 files,",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("pretty output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "helper.js") {
		t.Error("a file not named *_test.* was run")
	}

	// --filter keeps the matching tests; all passing means exit 0.
	r = hermes(t, dir, env, "test", "--filter", "^(adds|after)")
	if r.code != 0 || strings.Count(r.stdout, "ok   ") != 2 || !strings.Contains(r.stdout, "ok: 2 passed, 0 failed") {
		t.Fatalf("filter: exit %d\n%s%s", r.code, r.stdout, r.err)
	}

	// JUnit: what CI systems read.
	r = hermes(t, dir, env, "test", "--reporter", "junit")
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				File    string `xml:"file,attr"`
				Line    int    `xml:"line,attr"`
				Out     string `xml:"system-out"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("junit: %v\n%s", err, r.stdout)
	}
	if r.code != 1 || doc.Tests != 7 || doc.Failures != 2 || doc.Errors != 1 || len(doc.Suites) != 2 {
		t.Fatalf("junit: exit %d, %+v\n%s", r.code, doc, r.stdout)
	}
	fails := doc.Suites[0].Cases[1]
	if fails.Name != "group > fails" || fails.Failure == nil || fails.Failure.Type != "AssertionError" ||
		fails.File != "math_test.js" || fails.Line != 4 || fails.Out != "printed by fails\n" {
		t.Fatalf("junit failing case: %+v", fails)
	}
	if doc.Suites[0].Cases[2].Error == nil {
		t.Fatalf("a thrown error is a JUnit error: %+v", doc.Suites[0].Cases[2])
	}

	// TAP.
	r = hermes(t, dir, env, "test", "--reporter", "tap", "math_test.js")
	for _, want := range []string{"TAP version 14\n", "ok 1 - math_test.js: adds\n", "not ok 2 - math_test.js: group > fails\n", "    line: 4\n", "# printed by fails\n", "1..4\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tap lacks %q:\n%s", want, r.stdout)
		}
	}

	// JSON lines, ending with the summary.
	r = hermes(t, dir, env, "test", "--reporter", "json", "sub")
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("json line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 || lines[2]["status"] != "fail" || lines[2]["error_line"] != 12.0 || lines[3]["type"] != "summary" || lines[3]["failed"] != 1.0 {
		t.Fatalf("json: %v", lines)
	}

	// Usage errors exit 2.
	for _, args := range [][]string{{"test", "--reporter", "xml"}, {"test", "--filter", "("}, {"test", "sub/nothing"}} {
		if r := hermes(t, dir, env, args...); r.code != 2 {
			t.Errorf("%v: exit %d", args, r.code)
		}
	}
	empty := t.TempDir()
	if r := hermes(t, empty, env, "test"); r.code != 2 || !strings.Contains(r.err, "no *_test.js") {
		t.Errorf("no test files: exit %d %s", r.code, r.err)
	}
}

// TestHermesTestLoadFailureAndTimeout: a file that fails to load is one failure that names
// its line, and the other files still run; a test past --timeout fails and the next runs.
func TestHermesTestLoadFailureAndTimeout(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a_test.js":   "test('x', () => {});\nthis is not javascript\n",
		"b_test.lua":  "test('spins', function() while true do end end)\ntest('next', function() end)\n",
		"c_test.json": "{}",
	})
	r := hermes(t, dir, []string{"HERMES_HOME=" + t.TempDir()}, "test", "--timeout", "300ms")
	if r.code != 1 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	for _, want := range []string{"FAIL a_test.js (loading the file)", "a_test.js:2: SyntaxError", "FAIL b_test.lua: spins", "timeout", "ok   b_test.lua: next", "1 passed, 2 failed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestShippedScriptTests: the example suite under scripts/tests (JS, Lua and TypeScript, with
// modules and scripted models) passes, and its JUnit report counts every test.
func TestShippedScriptTests(t *testing.T) {
	r := hermes(t, repoPath(), []string{"HERMES_HOME=" + t.TempDir()}, "test", "--reporter", "junit", "scripts/tests")
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
		t.Fatalf("exit %d %v\n%s%s", r.code, err, r.stdout, r.err)
	}
	if doc.Tests < 6 || doc.Failures != 0 || doc.Errors != 0 || len(doc.Suites) != 3 {
		t.Fatalf("%+v", doc)
	}
}

// syncBuf is a bytes.Buffer safe for a writer goroutine and a polling reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// waitFor polls until out contains want (bounded by the test's deadline, not a timing check).
func waitFor(t *testing.T, out *syncBuf, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %q in:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHermesTestWatch: --watch runs the tests again when a file changes, until Ctrl-C.
func TestHermesTestWatch(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w_test.js": "test('a', () => {});\n"})
	cmd := hermesCmd(t, dir, []string{"HERMES_HOME=" + t.TempDir()}, "test", "--watch")
	var out, errb syncBuf
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, &out, "ok: 1 passed, 0 failed")
	waitFor(t, &errb, "watching")
	writeFiles(t, dir, map[string]string{"w_test.js": "test('a', () => {});\ntest('b', () => { throw new Error('now failing'); });\n"})
	waitFor(t, &out, "FAILED: 1 passed, 1 failed")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit after Ctrl-C: %v (the last run failed: want 1)", err)
	}
}

// TestHermesTestAsyncTests: the runner awaits what a test returns. A rejected promise fails
// the test with its message and line (an assertion stays an assertion), a promise that can no
// longer settle fails at once as never settled, a spinning async test fails at --timeout, and
// the passing async test and the Lua tests are unaffected.
func TestHermesTestAsyncTests(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"async_test.js": `const assert = require("assert");
test("async rejects", async () => { await null; throw new Error("async boom"); });
test("async assert fail", async () => { assert.equal(1, 2); });
test("then-chain fail", () => Promise.resolve().then(() => { throw new Error("in then") }));
test("never settles", () => new Promise(() => {}));
test("async passes", async () => { await null; assert.equal(1, 1); });
test("spins", async () => { await null; for (;;) {} });
`,
		"plain_test.lua": "test('returns a value', function() return 1 end)\ntest('fails', function() error('lua boom') end)\n",
	})
	r := hermes(t, dir, []string{"HERMES_HOME=" + t.TempDir()}, "test", "--timeout", "1s", "--reporter", "json")
	if r.code != 1 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	type result struct {
		Name, Status, Error, Kind string
		Line                      int `json:"error_line"`
	}
	got := map[string]result{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var res result
		if err := json.Unmarshal([]byte(l), &res); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got[res.Name] = res
	}
	for name, want := range map[string]result{
		"async rejects":     {Status: "fail", Error: "Error: async boom", Kind: "Error", Line: 2},
		"async assert fail": {Status: "fail", Error: "assertion failed: expected 2, got 1", Kind: "AssertionError", Line: 3},
		"then-chain fail":   {Status: "fail", Error: "Error: in then", Kind: "Error", Line: 4},
		"never settles":     {Status: "fail", Error: "the promise the test returned never settled", Kind: "Error"},
		"async passes":      {Status: "pass"},
		"spins":             {Status: "fail", Error: "--timeout 1s", Kind: "Timeout", Line: 7},
		"returns a value":   {Status: "pass"},
		"fails":             {Status: "fail", Error: "lua boom", Kind: "Error", Line: 2},
	} {
		g := got[name]
		if g.Status != want.Status || !strings.Contains(g.Error, want.Error) || g.Kind != want.Kind || g.Line != want.Line {
			t.Errorf("%s: %+v, want %+v", name, g, want)
		}
	}
}
