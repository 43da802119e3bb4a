package lua

import (
	"context"
	"errors"
	"testing"

	"github.com/hermes-go/hermes/scripting/internal/guard"
)

// TestCountedNativesBehave: the counted string functions and the rewritten .. give Lua 5.1's
// results.
func TestCountedNativesBehave(t *testing.T) {
	v := newVM(t, Options{})
	for src, want := range map[string]string{
		`(string.gsub("hello world", "o", "0"))`:                                                                   "hell0 w0rld",
		`tostring(select(2, string.gsub("hello world", "o", "0")))`:                                                "2",
		`(string.gsub("hello world", "(o)", "[%1%0%%]", 1))`:                                                       "hell[oo%] world",
		`(string.gsub("abc", "", "-"))`:                                                                            "-a-b-c-",
		`(string.gsub("abc", "x*", "-"))`:                                                                          "-a-b-c-",
		`(string.gsub("hello", "^h", "H"))`:                                                                        "Hello",
		`(string.gsub("aaa", "^a", "b"))`:                                                                          "baa",
		`(string.gsub("$name is $age", "%$(%w+)", {name = "bob", age = 42}))`:                                      "bob is 42",
		`(string.gsub("a b c", "%w", function(c) if c ~= "b" then return c:upper() end end))`:                      "A b C",
		`(string.gsub("abc", "%w", "%1"))`:                                                                         "abc",
		`(string.gsub("x = 1", "()=()", "%1-%2"))`:                                                                 "x 3-4 1",
		`table.concat({string.find("hello world", "o w")}, ",")`:                                                   "5,7",
		`table.concat({string.find("hello", "l+")}, ",")`:                                                          "3,4",
		`table.concat({string.find("key=val", "(%w+)=(%w+)")}, ",")`:                                               "1,7,key,val",
		`tostring(string.find("a.b", ".", 1, true))`:                                                               "2",
		`tostring(string.find("abc", "z"))`:                                                                        "nil",
		`string.match("  trim  ", "^%s*(.-)%s*$")`:                                                                 "trim",
		`string.match("2024-01-02", "(%d+)-(%d+)") .. "|" .. select(2, string.match("2024-01-02", "(%d+)-(%d+)"))`: "2024|01",
		`tostring(string.match("abc", "%d"))`:                                                                      "nil",
		`(function() local t = {} for w in string.gmatch("one two  three", "%a+") do t[#t+1] = w end return table.concat(t, ",") end)()`:      "one,two,three",
		`(function() local t = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do t[#t+1] = k .. v end return table.concat(t) end)()`: "a1b2",
		`(function() local n = 0 for _ in string.gmatch("abc", "") do n = n + 1 end return tostring(n) end)()`:                                "4",
		`string.format("%5.1f|%s|%q|%d%%", 3.14159, "x", "a\"b", 7)`:                                                                          `  3.1|x|"a\"b"|7%`,
		`string.rep("ab", 3, ",") .. string.upper("x") .. string.lower("Y") .. string.reverse("ab")`:                                          "ab,ab,abXyba",
		`1 .. 2 .. "x" .. 3.5`:                                                        "12x3.5",
		`(function(...) return "a" .. ... end)("b", "c")`:                             "ab",
		`(function() local function f() return "x", "y" end return "a" .. f() end)()`: "ax",
		`setmetatable({}, {__concat = function(a, b) return "meta" end}) .. "x"`:      "meta",
		`"x" .. setmetatable({}, {__concat = function(a, b) return a .. "!" end})`:    "x!",
		`table.concat({1, "b", 3}, "-", 2)`:                                           "b-3",
		`loadstring("return 'l' .. 'oad'")()`:                                         "load",
		`tostring(select(2, pcall(function() return nil .. "x" end)) ~= nil)`:         "true",
	} {
		got, err := v.Eval(context.Background(), "t.lua", src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if s, ok := got.(string); !ok || s != want {
			if f, ok := got.(interface{ String() string }); !ok || f.String() != want {
				t.Errorf("%s = %#v, want %q", src, got, want)
			}
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

// TestLimitAbortIsUncatchable: a limit hit inside pcall, xpcall or a coroutine is raised
// again, so the script never sees it as an error it could answer.
func TestLimitAbortIsUncatchable(t *testing.T) {
	for src, want := range map[string]error{
		`local ok = pcall(string.rep, "x", 2^22) return "caught"`:                                                                                guard.ErrMemoryLimit,
		`local ok = pcall(function() local s = "x" for i = 1, 30 do s = s .. s end end) return "caught"`:                                         guard.ErrMemoryLimit,
		`xpcall(function() return string.format("%s%s", string.rep("x", 2^19), string.rep("x", 2^19)) end, print) return "caught"`:               guard.ErrMemoryLimit,
		`coroutine.resume(coroutine.create(function() return table.concat({string.rep("x", 2^19), string.rep("x", 2^19)}) end)) return "caught"`: guard.ErrMemoryLimit,
		`local function f() return 1 + f() end pcall(f) return "caught"`:                                                                         guard.ErrStackLimit,
	} {
		v := newVM(t, Options{})
		v.SetMeter(&budget{limit: 1 << 20})
		got, err := v.Eval(context.Background(), "t.lua", src)
		if !errors.Is(err, want) || !errors.Is(v.Tripped(), want) {
			t.Errorf("%s: %v %v (tripped %v)", src, got, err, v.Tripped())
		}
	}
	v := newVM(t, Options{MaxString: 1 << 20})
	if _, err := v.Eval(context.Background(), "t.lua", `pcall(string.rep, "ab", 2^20)`); !errors.Is(err, guard.ErrMemoryLimit) {
		t.Errorf("over MaxString: %v", err)
	}
	v.Reset()
	if got, err := v.Eval(context.Background(), "t.lua", `string.rep("ok", 2)`); err != nil || got != "okok" {
		t.Errorf("after Reset: %v %v", got, err)
	}
}
