//go:build unix

package builtin

import (
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/tool/toolenv"
)

// TestTerminalEnvironmentHidesKeys runs `env` in a real shell, in the foreground and in the
// background, with Hermes' and a provider's key in this process's environment: the command
// sees neither, sees the variable the user passes through, and sees PATH and its own PWD.
func TestTerminalEnvironmentHidesKeys(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-openai-key-0001")
	t.Setenv("HERMES_API_KEY", "hk-test-hermes-key-0002")
	t.Setenv("CUSTOM_PROVIDER_KEY", "custom-provider-key-0003")
	t.Setenv("SOME_OTHER_SECRET", "other-secret-0004")
	t.Setenv("PASS_ME", "passed-through-0005")
	t.Setenv("TOOLCHAIN_FLAG", "by-pattern-0006")
	env := newEnv(t)
	term := &Terminal{Env: toolenv.Policy{
		Passthrough: []string{"PASS_ME", "TOOLCHAIN_*", "CUSTOM_*"},
		Secret:      []string{"CUSTOM_PROVIDER_KEY"},
	}}
	check := func(what, out string) {
		t.Helper()
		for _, secret := range []string{"sk-test-openai-key-0001", "hk-test-hermes-key-0002", "custom-provider-key-0003", "other-secret-0004", "OPENAI_API_KEY", "HERMES_API_KEY"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: the command saw %q:\n%s", what, secret, out)
			}
		}
		for _, want := range []string{"PASS_ME=passed-through-0005", "TOOLCHAIN_FLAG=by-pattern-0006", "PATH=", "PWD=" + env.Cwd + "\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the command did not see %q:\n%s", what, want, out)
			}
		}
	}
	check("foreground", mustOK(t, call(t, term, env, map[string]any{"command": "env"})).Content)

	mustOK(t, call(t, term, env, map[string]any{"command": "env", "background": true}))
	res := mustOK(t, call(t, &Process{}, env, map[string]any{"action": "wait", "id": "proc_1"}))
	check("background", res.Content)

	// The zero policy (what Defaults gives) passes no key either, and nothing passed through.
	out := mustOK(t, call(t, &Terminal{}, env, map[string]any{"command": "env"})).Content
	if strings.Contains(out, "sk-test-openai-key-0001") || strings.Contains(out, "hk-test-hermes-key-0002") || strings.Contains(out, "PASS_ME") {
		t.Errorf("default terminal environment holds a key or an unlisted variable:\n%s", out)
	}
}
