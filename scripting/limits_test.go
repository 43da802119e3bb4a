package scripting

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/policy"
)

// A bomb is a policy whose approval hook tries to escape its limits. Each one runs in a child
// process (this test binary, re-executed), so the test can read the peak RSS and the CPU time
// of the whole process from its rusage, and so a bomb that does escape kills only the child.
type bomb struct {
	name string
	lang string
	src  string
	// limit is the hook limit the bomb must hit: ErrMemoryLimit or ErrTimeout.
	limit error
	// run: the bomb is a whole script run by a Runtime (hermes run --max-memory --timeout),
	// not a hook.
	run bool
}

// The sizes in the bombs are far beyond the caps the child runs with (64 MiB, 300 ms).
const (
	bombMemLimit = 64 << 20
	bombTimeout  = 300 * time.Millisecond
	// bombAddrSpace bounds the child's address space, so an escaping bomb dies there (the test
	// then fails) instead of taking the machine's memory.
	bombAddrSpace = 6 << 30
)

func jsBomb(name, body string, limit error) bomb {
	return bomb{name: "js/" + name, lang: "js", limit: limit, src: "export function approval(req) {\n  try {\n" + body + "\n  } catch (e) {}\n  return \"allow\";\n}\n"}
}

func luaBomb(name, body string, limit error) bomb {
	return bomb{name: "lua/" + name, lang: "lua", limit: limit, src: "function approval(req)\n  pcall(function()\n" + body + "\n  end)\n  return \"allow\"\nend\n"}
}

// runBomb is a script for hermes run, which must fail with the limit.
func runBomb(lang, name, body string, limit error) bomb {
	src := "try {\n" + body + "\n} catch (e) {}\n"
	if lang == "lua" {
		src = "pcall(function()\n" + body + "\nend)\n"
	}
	return bomb{name: lang + "/run-" + name, lang: lang, limit: limit, src: src, run: true}
}

var bombs = []bomb{
	// One native call that builds a string or a buffer far larger than the cap.
	jsBomb("replaceAll", `let s = "x".repeat(1 << 20); s = s.replaceAll("x", s);`, ErrMemoryLimit),
	jsBomb("replace-regexp", `let s = "x".repeat(1 << 20); s = s.replace(/x/g, s);`, ErrMemoryLimit),
	jsBomb("replace-dollar", `let s = "x".repeat(1 << 22); s = s.replace("x", "$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'$'");`, ErrMemoryLimit),
	jsBomb("String.raw", `const s = "x".repeat(1 << 24); const r = String.raw({ raw: Array(256).fill(s) }, "");`, ErrMemoryLimit),
	jsBomb("String.raw-length", `const r = String.raw({ raw: { length: 2 ** 31 } });`, ErrMemoryLimit),
	jsBomb("join", `const s = "x".repeat(1 << 24); const r = Array(256).fill(s).join("");`, ErrMemoryLimit),
	jsBomb("join-holes", `const a = []; a.length = 2 ** 31; const r = a.join("-");`, ErrMemoryLimit),
	jsBomb("toLocaleString", `const a = []; a.length = 2 ** 31; const r = a.toLocaleString();`, ErrMemoryLimit),
	jsBomb("concat", `const s = "x".repeat(1 << 24); const r = "".concat(...Array(256).fill(s));`, ErrMemoryLimit),
	jsBomb("JSON.stringify", `const s = "x".repeat(1 << 24); const r = JSON.stringify(Array(256).fill(s));`, ErrMemoryLimit),
	jsBomb("match-global", `const s = "x".repeat(1 << 24); const keep = []; for (;;) keep.push(s.match(/x/g));`, ErrMemoryLimit),
	jsBomb("split", `const s = "x".repeat(1 << 24); const keep = []; for (;;) keep.push(s.split(""));`, ErrMemoryLimit),
	jsBomb("typed-array", `const keep = []; for (;;) keep.push(new Float64Array(2 ** 28));`, ErrMemoryLimit),
	// Many calls, each under the per-call cap, kept alive.
	jsBomb("repeat-loop", `const s = "x".repeat(1 << 23); const keep = []; for (;;) keep.push(s.repeat(2));`, ErrMemoryLimit),
	jsBomb("padEnd-loop", `const keep = []; for (;;) keep.push("".padEnd(1 << 24, "ab"));`, ErrMemoryLimit),
	// Concatenation in the interpreter.
	jsBomb("plus-doubling", `let s = "x".repeat(1 << 20); for (;;) s += s;`, ErrMemoryLimit),
	jsBomb("template-doubling", "let s = \"x\".repeat(1 << 20); for (;;) s = `${s}${s}`;", ErrMemoryLimit),
	// Catching the abort.
	jsBomb("finally-loop", `try { for (;;) {} } finally { return "allow"; }`, ErrTimeout),
	jsBomb("finally-alloc", `try { let s = "x".repeat(1 << 20); s = s.replaceAll("x", s); } finally { return "allow"; }`, ErrMemoryLimit),
	jsBomb("promise", `Promise.resolve().then(() => { let s = "x".repeat(1 << 20); s = s.replaceAll("x", s); }).catch(() => {});`, ErrMemoryLimit),
	jsBomb("async", `(async () => { for (;;) await null; })();`, ErrTimeout),
	jsBomb("stack-overflow", `const f = (n) => f(n + 1) + 1; f(0);`, ErrStackLimit),
	jsBomb("json.encode", `const s = "\u00e9".repeat(1 << 22); const r = require("json").encode(Array(256).fill(s));`, ErrMemoryLimit),
	// Natives that run long without looking at the interrupt.
	jsBomb("sparse-indexOf", `const a = []; a.length = 2 ** 32 - 1; a.indexOf(1);`, ErrMemoryLimit),
	jsBomb("array-like-forEach", `Array.prototype.forEach.call({ length: 2 ** 53 - 1 }, () => {});`, ErrMemoryLimit),
	jsBomb("regexp-backtrack", `/^(a+)+\1?$/.test("a".repeat(34) + "!");`, ErrTimeout),

	luaBomb("rep", `local s = string.rep("x", 2^20) local keep = {} while true do keep[#keep + 1] = string.rep(s, 15) end`, ErrMemoryLimit),
	luaBomb("rep-one", `local s = string.rep("x", 2^30)`, ErrMemoryLimit),
	luaBomb("format", `local s = string.rep("x", 2^20) while true do s = string.format("%s%s%s%s", s, s, s, s) end`, ErrMemoryLimit),
	luaBomb("gsub", `local s = string.rep("x", 2^20) s = string.gsub(s, "x", s)`, ErrMemoryLimit),
	luaBomb("gsub-capture", `local s = string.rep("x", 2^20) s = string.gsub(s, "(x)", "%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0%0")`, ErrMemoryLimit),
	luaBomb("table.concat", `local s = string.rep("x", 2^24) local t = {} for i = 1, 256 do t[i] = s end local r = table.concat(t)`, ErrMemoryLimit),
	luaBomb("concat-doubling", `local s = string.rep("x", 2^20) while true do s = s .. s end`, ErrMemoryLimit),
	luaBomb("concat-many", `local s = string.rep("x", 2^24) local r = s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s .. s`, ErrMemoryLimit),
	luaBomb("json.encode", `local s = string.rep("x", 2^22) local t = {} for i = 1, 256 do t[i] = s end local r = require("json").encode(t)`, ErrMemoryLimit),
	luaBomb("stack-overflow", `local function f(n) return 1 + f(n + 1) end f(0)`, ErrStackLimit),
	luaBomb("xpcall-overflow", `local function f(n) return 1 + f(n + 1) end xpcall(function() return f(0) end, function(e) return "fine" end)`, ErrStackLimit),
	luaBomb("xpcall-alloc", `xpcall(function() local s = string.rep("x", 2^20) while true do s = s .. s end end, function(e) return e end)`, ErrMemoryLimit),
	luaBomb("pcall-loop", `while true do pcall(function() while true do end end) end`, ErrTimeout),
	luaBomb("coroutine-loop", `local co = coroutine.create(function() while true do end end) coroutine.resume(co)`, ErrTimeout),
	luaBomb("coroutine-alloc", `local co = coroutine.create(function() local s = string.rep("x", 2^20) while true do s = s .. s end end) coroutine.resume(co)`, ErrMemoryLimit),
	runBomb("js", "replaceAll", `let s = "x".repeat(1 << 20); s = s.replaceAll("x", s);`, ErrMemoryLimit),
	runBomb("js", "plus-doubling", `let s = "x".repeat(1 << 20); for (;;) s += s;`, ErrMemoryLimit),
	runBomb("js", "regexp-backtrack", `/^(a+)+\1?$/.test("a".repeat(34) + "!");`, ErrTimeout),
	runBomb("lua", "gsub", `local s = string.rep("x", 2^20) s = string.gsub(s, "x", s)`, ErrMemoryLimit),
	runBomb("lua", "concat-doubling", `local s = string.rep("x", 2^20) while true do s = s .. s end`, ErrMemoryLimit),
	runBomb("lua", "pattern-backtrack", `string.find(string.rep("a", 10000), string.rep("a-", 12) .. "b")`, ErrTimeout),
	luaBomb("pattern-backtrack", `string.find(string.rep("a", 10000), string.rep("a-", 12) .. "b")`, ErrTimeout),
}

// bombReport is what the child prints.
type bombReport struct {
	Decision string `json:"decision"`
	Err      string `json:"err"`
	Limit    bool   `json:"limit"`
}

const bombEnv = "HERMES_TEST_SCRIPT_BOMB"

// TestBombChild is the child side of TestBombsStayInTheirBox; it does nothing in a normal run.
func TestBombChild(t *testing.T) {
	name := os.Getenv(bombEnv)
	if name == "" {
		t.Skip("runs as a child of TestBombsStayInTheirBox")
	}
	var b *bomb
	for i := range bombs {
		if bombs[i].name == name {
			b = &bombs[i]
		}
	}
	if b == nil {
		t.Fatalf("no bomb %q", name)
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: bombAddrSpace, Max: bombAddrSpace})
	if b.run {
		o := RuntimeOptions{MemoryLimit: bombMemLimit, Timeout: bombTimeout}
		if b.limit != ErrTimeout {
			o.Timeout = 20 * time.Second
		}
		rt, err := NewRuntime(b.lang, "bomb", o)
		if err != nil {
			t.Fatal(err)
		}
		err = rt.Run(context.Background(), "bomb."+b.lang, b.src)
		rt.Close()
		r := bombReport{Decision: policy.Allow, Limit: errors.Is(err, b.limit)}
		if err != nil {
			r.Decision, r.Err = policy.Deny, err.Error()
		}
		out, _ := json.Marshal(r)
		fmt.Printf("BOMB %s\n", out)
		return
	}
	o := Options{Workers: 1, MemoryLimit: bombMemLimit, Timeout: bombTimeout}
	if b.limit != ErrTimeout {
		// The memory cap, not the clock, must stop it: the deadline is far above what a bomb
		// needs even on a loaded machine (a starved child got 3 s of CPU in 20 s of wall time).
		o.Timeout = 60 * time.Second
	}
	p, err := Load("policy."+b.lang, b.src, o)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Approve(context.Background(), policy.ApprovalInput{Tool: "terminal", Command: "rm -rf /"})
	// Close waits for the worker: a VM still running after its deadline keeps the child alive.
	p.Close()
	r := bombReport{Decision: d.Decision, Limit: errors.Is(err, b.limit)}
	if err != nil {
		r.Err = err.Error()
	}
	out, _ := json.Marshal(r)
	fmt.Printf("BOMB %s\n", out)
}

// TestBombsStayInTheirBox runs each bomb as an approval hook through the policy path, in a
// child process, and checks that the hook fails closed naming the limit it hit, that the
// child's peak RSS stays near the cap, and that its CPU time stays bounded: a VM left running
// past its deadline would burn CPU until the child is killed.
func TestBombsStayInTheirBox(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process per bomb")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads rusage of a Linux child")
	}
	child := os.Args[0]
	if raceEnabled {
		// The race detector multiplies memory use and CPU time, and needs more address space
		// than the child may have: the bombs run in a build of this test without it.
		child = filepath.Join(t.TempDir(), "bombs.test")
		build := exec.Command("go", "test", "-c", "-o", child, ".")
		if out, err := build.CombinedOutput(); err != nil {
			t.Skipf("cannot build the test without the race detector: %v\n%s", err, out)
		}
	}
	const (
		rssCeiling = bombMemLimit + 256<<20 // the cap, the runtime and generous slack
		// A VM that escaped its limits runs until the child is killed at wallLimit (two cores:
		// minutes of CPU). A bomb stopped by its cap takes at most a few seconds of CPU, so the
		// ceiling sits between the two.
		cpuCeiling = 30 * time.Second
		wallLimit  = 120 * time.Second
	)
	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wallLimit)
			defer cancel()
			cmd := exec.CommandContext(ctx, child, "-test.run=^TestBombChild$", "-test.v")
			cmd.Env = append(os.Environ(), bombEnv+"="+b.name, "GOMAXPROCS=2")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			var rss int64
			var cpu time.Duration
			if ru != nil {
				rss = ru.Maxrss << 10
				cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
			t.Logf("%s: peak RSS %d MiB, CPU %v", b.name, rss>>20, cpu.Round(time.Millisecond))
			var rep *bombReport
			sc := bufio.NewScanner(&stdout)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if line, ok := strings.CutPrefix(sc.Text(), "BOMB "); ok {
					rep = new(bombReport)
					if err := json.Unmarshal([]byte(line), rep); err != nil {
						t.Fatal(err)
					}
				}
			}
			if rep == nil {
				t.Fatalf("child did not report (%v): %s", runErr, clip(stderr.String()+stdout.String(), 2000))
			}
			if rep.Decision != policy.Deny {
				t.Errorf("decision %q (err %q), want deny", rep.Decision, rep.Err)
			}
			if !rep.Limit {
				t.Errorf("error %q does not name the limit %v", rep.Err, b.limit)
			}
			if rss > rssCeiling {
				t.Errorf("peak RSS %d MiB, want under %d MiB", rss>>20, rssCeiling>>20)
			}
			if cpu > cpuCeiling {
				t.Errorf("CPU %v, want under %v", cpu, cpuCeiling)
			}
		})
	}
}

// TestEveryHookFailsClosedOnALimit: each hook catches its own limit hit and returns a valid
// decision; the call still fails with the limit, so the engine takes the safe default.
func TestEveryHookFailsClosedOnALimit(t *testing.T) {
	both(t, func(t *testing.T, lang string) {
		name, code := src(lang, `
const bomb = () => { try { let s = "x".repeat(1 << 20); s = s.replaceAll("x", s); } catch (e) {} finally { return true; } };
const recurse = () => { const f = (n) => f(n + 1) + 1; try { f(0); } catch (e) {} return true; };
module.exports = {
  approval: (r) => (bomb(), "allow"),
  busy_input: (c) => (bomb(), "interrupt"),
  steer: (s) => (recurse(), "deliver"),
  route: (r) => (bomb(), { session_id: "attacker" }),
};
`, `
local function bomb() pcall(function() local s = string.rep("x", 2^20) s = string.gsub(s, "x", s) end) return true end
local function recurse() local function f(n) return 1 + f(n + 1) end pcall(f, 0) return true end
return {
  approval = function(r) bomb() return "allow" end,
  busy_input = function(c) bomb() return "interrupt" end,
  steer = function(s) recurse() return "deliver" end,
  route = function(r) bomb() return { session_id = "attacker" } end,
}
`)
		// A deadline far above what the bombs need, so that on a loaded machine the limit that
		// stops them is still the memory cap or the stack, never the clock.
		p := load(t, name, code, Options{MemoryLimit: 32 << 20, Timeout: 60 * time.Second, Workers: 1, SkipExamples: true})
		ctx := context.Background()
		d, err := p.Approve(ctx, policy.ApprovalInput{Tool: "terminal"})
		if !errors.Is(err, ErrMemoryLimit) || d.Decision != policy.Deny {
			t.Errorf("approval: %+v %v", d, err)
		}
		if b, err := p.BusyInput(ctx, policy.BusyInput{Text: "x"}); !errors.Is(err, ErrMemoryLimit) || b.Mode == "interrupt" {
			t.Errorf("busy_input: %+v %v", b, err)
		}
		if s, err := p.Steer(ctx, policy.SteerInput{Text: "x"}); !errors.Is(err, ErrStackLimit) || s.Action == "deliver" {
			t.Errorf("steer: %+v %v", s, err)
		}
		if r, err := p.Route(ctx, policy.RouteInput{Surface: "http", SessionID: "s1"}); !errors.Is(err, ErrMemoryLimit) || r.SessionID == "attacker" {
			t.Errorf("route: %+v %v", r, err)
		}
	})
}
