package js

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/stdlib"
)

// TestAssertEqualKinds: assert.equal sees what JSON cannot tell apart (the kinds of
// stdlib.Module.Exact), as Deno's assertEquals does.
func TestAssertEqualKinds(t *testing.T) {
	var out bytes.Buffer
	v := newVM(t, Options{Modules: []*stdlib.Module{stdlib.Assert(), stdlib.JSON()}, Stdout: &out})
	src := `
const assert = require("assert");
function check(name, f) {
  try { f(); print("pass", name); } catch (e) { print("fail", name, JSON.stringify(e.message)); }
}
class P { constructor(x) { this.x = x; } }
class Q { constructor(x) { this.x = x; } }
function foo() {}
check("maps", () => assert.equal(new Map([[1, 2]]), new Map([[1, 3]])));
check("maps in any order", () => assert.equal(new Map([[1, {a: 2}], ["k", 4]]), new Map([["k", 4], [1, {a: 2}]])));
check("sets", () => assert.equal(new Set([1]), new Set([2])));
check("sets in any order", () => assert.equal(new Set([1, [2]]), new Set([[2], 1])));
check("dates", () => assert.equal(new Date(0), new Date(1e12)));
check("same date", () => assert.equal(new Date(5), new Date(5)));
check("not_equal maps", () => assert.not_equal(new Map([[1, 2]]), new Map([[1, 3]])));
check("not_equal same maps", () => assert.not_equal(new Map([[1, 2]]), new Map([[1, 2]])));
check("undefined null", () => assert.equal(undefined, null));
check("NaN", () => assert.equal(NaN, NaN));
check("array object", () => assert.equal([], {}));
check("regexps", () => assert.equal(/a/g, /a/i));
check("same regexp", () => assert.equal(/a/g, /a/g));
check("typed arrays", () => assert.equal(new Uint8Array([1, 2]), new Uint8Array([1, 3])));
check("typed array kinds", () => assert.equal(new Uint8Array([1]), new Int8Array([1])));
check("classes", () => assert.equal(new P(1), new Q(1)));
check("same class", () => assert.equal(new P(1), new P(1)));
check("instance object", () => assert.equal(new P(1), {x: 1}));
check("null prototype", () => assert.equal(Object.create(null), {}));
check("functions", () => assert.equal(foo, function bar() {}));
check("same function", () => assert.equal(foo, foo));
check("undefined field", () => assert.equal({a: undefined}, {}));
check("nested", () => assert.equal({a: {b: 1}, m: new Map([["k", 1]])}, {a: {b: 2}, m: new Map([["k", 2]])}));
check("set contains", () => assert.contains(new Set([new Date(1)]), new Date(1)));
`
	if err := v.RunFile(context.Background(), "eq.js", src); err != nil {
		t.Fatal(err)
	}
	want := `fail maps "assertion failed: expected Map(1) {1 => 3}, got Map(1) {1 => 2}\n  at .get(1): expected 3, got 2"
pass maps in any order
fail sets "assertion failed: expected Set(1) {2}, got Set(1) {1}\n  missing member 2\n  unexpected member 1"
pass sets in any order
fail dates "assertion failed: expected Date(2001-09-09T01:46:40.000Z), got Date(1970-01-01T00:00:00.000Z)"
pass same date
pass not_equal maps
fail not_equal same maps "assertion failed: expected a value other than Map(1) {1 => 2}"
fail undefined null "assertion failed: expected null, got undefined"
pass NaN
fail array object "assertion failed: expected {}, got []"
fail regexps "assertion failed: expected /a/i, got /a/g"
pass same regexp
fail typed arrays "assertion failed: expected Uint8Array(2) [1,3], got Uint8Array(2) [1,2]\n  at [1]: expected 3, got 2"
fail typed array kinds "assertion failed: expected Int8Array(1) [1], got Uint8Array(1) [1]"
fail classes "assertion failed: expected Q {\"x\":1}, got P {\"x\":1}"
pass same class
fail instance object "assertion failed: expected {\"x\":1}, got P {\"x\":1}"
pass null prototype
fail functions "assertion failed: expected [Function: bar], got [Function: foo]"
pass same function
fail undefined field "assertion failed: expected {}, got {\"a\":undefined}\n  at .a: unexpected undefined"
fail nested "assertion failed: expected {\"a\":{\"b\":2},\"m\":Map(1) {\"k\" => 2}}, got {\"a\":{\"b\":1},\"m\":Map(1) {\"k\" => 1}}\n  at .a.b: expected 2, got 1\n  at .m.get(\"k\"): expected 2, got 1"
pass set contains
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Errorf("first difference:\n%s\n%s", gl[i], wl[i])
				break
			}
		}
	}
}
