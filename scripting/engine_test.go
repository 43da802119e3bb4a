package scripting_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/engine/tool/danger"
	"github.com/hermes-go/hermes/scripting"
)

func check(cmd string) tool.Verdict {
	r := danger.Check(cmd, danger.Options{})
	v := tool.Verdict{Blocked: r.Hardline, Reason: r.Reason, Command: cmd}
	for _, m := range r.Matches {
		v.Patterns = append(v.Patterns, m.Key)
	}
	return v
}

func callArgs(cmd string) []string {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return []string{string(b)}
}

// TestEngineKeepsServing: a policy hook that loops forever is stopped at its deadline, the
// call is denied with the reason recorded as a policy.decision event, and another session
// served by the same policy runs its turn to completion meanwhile.
func TestEngineKeepsServing(t *testing.T) {
	dir := t.TempDir()
	polPath := filepath.Join(dir, "policy.js")
	os.WriteFile(polPath, []byte(`export function approval(req) {
  if (req.command.startsWith("spin")) { for (;;) {} }
  return req.command.startsWith("echo") ? "allow" : "deny";
}
`), 0o644)
	set, closer, err := scripting.LoadPolicy(polPath, scripting.Options{Timeout: 100 * time.Millisecond, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()

	srvA, srvB := openaitest.New(t), openaitest.New(t) // one model per session: replies never cross
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Config{
		Store: st, Providers: map[string]model.Provider{
			"a": openai.New(openai.Config{BaseURL: srvA.URL(), MaxRetries: -1}),
			"b": openai.New(openai.Config{BaseURL: srvB.URL(), MaxRetries: -1}),
		},
		DefaultModel: "a:fake", Tools: tool.NewRegistry(builtin.Defaults(check)...), Policy: set, Cwd: t.TempDir(),
		HookTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Session A: the model asks for "spin", whose approval hook never returns.
	srvA.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: callArgs("spin")}), openaitest.Text("gave up"))
	a, _ := eng.Create(ctx, engine.CreateOptions{})
	subA := a.Subscribe(0)
	defer subA.Close()
	admA, err := a.Submit(ctx, engine.Prompt{Text: "spin"})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until A's tool call reached the policy, then run B through the same pool.
	for {
		ev, err := subA.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == engine.EvToolStart {
			break
		}
	}
	srvB.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: callArgs("echo hello")}), openaitest.Text("done"))
	b, _ := eng.Create(ctx, engine.CreateOptions{Model: "b:fake"})
	admB, err := b.Submit(ctx, engine.Prompt{Text: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	outB, err := b.Wait(ctx, admB.TurnID)
	if err != nil || outB.Status != engine.StatusCompleted {
		t.Fatalf("B: %+v %v", outB, err)
	}
	outA, err := a.Wait(ctx, admA.TurnID)
	if err != nil || outA.Status != engine.StatusCompleted || outA.Text != "gave up" {
		t.Fatalf("A: %+v %v", outA, err)
	}
	var dec *engine.PolicyDecision
	var done *engine.ToolComplete
	evs, _ := a.EventsSince(0)
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case engine.PolicyDecision:
			dec = &d
		case engine.ToolComplete:
			done = &d
		}
	}
	if dec == nil || dec.Decision != "deny" || !strings.Contains(dec.Error, "deadline exceeded") || !strings.Contains(dec.Error, "policy.js:2") {
		t.Fatalf("decision event: %+v", dec)
	}
	if done == nil || !done.Blocked || !strings.Contains(done.Result.Content, "BLOCKED") {
		t.Fatalf("tool: %+v", done)
	}
	evs, _ = b.EventsSince(0)
	for _, ev := range evs {
		if d, ok := ev.Data.(engine.ToolComplete); ok && (d.Blocked || !strings.Contains(d.Result.Content, "hello")) {
			t.Fatalf("B's tool: %+v", d)
		}
	}
}

// TestEngineServesWhileHookSpins: with no deadline in reach, another session completes a turn
// while the first session's hook is still spinning; interrupting the first turn then stops
// the hook (through the call's context) and the call is denied.
func TestEngineServesWhileHookSpins(t *testing.T) {
	dir := t.TempDir()
	polPath := filepath.Join(dir, "policy.lua")
	os.WriteFile(polPath, []byte("function approval(req)\n  if req.command == 'spin' then while true do end end\n  return 'allow'\nend\n"), 0o644)
	set, closer, err := scripting.LoadPolicy(polPath, scripting.Options{Timeout: time.Hour, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	srvA, srvB := openaitest.New(t), openaitest.New(t)
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Config{
		Store: st, Providers: map[string]model.Provider{
			"a": openai.New(openai.Config{BaseURL: srvA.URL(), MaxRetries: -1}),
			"b": openai.New(openai.Config{BaseURL: srvB.URL(), MaxRetries: -1}),
		},
		DefaultModel: "a:fake", Tools: tool.NewRegistry(builtin.Defaults(check)...), Policy: set, Cwd: t.TempDir(), HookTimeout: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srvA.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: callArgs("spin")}))
	a, _ := eng.Create(ctx, engine.CreateOptions{})
	subA := a.Subscribe(0)
	defer subA.Close()
	admA, _ := a.Submit(ctx, engine.Prompt{Text: "spin"})
	for ev, err := subA.Next(ctx); ev.Type != engine.EvToolStart; ev, err = subA.Next(ctx) {
		if err != nil {
			t.Fatal(err)
		}
	}
	srvB.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: callArgs("echo hi")}), openaitest.Text("done"))
	b, _ := eng.Create(ctx, engine.CreateOptions{Model: "b:fake"})
	admB, _ := b.Submit(ctx, engine.Prompt{Text: "go"})
	if out, err := b.Wait(ctx, admB.TurnID); err != nil || out.Status != engine.StatusCompleted || out.Text != "done" {
		t.Fatalf("B: %+v %v", out, err)
	}
	if a.Status() != engine.StatusWorking {
		t.Fatalf("A's hook cannot have returned, yet A is %s", a.Status())
	}
	a.Interrupt("user")
	out, err := a.Wait(ctx, admA.TurnID)
	if err != nil || out.Status != engine.StatusCancelled {
		t.Fatalf("A: %+v %v", out, err)
	}
	evs, _ := a.EventsSince(0)
	found := false
	for _, ev := range evs {
		if d, ok := ev.Data.(engine.PolicyDecision); ok && d.Hook == "approval" && d.Decision == "deny" && d.Error != "" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no failed approval decision in %+v", evs)
	}
}
