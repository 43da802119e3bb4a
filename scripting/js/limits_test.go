package js

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dop251/goja"

	"github.com/hermes-go/hermes/scripting/internal/guard"
)

// TestCountedNativesBehave: the counted replacements of the builtins give the builtins'
// results (each expected value is what the ECMAScript builtin returns).
func TestCountedNativesBehave(t *testing.T) {
	v := newVM(t, Options{})
	for src, want := range map[string]string{
		`"abc".replace("b", "[$&|$'|$` + "`" + `|$$|$1|$<x>]")`:                                  "a[b|c|a|$|$1|$<x>]c",
		`"2024-01-02".replace(/(\d+)-(\d+)-(\d+)/, "$3/$2/$1 $4 $10 $01")`:                       "02/01/2024 $4 20240 2024",
		`"a-b-c".replaceAll("-", (m, i) => "<" + m + i + ">")`:                                   "a<-1>b<-3>c",
		`"xyz".replace(/(?<first>x)(?<rest>.*)/, "$<rest>$<first>$<none>")`:                      "yzx",
		`"aaa".replace(/a/g, "$")`:                                                               "$$$",
		`"ab".replace(/(a)|(z)/, "[$2]")`:                                                        "[]b",
		`"x".repeat(3) + "ab".padStart(5, "-") + "ab".padEnd(4)`:                                 "xxx---abab  ",
		`"a".concat(1, null, [2, 3])`:                                                            "a1null2,3",
		`String.raw` + "`a\\n${1 + 1}b${'c'}`":                                                   `a\n2bc`,
		`String.raw({ raw: ["x", "y", "z"] }, 1, 2, 3)`:                                          "x1y2z",
		`[1, [2, [3]], null, undefined, "s"].join("-")`:                                          "1-2,3---s",
		`(() => { const a = [1]; a.push(a); return a.join() })()`:                                "1,",
		`[1, 2].toString() + [1234.5].toLocaleString()`:                                          "1,21234.5",
		`Array.prototype.join.call({ length: 3, 0: "a", 2: "c" }, "+")`:                          "a++c",
		`JSON.stringify({ b: 1, a: [1, "x"], c: { d: null } })`:                                  `{"b":1,"a":[1,"x"],"c":{"d":null}}`,
		`JSON.stringify({ a: 1, b: 2 }, (k, v) => typeof v === "number" ? v * 10 : v)`:           `{"a":10,"b":20}`,
		`JSON.stringify({ a: 1, b: { a: 2, c: 3 }, c: [4] }, ["a", "b"])`:                        `{"a":1,"b":{"a":2}}`,
		`JSON.stringify({ toJSON() { return "t" } })`:                                            `"t"`,
		`JSON.stringify([1], null, 2)`:                                                           "[\n  1\n]",
		`"a,b,,c".split(",").length + "|" + "abc".split("") + "|" + "a1b2".split(/\d/)`:          "4|a,b,c|a,b,",
		`"a1b22".match(/\d+/g).join() + "|" + "a1".match(/\d/).index + "|" + "ab".match("b")[0]`: "1,22|1|b",
		`String.fromCharCode(104, 105) + encodeURIComponent("a b")`:                              "hia%20b",
		`(() => { const u = new Uint8Array([1, 2]); return [u instanceof Uint8Array, u.constructor === Uint8Array, new ArrayBuffer(4).byteLength, u.slice(1)[0]].join() })()`: "true,true,4,2",
		`Array.from({ length: 2 }, (_, i) => i).join() + Array(3).fill(0).join()`:                                                                                             "0,10,0,0",
		`"abc".repeat.name + "abc".replace.length + [].join.name`:                                                                                                             "repeat2join",
	} {
		got, err := v.Eval(context.Background(), "t.js", src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got != want {
			t.Errorf("%s = %q, want %q", src, got, want)
		}
	}
}

type budget struct{ n, limit int64 }

func (b *budget) Reserve(n int64) error {
	b.n += n
	if b.n > b.limit {
		return guard.ErrMemoryLimit
	}
	return nil
}

// TestDynamicCodeDisabled: code the concatenation rewrite cannot see is refused.
func TestDynamicCodeDisabled(t *testing.T) {
	v := newVM(t, Options{})
	for _, src := range []string{
		`eval("1 + 1")`,
		`new Function("a", "return a + a")`,
		`Function("return 1")()`,
		`(function () {}).constructor("return 1")`,
		`(async function () {}).constructor("return 1")`,
		`(function* () {}).constructor("yield 1")`,
	} {
		if _, err := v.Eval(context.Background(), "t.js", src); err == nil || !strings.Contains(err.Error(), ErrDynamicCode.Error()) {
			t.Errorf("%s: %v", src, err)
		}
	}
	for _, src := range []string{`var __hermes_chk = (x) => x;`, `with ({}) { 1 }`} {
		if _, err := v.Eval(context.Background(), "t.js", src); err == nil || !strings.Contains(err.Error(), "SyntaxError") {
			t.Errorf("%s: %v", src, err)
		}
	}
	if _, err := CompilePolicy("p.js", "export function approval(req) { with (req) { return tool } }\n"); err == nil {
		t.Error("a policy with a with statement compiled")
	}
}

// TestLimitAbortIsUncatchable: a counted native over the budget ends the run whatever the
// script wraps it in, and the VM reports the limit as tripped.
func TestLimitAbortIsUncatchable(t *testing.T) {
	for _, src := range []string{
		`try { "x".repeat(1 << 22) } catch (e) {} "caught"`,
		`try { "x".repeat(1 << 22) } finally { "finally" }`,
		`let s = "x".repeat(1 << 12); try { for (;;) s += s; } catch (e) {} "caught"`,
		"let s = \"x\".repeat(1 << 12); try { for (;;) s = `${s}${s}`; } catch (e) {} \"caught\"",
		`let r = "caught"; try { JSON.stringify(Array(100).fill("x".repeat(1 << 20))) } catch (e) { r = e } r`,
	} {
		v := newVM(t, Options{})
		v.SetMeter(&budget{limit: 1 << 20})
		got, err := v.Eval(context.Background(), "t.js", src)
		if !errors.Is(err, guard.ErrMemoryLimit) || !errors.Is(v.Tripped(), guard.ErrMemoryLimit) {
			t.Errorf("%s: %v %v (tripped %v)", src, got, err, v.Tripped())
		}
		var ie *goja.InterruptedError
		_ = ie
	}
	v := newVM(t, Options{MaxString: 1 << 20})
	if _, err := v.Eval(context.Background(), "t.js", `try { "ab".padEnd(1 << 20) } catch (e) {}`); !errors.Is(err, guard.ErrMemoryLimit) {
		t.Errorf("over MaxString: %v", err)
	}
	v.Reset()
	if got, err := v.Eval(context.Background(), "t.js", `"ok".repeat(2)`); err != nil || got != "okok" {
		t.Errorf("after Reset: %v %v", got, err)
	}
}
