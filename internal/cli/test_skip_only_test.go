package cli

import (
	"encoding/xml"
	"strings"
	"testing"
)

// Skipped tests, in both languages and under describe.skip, are reported and not run (a
// skipped body throws).
var skipFiles = map[string]string{
	"skip_test.js": `const assert = require("assert");
test("runs", () => { assert.ok(true); });
test.skip("skipped", () => { throw new Error("a skipped test ran"); });
describe.skip("group", () => {
  test("inner", () => { throw new Error("a test in describe.skip ran"); });
});
describe("open", () => { test.skip("nested", () => { throw new Error("ran"); }); });
`,
	"skip_test.lua": `local assert = require "assert"
test("runs", function() assert.ok(true) end)
test.skip("skipped", function() error("a skipped test ran") end)
describe.skip("group", function()
  test("inner", function() error("a test in describe.skip ran") end)
end)
`,
}

func TestHermesTestSkip(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, skipFiles)
	env := []string{"HERMES_HOME=" + t.TempDir()}
	skipped := []string{"skip_test.js: skipped", "skip_test.js: group > inner", "skip_test.js: open > nested", "skip_test.lua: skipped", "skip_test.lua: group > inner"}

	r := hermes(t, dir, env, "test")
	if r.code != 0 {
		t.Fatalf("pretty: exit %d, want 0\n%s%s", r.code, r.stdout, r.err)
	}
	for _, s := range skipped {
		if !strings.Contains(r.stdout, "\nskip "+s+"\n") && !strings.HasPrefix(r.stdout, "skip "+s+"\n") {
			t.Errorf("pretty: no line %q in\n%s", "skip "+s, r.stdout)
		}
	}
	for _, want := range []string{"ok   skip_test.js: runs (", "ok   skip_test.lua: runs (", "\nok: 2 passed, 0 failed, 5 skipped (2 files, "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("pretty: no %q in\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "ran") || strings.Contains(r.stdout, "filtered") {
		t.Errorf("pretty: a skipped test ran, or a filtered count with no filter:\n%s", r.stdout)
	}

	r = hermes(t, dir, env, "test", "--reporter", "tap")
	if r.code != 0 {
		t.Fatalf("tap: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	for _, want := range []string{"ok 2 - skip_test.js: skipped # SKIP\n", "ok 3 - skip_test.js: group > inner # SKIP\n", "ok 1 - skip_test.js: runs\n", "1..7\n# pass 2\n# fail 0\n# skip 5\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tap: no %q in\n%s", want, r.stdout)
		}
	}

	r = hermes(t, dir, env, "test", "--reporter", "junit")
	if r.code != 0 {
		t.Fatalf("junit: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	var doc struct {
		Skipped int `xml:"skipped,attr"`
		Suites  []struct {
			Name    string `xml:"name,attr"`
			Tests   int    `xml:"tests,attr"`
			Skipped int    `xml:"skipped,attr"`
			Cases   []struct {
				Name    string    `xml:"name,attr"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("junit: %v\n%s", err, r.stdout)
	}
	if doc.Skipped != 5 || len(doc.Suites) != 2 || doc.Suites[0].Skipped != 3 || doc.Suites[0].Tests != 4 || doc.Suites[1].Skipped != 2 {
		t.Errorf("junit counts:\n%s", r.stdout)
	}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if (c.Skipped != nil) != (c.Name != "runs") {
				t.Errorf("junit: %s: %s skipped=%v", s.Name, c.Name, c.Skipped != nil)
			}
		}
	}

	r = hermes(t, dir, env, "test", "--reporter", "json")
	if r.code != 0 {
		t.Fatalf("json: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	lines := jsonLines(t, r.stdout)
	status := map[string]string{}
	for _, l := range lines[:len(lines)-1] {
		status[l["file"].(string)+": "+l["name"].(string)] = l["status"].(string)
	}
	for _, s := range skipped {
		if status[s] != "skipped" {
			t.Errorf("json: %s: status %q", s, status[s])
		}
	}
	if sum := lines[len(lines)-1]; sum["type"] != "summary" || sum["passed"] != 2.0 || sum["failed"] != 0.0 || sum["skipped"] != 5.0 || sum["ok"] != true || sum["filtered"] != nil || sum["only"] != nil {
		t.Errorf("json summary: %v", sum)
	}
}

// A file that marks tests only runs those alone; the others are filtered out, and the run
// fails though every test that ran passed.
var onlyFiles = map[string]string{
	"only_test.js": `test("left out", () => { throw new Error("a test left out by only ran"); });
test.only("chosen", () => { print("chosen ran"); });
describe.only("group", () => {
  test("inner", () => {});
  test.skip("skipped inside", () => { throw new Error("ran"); });
});
describe("other", () => { test("left out too", () => { throw new Error("ran"); }); });
`,
	"only_test.lua": `test("left out", function() error("a test left out by only ran") end)
describe.only("group", function()
  test("inner", function() end)
end)
test.only("chosen", function() end)
`,
}

func TestHermesTestOnly(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, onlyFiles)
	env := []string{"HERMES_HOME=" + t.TempDir()}
	const msg = "hermes test: only was used (test.only or describe.only), so the run fails; remove it to run every test\n"

	r := hermes(t, dir, env, "test")
	if r.code != 1 || r.err != msg {
		t.Fatalf("pretty: exit %d, stderr %q; want 1 and %q\n%s", r.code, r.err, msg, r.stdout)
	}
	for _, want := range []string{"chosen ran\n", "ok   only_test.js: chosen (", "ok   only_test.js: group > inner (", "skip only_test.js: group > skipped inside\n",
		"ok   only_test.lua: group > inner (", "ok   only_test.lua: chosen (", "\nFAILED: 4 passed, 0 failed, 1 skipped, 3 filtered out (2 files, "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("pretty: no %q in\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "left out") || strings.Contains(r.stdout, "ran\n     ") {
		t.Errorf("pretty: a test left out by only was run or reported:\n%s", r.stdout)
	}

	r = hermes(t, dir, env, "test", "--reporter", "tap")
	if r.code != 1 || r.err != msg {
		t.Errorf("tap: exit %d, stderr %q", r.code, r.err)
	}
	if want := "1..5\n# pass 4\n# fail 0\n# skip 1\n# filtered out 3\n# only was used\n"; !strings.HasSuffix(r.stdout, want) || strings.Contains(r.stdout, "left out") {
		t.Errorf("tap: want the tail %q:\n%s", want, r.stdout)
	}

	r = hermes(t, dir, env, "test", "--reporter", "junit")
	if r.code != 1 || r.err != msg {
		t.Errorf("junit: exit %d, stderr %q", r.code, r.err)
	}
	var doc struct {
		Tests   int `xml:"tests,attr"`
		Skipped int `xml:"skipped,attr"`
	}
	if err := xml.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Tests != 5 || doc.Skipped != 1 || strings.Contains(r.stdout, "left out") {
		t.Errorf("junit: %v %+v\n%s", err, doc, r.stdout)
	}

	r = hermes(t, dir, env, "test", "--reporter", "json")
	if r.code != 1 || r.err != msg {
		t.Errorf("json: exit %d, stderr %q", r.code, r.err)
	}
	lines := jsonLines(t, r.stdout)
	if len(lines) != 6 {
		t.Fatalf("json: %d lines, want 5 tests and the summary:\n%s", len(lines), r.stdout)
	}
	if sum := lines[5]; sum["passed"] != 4.0 || sum["failed"] != 0.0 || sum["skipped"] != 1.0 || sum["filtered"] != 3.0 || sum["only"] != true || sum["ok"] != false {
		t.Errorf("json summary: %v", sum)
	}

	// A failure in a test marked only is reported as a failure, and the run still says only
	// was used.
	writeFiles(t, dir, map[string]string{"only_test.lua": `test.only("fails", function() require("assert").equal(1, 2) end)` + "\n"})
	r = hermes(t, dir, env, "test", "only_test.lua")
	if r.code != 1 || r.err != msg || !strings.Contains(r.stdout, "FAIL only_test.lua: fails (") || !strings.Contains(r.stdout, "assertion failed") || !strings.Contains(r.stdout, "FAILED: 0 passed, 1 failed (1 files, ") {
		t.Errorf("failing only: exit %d, stderr %q\n%s", r.code, r.err, r.stdout)
	}
}
