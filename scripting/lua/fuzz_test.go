package lua

import (
	"strings"
	"testing"

	"github.com/yuin/gopher-lua/parse"
)

// FuzzCompilePolicy: instrumenting returns never makes a valid chunk fail to compile.
func FuzzCompilePolicy(f *testing.F) {
	for _, s := range []string{
		"return { approval = function(r) if r.x then return 'a' end return 'b' end }",
		"function steer(s) return end",
		"local function f() return function() return 1, 2 end end return f",
		"for i = 1, 3 do if i == 2 then return i end end",
		"repeat local x = 1 until true return",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if _, err := parse.Parse(strings.NewReader(src), "f.lua"); err != nil {
			return
		}
		if _, err := CompilePolicy("f.lua", src); err != nil {
			t.Fatalf("valid source no longer compiles: %v\n%s", err, src)
		}
	})
}
