package scripting

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/scripting/js"
	"github.com/hermes-go/hermes/scripting/lua"
)

// benchPolicy is a realistic small approval hook: a few field tests, no regex.
var benchPolicy = map[string]string{
	"js": `export function approval(req) {
  if (req.tool !== "terminal") return "allow";
  if (req.pattern !== "") return { decision: "ask", reason: req.pattern };
  return req.command.startsWith("git ") ? "allow" : "ask";
}`,
	"lua": `function approval(req)
  if req.tool ~= "terminal" then return "allow" end
  if req.pattern ~= "" then return { decision = "ask", reason = req.pattern } end
  if req.command:sub(1, 4) == "git " then return "allow" end
  return "ask"
end`,
}

var benchInput = policy.ApprovalInput{SessionID: "s1", Tool: "terminal", Command: "git status", Args: json.RawMessage(`{"command":"git status"}`), Cwd: "/src/app"}

// BenchmarkHook is one warm approval hook call through the pool: typed request in, typed
// decision out.
func BenchmarkHook(b *testing.B) {
	for _, lang := range []string{"js", "lua"} {
		b.Run(lang, func(b *testing.B) {
			p := load(b, "bench."+lang, benchPolicy[lang], Options{Workers: 1})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				d, err := p.Approve(ctx, benchInput)
				if err != nil || d.Decision != "allow" {
					b.Fatal(d, err)
				}
			}
		})
	}
}

// BenchmarkHookDirect is the same call without the pool hand-off (same goroutine, no
// watchdog): what the VM binding itself costs.
func BenchmarkHookDirect(b *testing.B) {
	ctx := context.Background()
	b.Run("js", func(b *testing.B) {
		prg, _ := js.CompilePolicy("bench.js", benchPolicy["js"])
		vm, _ := js.New(js.Options{})
		pol, err := vm.LoadPolicy(ctx, prg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			out, _, err := pol.Call(ctx, "approval", approvalInput(benchInput))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := approvalDecision(out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lua", func(b *testing.B) {
		prg, _ := lua.CompilePolicy("bench.lua", benchPolicy["lua"])
		vm, _ := lua.New(lua.Options{})
		defer vm.Close()
		pol, err := vm.LoadPolicy(ctx, prg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			out, _, err := pol.Call(ctx, "approval", approvalInput(benchInput))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := approvalDecision(out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkVMCreate is the cost of one pooled VM: a runtime with the policy modules and the
// policy loaded (what a worker pays after its VM was discarded).
func BenchmarkVMCreate(b *testing.B) {
	ctx := context.Background()
	o := Options{}
	o.defaults()
	mods, _ := policyModules("bench", o)
	b.Run("js", func(b *testing.B) {
		prg, _ := js.CompilePolicy("bench.js", benchPolicy["js"])
		b.ReportAllocs()
		for b.Loop() {
			vm, err := js.New(js.Options{Modules: mods})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := vm.LoadPolicy(ctx, prg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lua", func(b *testing.B) {
		prg, _ := lua.CompilePolicy("bench.lua", benchPolicy["lua"])
		b.ReportAllocs()
		for b.Loop() {
			vm, err := lua.New(lua.Options{Modules: mods})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := vm.LoadPolicy(ctx, prg); err != nil {
				b.Fatal(err)
			}
			vm.Close()
		}
	})
}

// BenchmarkPoolThroughput drives a 2-VM pool from parallel callers (run with -cpu 2): wall
// time per decision.
func BenchmarkPoolThroughput(b *testing.B) {
	for _, lang := range []string{"js", "lua"} {
		b.Run(lang, func(b *testing.B) {
			p := load(b, "bench."+lang, benchPolicy[lang], Options{Workers: 2})
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := p.Approve(ctx, benchInput); err != nil || d.Decision != "allow" {
						b.Error(d, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkHookRealistic is the parity policy (regular expressions, path checks) deciding a
// terminal command and a file write.
func BenchmarkHookRealistic(b *testing.B) {
	term := policy.ApprovalInput{Tool: "terminal", Command: "go test ./...", Args: json.RawMessage(`{"command":"go test ./..."}`), Cwd: "/src/app"}
	write := policy.ApprovalInput{Tool: "write_file", Args: json.RawMessage(`{"path":"notes/a.md","content":"x"}`), Cwd: "/src/app"}
	for _, lang := range []string{"js", "lua"} {
		b.Run(lang, func(b *testing.B) {
			p := open(b, "testdata/parity."+lang, Options{Workers: 1})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				for _, in := range []policy.ApprovalInput{term, write} {
					if d, err := p.Approve(ctx, in); err != nil || d.Decision != "allow" {
						b.Fatal(d, err)
					}
				}
			}
		})
	}
}
