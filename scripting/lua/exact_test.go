package lua

import (
	"bytes"
	"context"
	"testing"

	"github.com/hermes-go/hermes/stdlib"
)

// TestAssertEqualTables: Lua's assert.equal compares tables deeply (the JS kinds do not
// arise), and a failure lists the paths that differ.
func TestAssertEqualTables(t *testing.T) {
	var out bytes.Buffer
	v := newVM(t, Options{Modules: []*stdlib.Module{stdlib.Assert()}, Stdout: &out})
	src := `
local assert = require("assert")
local function check(name, f)
  local ok, err = pcall(f)
  print(ok and "pass" or "fail", name, ok and "" or tostring(err))
end
check("tables", function() assert.equal({a = {b = 1}, c = {1, 2}}, {a = {b = 1}, c = {1, 2}}) end)
check("empty", function() assert.equal({}, {}) end)
check("nil", function() assert.equal(nil, nil) end)
check("differ", function() assert.equal({a = {b = 1}}, {a = {b = 2}}) end)
check("not_equal", function() assert.not_equal({1}, {1}) end)
`
	if err := v.RunFile(context.Background(), "eq.lua", src); err != nil {
		t.Fatal(err)
	}
	want := "pass tables \npass empty \npass nil \n" +
		"fail differ eq.lua:10: assertion failed: expected {\"a\":{\"b\":2}}, got {\"a\":{\"b\":1}}\n  at .a.b: expected 2, got 1\n" +
		"fail not_equal eq.lua:11: assertion failed: expected a value other than [1]\n"
	if got := out.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
