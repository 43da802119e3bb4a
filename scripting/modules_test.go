package scripting

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/stdlib"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runIn runs the file main (relative to dir, which is also the module root) and returns what it
// printed and its error.
func runIn(t *testing.T, dir, main string) (string, error) {
	t.Helper()
	lang, err := Lang(main)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	name := filepath.Join(dir, main)
	rt, err := NewRuntime(lang, name, RuntimeOptions{Stdout: &out, ModuleRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Run(context.Background(), name, string(src))
	return out.String(), err
}

// TestFileModules: relative require and ES imports in JS (TypeScript too), require "x" in Lua;
// each module is loaded once per run; an error inside a module is placed in that module and
// the stack goes through both files.
func TestFileModules(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"lib/count.js": "print('loading count');\nlet n = 0;\nexports.next = () => ++n;\n",
		"lib/esm.js":   "import { next } from './count.js';\nexport const viaEsm = () => next();\nexport function fails() {\n  throw new Error('from esm');\n}\n",
		"lib/typed.ts": "export interface P { x: number }\nexport function half(p: P): number {\n  if (p.x % 2) {\n    throw new Error('odd');\n  }\n  return p.x / 2;\n}\n",
		"main.js":      "const c = require('./lib/count.js');\nconst again = require('./lib/count');\nconst { viaEsm } = require('./lib/esm.js');\nc.next(); again.next();\nprint(viaEsm());\n",
		"esm_main.js":  "import { fails } from './lib/esm.js';\nfails();\n",
		"main.ts":      "import { half } from './lib/typed';\nconst v: number = half({ x: 4 });\nprint(v);\nhalf({ x: 3 });\n",
		"lib/m.lua":    "local M = {}\nlocal n = 0\nfunction M.next() n = n + 1 return n end\nfunction M.boom()\n  error('from lua module')\nend\nprint('loading m')\nreturn M\n",
		"main.lua":     "local a = require 'lib.m'\nlocal b = require 'lib.m'\na.next()\nprint(b.next())\nb.boom()\n",
		"escape.js":    "require('../outside.js');\n",
		"escape.lua":   "require 'lib.link'\n",
		"dotdot.lua":   "require '..outside'\n",
	})
	writeTree(t, filepath.Dir(dir), map[string]string{"outside.js": "exports.x = 1;\n", "outside.lua": "return 1\n"})
	if err := os.Symlink(filepath.Join(filepath.Dir(dir), "outside.lua"), filepath.Join(dir, "lib", "link.lua")); err != nil {
		t.Fatal(err)
	}

	out, err := runIn(t, dir, "main.js")
	if err != nil || out != "loading count\n3\n" {
		t.Fatalf("js: %q %v", out, err)
	}
	out, err = runIn(t, dir, "main.lua")
	var se *stdlib.ScriptError
	if !errors.As(err, &se) || out != "loading m\n2\n" || !strings.HasSuffix(se.File, filepath.Join("lib", "m.lua")) || se.Line != 5 ||
		len(se.Stack) < 2 || !strings.Contains(se.Stack[len(se.Stack)-1], "main.lua:5") {
		t.Fatalf("lua: %q %v %#v", out, err, se)
	}
	_, err = runIn(t, dir, "esm_main.js")
	if !errors.As(err, &se) || !strings.HasSuffix(se.File, filepath.Join("lib", "esm.js")) || se.Line != 4 || !strings.Contains(se.Message, "from esm") ||
		!strings.Contains(strings.Join(se.Stack, "\n"), "esm_main.js:2") {
		t.Fatalf("esm: %v %#v", err, se)
	}
	out, err = runIn(t, dir, "main.ts")
	if !errors.As(err, &se) || out != "2\n" || !strings.HasSuffix(se.File, filepath.Join("lib", "typed.ts")) || se.Line != 4 ||
		!strings.Contains(strings.Join(se.Stack, "\n"), "main.ts:4") {
		t.Fatalf("ts: %q %v %#v", out, err, se)
	}
	for _, f := range []string{"escape.js", "escape.lua", "dotdot.lua"} {
		if _, err := runIn(t, dir, f); err == nil || !strings.Contains(err.Error(), "module") {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestTypeScriptPolicy: a policy in .ts loads with its types stripped; a bad decision is
// reported at the .ts line.
func TestTypeScriptPolicy(t *testing.T) {
	src := `interface Req { command: string }
type Decision = "allow" | "deny";
export function approval(req: Req): Decision | number {
  if (req.command === "bad") {
    return 42;
  }
  return req.command.startsWith("rm") ? "deny" : "allow";
}
export const examples = [
  { input: { command: "rm -r x" }, want: "deny" },
]
`
	p, err := Load("p.ts", src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, _, err := p.Eval(context.Background(), HookApproval, map[string]any{"command": "bad"})
	if err == nil || !strings.Contains(err.Error(), "p.ts:5") {
		t.Fatalf("%v %v", got, err)
	}
	if res := p.RunExamples(context.Background()); len(res) != 1 || !res[0].Pass || res[0].Line != 10 {
		t.Fatalf("%+v", res)
	}
	if _, err := Load("bad.ts", "const x: number = ;\n", Options{}); err == nil || !strings.Contains(err.Error(), "bad.ts:1: SyntaxError") {
		t.Fatalf("syntax: %v", err)
	}
}
