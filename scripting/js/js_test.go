package js

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/stdlib"
)

func newVM(t *testing.T, o Options) *VM {
	t.Helper()
	v, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func loadPolicy(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := CompilePolicy("policy.js", src)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := newVM(t, Options{Modules: []*stdlib.Module{stdlib.Re(), stdlib.Path()}}).LoadPolicy(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func TestPolicyExportForms(t *testing.T) {
	cases := map[string]string{
		"export function": "export function approval(req) {\n  return req.tool === 'terminal' ? 'ask' : 'allow';\n}\n",
		"export const":    "export const approval = (req) => req.tool === 'terminal' ? 'ask' : 'allow';\n",
		"exports.x":       "exports.approval = function (req) { return req.tool === 'terminal' ? 'ask' : 'allow' };\n",
		"module.exports":  "module.exports = { approval(req) { return req.tool === 'terminal' ? 'ask' : 'allow' } };\n",
		"export default":  "export default {\n  approval: (req) => (req.tool === 'terminal' ? 'ask' : 'allow'),\n};\n",
		"export list":     "function approval(req) { return req.tool === 'terminal' ? 'ask' : 'allow' }\nexport { approval };\n",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			pol := loadPolicy(t, src)
			if !pol.Has("approval") || pol.Has("route") {
				t.Fatalf("hooks: %v", pol.fns)
			}
			for tool, want := range map[string]string{"terminal": "ask", "read_file": "allow"} {
				out, _, err := pol.Call(context.Background(), "approval", map[string]any{"tool": tool})
				if err != nil || out != want {
					t.Fatalf("%s: %v %v", tool, out, err)
				}
			}
		})
	}
}

func TestReturnLines(t *testing.T) {
	src := `export function approval(req) {
  if (req.tool === "a") {
    return { decision: "allow" };
  }
  if (req.tool === "b") return helper();
  if (req.tool === "c") return;
  return "deny";
}
function helper() {
  return 42;
}
export const steer = (r) => ({ action: r.x });
`
	pol := loadPolicy(t, src)
	for tool, want := range map[string]int{"a": 3, "b": 10, "c": 6, "z": 7} {
		_, line, err := pol.Call(context.Background(), "approval", map[string]any{"tool": tool})
		if err != nil || line != want {
			t.Errorf("tool %s: line %d (want %d) err %v", tool, line, want, err)
		}
	}
	out, line, err := pol.Call(context.Background(), "steer", map[string]any{"x": "hold"})
	if err != nil || line != 12 || !stdlib.Equal(out, map[string]any{"action": "hold"}) {
		t.Fatalf("arrow body: %v line %d %v", out, line, err)
	}
}

func TestSyntaxErrorHasLine(t *testing.T) {
	_, err := CompilePolicy("bad.js", "export function approval(req) {\n  return 'allow'\n}}\n")
	var se *stdlib.ScriptError
	if !errors.As(err, &se) || se.File != "bad.js" || se.Line != 3 {
		t.Fatalf("%#v", err)
	}
}

func TestThrowHasFileLineAndStack(t *testing.T) {
	pol := loadPolicy(t, "export function approval(req) {\n  return check(req);\n}\nfunction check(r) {\n  throw new Error('nope: ' + r.tool);\n}\n")
	_, _, err := pol.Call(context.Background(), "approval", map[string]any{"tool": "x"})
	var se *stdlib.ScriptError
	if !errors.As(err, &se) || se.Line != 5 || se.Message != "Error: nope: x" || len(se.Stack) < 2 {
		t.Fatalf("%#v", err)
	}
	if !strings.Contains(se.Trace(), "at approval (policy.js:2") {
		t.Fatalf("trace: %s", se.Trace())
	}
}

func TestAssertionFromScript(t *testing.T) {
	var out bytes.Buffer
	v := newVM(t, Options{Modules: []*stdlib.Module{stdlib.Assert()}, Stdout: &out})
	err := v.RunFile(context.Background(), "ci.js", "const assert = require('assert');\nprint('start', {a: 1});\nassert.equal(1 + 1, 3, 'sum');\n")
	var se *stdlib.ScriptError
	if !errors.As(err, &se) || se.Line != 3 || !stdlib.IsAssertion(err) || se.Message != "assertion failed: sum: expected 3, got 2" {
		t.Fatalf("%#v", err)
	}
	if out.String() != "start {\"a\":1}\n" {
		t.Fatalf("print: %q", out.String())
	}
}
