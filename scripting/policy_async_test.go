package scripting

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/scripting/js"
)

// TestAsyncHookRefused: a hook returning a Promise never decides (the Promise exported is an
// empty object, "decision missing"); an async hook is refused when the policy loads, and a
// Promise returned anyway fails the call saying why.
func TestAsyncHookRefused(t *testing.T) {
	for name, src := range map[string]string{
		"async.js":  "export async function approval(req) { return 'allow'; }\n",
		"arrow.js":  "exports.busy_input = async (req) => 'queue';\n",
		"typed.ts":  "export async function approval(req: { command: string }): Promise<string> { return 'allow'; }\n",
		"object.js": "module.exports = { async steer(req) { return null; } };\n",
	} {
		_, err := Load(name, src, Options{})
		if !errors.Is(err, js.ErrAsyncHook) || !strings.Contains(err.Error(), name+": hooks must be synchronous (") ||
			!strings.Contains(err.Error(), "is an async function, so it returns a Promise") {
			t.Errorf("%s: %v", name, err)
		}
	}
	p, err := Load("promise.js", "export function approval(req) { return Promise.resolve('allow'); }\n", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Approve(context.Background(), policy.ApprovalInput{Tool: "terminal", Command: "ls"})
	if !errors.Is(err, js.ErrAsyncHook) || !strings.Contains(err.Error(), "hooks must be synchronous (approval returned a Promise)") {
		t.Fatalf("a returned Promise: %v", err)
	}
	// An async helper that is not a hook is the file's business.
	q, err := Load("helper.js", "export async function later() {}\nexport function approval(req) { return 'allow'; }\n", Options{})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
}
