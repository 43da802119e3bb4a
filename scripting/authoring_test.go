package scripting

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/stdlib"
)

// TestMisspeltHookFailsLoading: a function exported under a name close to a hook's is a
// load error that names the hook meant, in each language; helpers with other names load.
func TestMisspeltHookFailsLoading(t *testing.T) {
	for name, src := range map[string]string{
		"a.js":  "export function aproval(req) { return 'allow'; }\n",
		"b.js":  "module.exports = { busyInput: () => ({mode: 'queue'}) };\n",
		"c.lua": "function routes(req) return {} end\n",
		"d.lua": "return { Steer = function(req) return {action = 'inject'} end }\n",
	} {
		_, err := Load(name, src, Options{})
		if !errors.Is(err, ErrUnknownHook) || !strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, src := range map[string]string{
		"ok.js":  "export function helper() {}\nexport function approval(req) { return helper() || 'allow'; }\n",
		"ok.lua": "local function approve() return 'allow' end\nfunction check() end\nfunction approval(req) return approve() end\n",
	} {
		p, err := Load(name, src, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p.Close()
	}
}

// TestExamplesIndependentWithLines: each example is reported at its own line; a malformed one
// fails alone; an example can expect the hook to fail.
func TestExamplesIndependentWithLines(t *testing.T) {
	js := `export function approval(req) {
  if (req.command === "boom") throw new Error("kaboom");
  return "allow";
}
export const examples = [
  { input: { command: "ls" }, want: "allow" },
  { input: { command: "ls" }, want: "deny" },
  { input: 7 },
  { input: { command: "boom" }, error: "kaboom" },
  { input: { command: "ls" }, error: true },
];
`
	lua := `function approval(req)
  if req.command == "boom" then error("kaboom") end
  return "allow"
end
examples = {
  { input = { command = "ls" }, want = "allow" },
  { input = { command = "ls" }, want = "deny" },
  { input = 7 },
  { input = { command = "boom" }, error = "kaboom" },
  { input = { command = "ls" }, error = true },
}
`
	for name, src := range map[string]string{"p.js": js, "p.lua": lua} {
		t.Run(name, func(t *testing.T) {
			if _, err := Load(name, src, Options{}); !errors.Is(err, ErrExamples) {
				t.Fatalf("load with failing examples: %v", err)
			}
			p, err := Load(name, src, Options{SkipExamples: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			res := p.RunExamples(context.Background())
			if len(res) != 5 {
				t.Fatalf("%d results", len(res))
			}
			want := []struct {
				pass bool
				line int
				text string
			}{
				{true, 6, "ok   " + name + ":6 "},
				{false, 7, "want \"deny\", got"},
				{false, 8, "input must be an object"},
				{true, 9, "ok   " + name + ":9"},
				{false, 10, "want an error matching"},
			}
			for i, w := range want {
				r := res[i]
				if r.Pass != w.pass || r.Line != w.line || !strings.Contains(r.String(), w.text) {
					t.Errorf("example %d: pass %v line %d %q", i+1, r.Pass, r.Line, r.String())
				}
			}
		})
	}
}

// TestEval runs one hook on an input, as policy eval does.
func TestEval(t *testing.T) {
	p, err := Load("e.lua", "function busy_input(req) return {mode = 'queue', reason = req.text} end\n", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, primary, err := p.Eval(context.Background(), HookBusyInput, map[string]any{"text": "hi"})
	if err != nil || primary != "mode" || got["mode"] != "queue" || got["reason"] != "hi" {
		t.Fatalf("%v %s %v", got, primary, err)
	}
	if _, _, err := p.Eval(context.Background(), "nope", nil); err == nil {
		t.Fatal("unknown hook accepted")
	}
}

// TestAPIGlobalsAndPolicyModule: the globals a test file sees and the hermes module of a policy
// are exactly what the API defines.
func TestAPIGlobalsAndPolicyModule(t *testing.T) {
	var tests Tests
	globals := []string{"print", "require"}
	for k := range tests.Globals() {
		globals = append(globals, k)
	}
	for name, got := range map[string][]string{"globals": globals, "policy hermes": stdlib.Keys(hermesPolicyModule().Members)} {
		if u, m := stdlib.CheckAPI(name, got); len(u) > 0 || len(m) > 0 {
			t.Errorf("%s: members without an API entry %v, entries without a member %v", name, u, m)
		}
	}
}
