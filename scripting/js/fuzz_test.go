package js

import (
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// FuzzCompilePolicy: the export rewrite and the return instrumentation never turn valid code
// into invalid code, and never panic.
func FuzzCompilePolicy(f *testing.F) {
	for _, s := range []string{
		"export function approval(r) { return r.x ? {a: 1} : 'b' }",
		"export const steer = (s) => ({ action: s.x })\nexport { steer as y }",
		"module.exports = { route() { return } }",
		"export default { approval: r => r }",
		"function f() { return function () { return () => 1 } }",
		"const x = `return ${1}`; export let y = () => x",
		"label: for (;;) { break label } // return",
		"export function approval(r) { let s = (r.a) + /* + */ (r.b + 1); s += `${s}x${(1) + (2)}`; return s + '' }",
		"const f = (a, b) => a + +b; export const g = (x) => (x) + (x)++ + ((x) + 1)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if _, err := goja.Compile("f.js", wrapModule(src), false); err != nil {
			return
		}
		if _, err := CompilePolicy("f.js", src); err != nil && !refused(err) {
			// A reference to an exported name that does not exist is a runtime matter; a
			// compile error here means the instrumentation broke the code.
			t.Fatalf("valid source no longer compiles: %v\n%s", err, src)
		}
	})
}

// refused: the source uses what scripts may not (a with statement, the reserved name).
func refused(err error) bool {
	return strings.Contains(err.Error(), "with statements are not allowed") || strings.Contains(err.Error(), checkFunc)
}

// FuzzCompileScript: the concatenation rewrite of scripts never turns valid code into invalid
// code, and never panics.
func FuzzCompileScript(f *testing.F) {
	for _, s := range []string{
		"let s = 'a'; s += s; s = s + (s) + `${s}`; s",
		"(a) + b; a + (b); ((a)) + ((b)); a /* x */ + // y\n b",
		"x => x + 1; function g() { return 'a' + 'b' }",
		"o.p += 1; o[k] += 'x'; (o).q += (1 + 2)",
		"a++ + ++b; a + +b; a - -b; +a + +b",
		"`${`${a + b}`}` + tag`${a}` + `plain`",
		"class A { x = 1 + 2; m(a = 1 + 1) { return a + this.x } }",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if _, err := goja.Compile("f.js", src, false); err != nil {
			return
		}
		if _, err := compileScript("f.js", src); err != nil && !refused(err) {
			t.Fatalf("valid source no longer compiles: %v\n%s", err, src)
		}
	})
}
