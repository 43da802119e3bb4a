package js

import (
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
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if _, err := goja.Compile("f.js", wrapModule(src), false); err != nil {
			return
		}
		if _, err := CompilePolicy("f.js", src); err != nil {
			// A reference to an exported name that does not exist is a runtime matter; a
			// compile error here means the instrumentation broke the code.
			t.Fatalf("valid source no longer compiles: %v\n%s", err, src)
		}
	})
}
