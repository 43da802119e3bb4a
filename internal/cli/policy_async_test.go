package cli

import (
	"strings"
	"testing"
)

// TestPolicyAsyncHook: an async hook is refused when the policy loads (policy show, eval and
// test), instead of denying every call with "decision missing".
func TestPolicyAsyncHook(t *testing.T) {
	dir := t.TempDir()
	file := writeTemp(t, dir, "async.js", "export async function approval(req) { return 'allow'; }\n")
	env := []string{"HERMES_HOME=" + t.TempDir(), "HERMES_POLICY=" + file}
	const want = "async.js: hooks must be synchronous (approval is an async function, so it returns a Promise"
	for _, args := range [][]string{{"policy", "show"}, {"policy", "eval", "async.js", "--input", `{"command":"ls"}`}} {
		r := hermes(t, dir, env, args...)
		if r.code != 1 || !strings.Contains(r.err, want) {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.err)
		}
	}
	if r := hermes(t, dir, env, "policy", "test", "async.js"); r.code != 1 || !strings.Contains(r.stdout, want) {
		t.Errorf("policy test: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
	writeTemp(t, dir, "promise.js", "export function approval(req) { return Promise.resolve('allow'); }\n")
	r := hermes(t, dir, env[:1], "policy", "eval", "promise.js", "--input", `{"command":"ls"}`)
	if r.code != 1 || !strings.Contains(r.stdout, "hooks must be synchronous (approval returned a Promise)") {
		t.Errorf("a returned Promise: exit %d\n%s%s", r.code, r.stdout, r.err)
	}
}
