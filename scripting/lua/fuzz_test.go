package lua

import (
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
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

// FuzzCompileScript: the .. rewrite never makes a chunk that compiles fail to compile, nor
// panics.
func FuzzCompileScript(f *testing.F) {
	for _, s := range []string{
		"local s = 'a' .. 'b' .. 1 .. (f()) .. ... return s .. s",
		"return ('x'):rep(2) .. #t .. t[1] .. (a and b or c) .. -x",
		"print(a .. b, c .. d) t = { [k .. 'x'] = v .. 'y' } f{a .. b}",
		"local function g(...) return 'a' .. ..., select('#', ...) end",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		chunk, err := parse.Parse(strings.NewReader(src), "f.lua")
		if err != nil {
			return
		}
		if _, err := lua.Compile(chunk, "f.lua"); err != nil {
			return
		}
		if _, err := compile("f.lua", src); err != nil {
			t.Fatalf("valid source no longer compiles: %v\n%s", err, src)
		}
	})
}
