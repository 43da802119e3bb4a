package cli

import (
	"strings"
	"testing"
)

// TestPolicyInputFields: a field a hook's input does not have, or a value of the wrong type,
// is an error naming it, in an example (which then fails) and in policy eval --input (exit 2);
// it used to be ignored, the hook seeing its default (an empty command).
func TestPolicyInputFields(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	writeTemp(t, dir, "rm.js", `export function approval(req) {
  return req.command.includes("rm -rf") ? "deny" : "allow";
}
export const examples = [
  { input: { comand: "rm -rf /" }, want: "allow" },
  { input: { command: "rm -rf /" }, want: "deny" },
  { hook: "compact", input: { context_used: "lots" }, want: false },
  { input: { command: "ls", mode: "yolo" }, want: "allow" },
];
`)
	r := hermes(t, dir, env, "policy", "test", "rm.js")
	for _, want := range []string{
		`FAIL rm.js:5 #1 approval {"comand":"rm -rf /"}: examples[1]: invalid input: unknown field "comand" in the approval input (did you mean "command"?)`,
		`FAIL rm.js:7 #3 compact {"context_used":"lots"}: examples[3]: invalid input: compact.context_used must be a number, not a string`,
		"2 passed, 2 failed",
	} {
		if r.code != 1 || !strings.Contains(r.stdout, want) {
			t.Errorf("policy test: exit %d, lacks %q:\n%s%s", r.code, want, r.stdout, r.err)
		}
	}
	for input, want := range map[string]string{
		`{"comand":"rm -rf /"}`:   `unknown field "comand" in the approval input (did you mean "command"?)`,
		`{"command":42}`:          "approval.command must be a string, not a number",
		`{"patterns":"notalist"}`: "approval.patterns must be a list of strings, not a string",
		`{"patterns":["a",1]}`:    "approval.patterns[1] must be a string, not a number",
		`null`:                    "--input must be a JSON object, not null",
		`[]`:                      "--input must be a JSON object, not []",
		`"x"`:                     `--input must be a JSON object, not "x"`,
	} {
		r := hermes(t, dir, env, "policy", "eval", "rm.js", "--input", input)
		if r.code != 2 || !strings.Contains(r.err, want) || r.stdout != "" {
			t.Errorf("eval --input %s: exit %d, stderr %q (want %q), stdout %q", input, r.code, r.err, want, r.stdout)
		}
	}
	r = hermes(t, dir, env, "policy", "eval", "rm.js", "--hook", "busy_input", "--input", `{"txt":"hi"}`)
	if r.code != 2 || !strings.Contains(r.err, `unknown field "txt" in the busy_input input (did you mean "text"?)`) {
		t.Errorf("busy_input typo: exit %d %s", r.code, r.err)
	}
	r = hermes(t, dir, env, "policy", "eval", "rm.js", "--input", `{"command":"rm -rf /","patterns":[]}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"decision":"deny"`) {
		t.Errorf("valid input: exit %d %s %s", r.code, r.stdout, r.err)
	}
}
