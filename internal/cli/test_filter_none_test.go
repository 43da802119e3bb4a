package cli

import (
	"strings"
	"testing"
)

// A --filter that matches nothing: the tests count as filtered out, stderr warns, exit 0.
func TestHermesTestFilterMatchesNothing(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"f_test.js": "test(\"a\", () => {});\ntest(\"b\", () => {});\n"})
	env := []string{"HERMES_HOME=" + t.TempDir()}
	r := hermes(t, dir, env, "test", "--filter", "zzz")
	if r.code != 0 || r.err != "hermes test: no test matched --filter \"zzz\"\n" || !strings.Contains(r.stdout, "ok: 0 passed, 0 failed, 2 filtered out (1 files, ") {
		t.Errorf("exit %d, stderr %q\n%s", r.code, r.err, r.stdout)
	}
	r = hermes(t, dir, env, "test", "--filter", "a", "--reporter", "json")
	if r.code != 0 || r.err != "" || !strings.Contains(r.stdout, `"filtered":1,`) || strings.Contains(r.stdout, `"name":"b"`) {
		t.Errorf("exit %d, stderr %q\n%s", r.code, r.err, r.stdout)
	}
}
