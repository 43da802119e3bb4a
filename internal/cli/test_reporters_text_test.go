package cli

import (
	"encoding/xml"
	"strings"
	"testing"
)

// The machine reporters name every test's file, and TAP carries no raw control character: a
// test name or printed line with an escape sequence is escaped (\x1b), never sent to the CI
// log that shows it.
func TestHermesTestReportersText(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"ctl_test.js": "const assert = require(\"assert\");\n" +
			"test(\"clears\\x1b[2J the screen\", () => { print(\"bell\\x07 rings\"); });\n" +
			"test(\"fails\\x1b[31m red\", () => { print(\"esc\\x1b[0m\"); assert.equal(1, 2); });\n",
	})
	env := []string{"HERMES_HOME=" + t.TempDir()}

	r := hermes(t, dir, env, "test", "--reporter", "tap")
	if r.code != 1 {
		t.Fatalf("tap: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	if strings.ContainsAny(r.stdout, "\x1b\x07") {
		t.Fatalf("tap carries a raw control character: %q", r.stdout)
	}
	for _, want := range []string{"ok 1 - ctl_test.js: clears\\x1b[2J the screen\n", "# bell\\x07 rings\n", "not ok 2 - ctl_test.js: fails\\x1b[31m red\n", "# esc\\x1b[0m\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tap lacks %q:\n%s", want, r.stdout)
		}
	}

	r = hermes(t, dir, env, "test", "--reporter", "junit")
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name string `xml:"name,attr"`
				File string `xml:"file,attr"`
				Line int    `xml:"line,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 2 {
		t.Fatalf("junit: %v\n%s", err, r.stdout)
	}
	pass, fail := doc.Suites[0].Cases[0], doc.Suites[0].Cases[1]
	if pass.File != "ctl_test.js" || fail.File != "ctl_test.js" || fail.Line != 3 {
		t.Fatalf("junit cases: passing %+v, failing %+v", pass, fail)
	}
}

// Flags may follow the paths (`hermes test dir --filter x`), as in deno test and go test;
// after "--" every argument is a path.
func TestHermesTestFlagsAfterPaths(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, suiteFiles)
	env := []string{"HERMES_HOME=" + t.TempDir()}
	r := hermes(t, dir, env, "test", "math_test.js", "--filter", "^(adds|after)", "--reporter", "tap")
	if r.code != 0 || !strings.Contains(r.stdout, "ok 1 - math_test.js: adds\n") || !strings.Contains(r.stdout, "1..2\n") {
		t.Fatalf("flags after a path: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	r = hermes(t, dir, env, "test", "--", "--filter")
	if r.code != 2 || !strings.Contains(r.err, "--filter") {
		t.Fatalf("after --, --filter is a path: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
}
