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

// TestAsyncTestsAwaited: Call waits for the promise a test returns, so an async test fails
// with its rejection (at the line that raised it), a pending promise fails as never settled,
// and an unhandled rejection fails the call or the run like an uncaught exception.
func TestAsyncTestsAwaited(t *testing.T) {
	var fns []stdlib.Callable
	v := newVM(t, Options{Modules: []*stdlib.Module{stdlib.Assert()}, Globals: map[string]any{
		"test": stdlib.Func(func(_ context.Context, a stdlib.Args) (any, error) {
			fn, err := a.Callable(0)
			fns = append(fns, fn)
			return nil, err
		}),
	}})
	src := `const assert = require("assert");
test(async () => { await null; throw new Error("async boom"); });
test(async () => { assert.equal(1, 2); });
test(() => Promise.resolve().then(() => { throw new TypeError("in then"); }));
test(() => new Promise(() => {}));
test(async () => { await null; assert.equal(1, 1); });
test(() => { Promise.reject(new Error("stray")); });
test(async () => { const p = Promise.reject(new Error("later")); await null; try { await p; } catch (e) {} });
`
	if err := v.RunFile(context.Background(), "a_test.js", src); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		line int
		msg  string
	}{
		{2, "Error: async boom"},
		{3, "assertion failed: expected 2, got 1"},
		{4, "TypeError: in then"},
		{0, ""}, // never settles
		{0, ""}, // passes
		{7, "Uncaught (in promise) Error: stray"},
		{0, ""}, // handled before the end: passes
	}
	if len(fns) != len(want) {
		t.Fatalf("%d tests", len(fns))
	}
	for i, w := range want {
		err := v.Call(context.Background(), fns[i])
		var se *stdlib.ScriptError
		switch {
		case i == 3:
			if !errors.Is(err, ErrNeverSettled) {
				t.Errorf("test %d: %v", i+1, err)
			}
		case w.msg == "":
			if err != nil {
				t.Errorf("test %d: %v", i+1, err)
			}
		case !errors.As(err, &se) || se.File != "a_test.js" || se.Line != w.line || se.Message != w.msg:
			t.Errorf("test %d: %#v", i+1, err)
		}
	}
	if err := v.Call(context.Background(), fns[1]); !stdlib.IsAssertion(err) {
		t.Errorf("an async assertion is no longer an assertion: %v", err)
	}
	for name, src := range map[string]string{
		"r.js": "\nPromise.reject(new Error('x'));\n",
		"m.js": "async function main() {\n  await null;\n  throw new Error('x');\n}\nmain();\n",
	} {
		err := newVM(t, Options{}).RunFile(context.Background(), name, src)
		var se *stdlib.ScriptError
		if !errors.As(err, &se) || se.Message != "Uncaught (in promise) Error: x" || se.Line != strings.Count(src[:strings.Index(src, "new Error")], "\n")+1 {
			t.Errorf("%s: %#v", name, err)
		}
	}
	if err := newVM(t, Options{}).RunFile(context.Background(), "ok.js", "Promise.reject(new Error('x')).catch(() => {});\n(async () => { await null; })();\n"); err != nil {
		t.Errorf("handled rejection: %v", err)
	}
}
