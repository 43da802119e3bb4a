package lua

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
	t.Cleanup(v.Close)
	return v
}

func loadPolicy(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := CompilePolicy("policy.lua", src)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := newVM(t, Options{Modules: []*stdlib.Module{stdlib.Re(), stdlib.Path()}}).LoadPolicy(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func TestPolicyForms(t *testing.T) {
	cases := map[string]string{
		"returned table": "return {\n  approval = function(req)\n    if req.tool == 'terminal' then return 'ask' end\n    return 'allow'\n  end,\n}\n",
		"globals":        "function approval(req)\n  if req.tool == 'terminal' then return 'ask' end\n  return 'allow'\nend\n",
		"local table":    "local M = {}\nfunction M.approval(req)\n  return req.tool == 'terminal' and 'ask' or 'allow'\nend\nreturn M\n",
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
	src := `local function helper()
  return 42
end
return {
  approval = function(req)
    if req.tool == "a" then
      return { decision = "allow" }
    end
    if req.tool == "b" then return helper() end
    if req.tool == "c" then return end
    return "deny"
  end,
}
`
	pol := loadPolicy(t, src)
	for tool, want := range map[string]int{"a": 7, "b": 2, "c": 10, "z": 11} {
		_, line, err := pol.Call(context.Background(), "approval", map[string]any{"tool": tool})
		if err != nil || line != want {
			t.Errorf("tool %s: line %d (want %d) err %v", tool, line, want, err)
		}
	}
}

func TestSyntaxErrorHasLine(t *testing.T) {
	_, err := CompilePolicy("bad.lua", "return {\n  approval = function(req)\n    return 'allow' end end\n}\n")
	var se *stdlib.ScriptError
	if !errors.As(err, &se) || se.File != "bad.lua" || se.Line != 3 {
		t.Fatalf("%#v", err)
	}
}

func TestErrorHasFileLineAndStack(t *testing.T) {
	pol := loadPolicy(t, "local function check(r)\n  error('nope: ' .. r.tool)\nend\nreturn { approval = function(req)\n  local d = check(req)\n  return d\nend }\n")
	_, _, err := pol.Call(context.Background(), "approval", map[string]any{"tool": "x"})
	var se *stdlib.ScriptError
	if !errors.As(err, &se) || se.Line != 2 || se.File != "policy.lua" || se.Message != "nope: x" {
		t.Fatalf("%#v", err)
	}
	if !strings.Contains(se.Trace(), "policy.lua:5") {
		t.Fatalf("trace: %s", se.Trace())
	}
}

func TestAssertionFromScript(t *testing.T) {
	var out bytes.Buffer
	v := newVM(t, Options{Modules: []*stdlib.Module{stdlib.Assert()}, Stdout: &out})
	err := v.RunFile(context.Background(), "ci.lua", "local assert = require 'assert'\nprint('start', {a = 1})\nassert.equal(1 + 1, 3, 'sum')\n")
	var se *stdlib.ScriptError
	if !errors.As(err, &se) || se.Line != 3 || !stdlib.IsAssertion(err) || se.Message != "assertion failed: sum: expected 3, got 2" {
		t.Fatalf("%#v", err)
	}
	if out.String() != "start {\"a\":1}\n" {
		t.Fatalf("print: %q", out.String())
	}
}

func TestSandboxHasNoOS(t *testing.T) {
	v := newVM(t, Options{})
	for _, name := range []string{"os", "io", "debug", "package", "dofile", "loadfile"} {
		out, err := v.Eval(context.Background(), "probe", name)
		if err != nil || out != nil {
			t.Errorf("%s is reachable: %v %v", name, out, err)
		}
	}
	err := v.RunFile(context.Background(), "x.lua", "require 'fs'")
	if err == nil || !strings.Contains(err.Error(), "must be granted") {
		t.Fatalf("require fs: %v", err)
	}
}
