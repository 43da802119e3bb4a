package metrics_test

import (
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/catalog"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/internal/metrics"
	"github.com/hermes-go/hermes/internal/metrics/metricstest"
)

const pricedModel = "openai:gpt-4.1-mini"

// TestWorkloadMetrics runs a scripted workload through a real engine (fake OpenAI server,
// badger store, the built-in tools) and checks that every counter moved by exactly what the
// workload did: turns by outcome, model calls, tokens and cost by model, tool calls by
// verdict, approval waits, policy decisions and hook calls, the busy rejection; and that the
// scrape-time gauges see an open approval while it is open.
func TestWorkloadMetrics(t *testing.T) {
	m := metrics.New()
	h := enginetest.New(t, enginetest.Options{Configure: func(c *engine.Config) {
		c.DefaultModel = pricedModel
		c.Store = m.Store(c.Store)
		c.Policy = m.Policy(policy.Set{Approver: policy.Defaults{}, Busy: policy.NewBusySetting(policy.Reject)})
		c.OnEvent = m.OnEvent
	}})
	m.WatchEngine(h.Engine)
	m.WatchLeases(h.Store)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	scrape := func() metricstest.Families { return metricstest.Scrape(t, srv.URL, "") }
	if err := os.MkdirAll(filepath.Join(h.Cwd, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.Cwd, "notes.txt"), []byte("notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := h.Create()
	before := scrape()

	var outs []engine.Outcome
	run := func(prompt string) engine.Outcome {
		out := h.Run(s, prompt)
		outs = append(outs, out)
		return out
	}
	// Two plain turns, one reporting cached input.
	h.Server.Enqueue(openaitest.Response{Text: []string{"one"}, Usage: &model.Usage{PromptTokens: 1000, CompletionTokens: 50, TotalTokens: 1050, CachedTokens: 400}})
	h.Server.Enqueue(openaitest.Text("two"))
	run("first")
	run("second")

	// A dangerous command approved, then one denied: both wait on an approval request.
	answerWith := func(command, choice string) {
		sub := s.Subscribe(s.LastSeq())
		defer sub.Close()
		h.Server.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":` + `"` + command + `"}`}}), openaitest.Text("ok"))
		adm, err := s.Submit(enginetest.Context(t), engine.Prompt{Text: command})
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := sub.Next(enginetest.Context(t))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != engine.EvRequestOpen {
				continue
			}
			during := scrape()
			if got := during.Value("hermes_approvals_pending"); got != 1 {
				t.Fatalf("approvals pending while one is open: %v", got)
			}
			if got := during.Value("hermes_sessions_busy"); got != 1 {
				t.Fatalf("busy sessions while waiting: %v", got)
			}
			if err := s.Answer(ev.Data.(engine.Request).ID, map[string]any{"choice": choice}); err != nil {
				t.Fatal(err)
			}
			break
		}
		out, err := s.Wait(enginetest.Context(t), adm.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	answerWith("rm -r build", engine.ChoiceOnce)
	answerWith("rm -r notes-dir", engine.ChoiceDeny)

	// A tool the policy allows without asking.
	h.Server.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "read_file", Args: []string{`{"path":"notes.txt"}`}}), openaitest.Text("read"))
	run("read the notes")

	// A failed turn.
	h.Server.Enqueue(openaitest.HTTPError(400, openaitest.APIError{Message: "bad request", Type: "invalid_request_error"}))
	if out := run("fail"); out.Status != engine.StatusFailed {
		t.Fatalf("failed turn: %+v", out)
	}

	// A prompt sent while a turn runs, rejected by the busy-input policy.
	gate := openaitest.NewGate()
	h.Server.Enqueue(openaitest.Response{Text: []string{"slow", " answer"}, FaultAt: 2, Gate: gate})
	adm, err := s.Submit(enginetest.Context(t), engine.Prompt{Text: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-gate.Reached():
	case <-enginetest.Context(t).Done():
		t.Fatal("the gated stream never arrived")
	}
	if rej, err := s.Submit(enginetest.Context(t), engine.Prompt{Text: "while busy"}); err == nil && rej.Status != engine.AdmitRejected {
		t.Fatalf("busy prompt: %+v", rej)
	}
	gate.Release()
	out, err := s.Wait(enginetest.Context(t), adm.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, out)
	// A session gives its lease back once it is idle, just after its last turn ended: wait
	// for that before the gauges are read.
	ctx := enginetest.Context(t)
	for {
		ls, err := h.Store.ListLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("leases still held after the workload: %+v", ls)
		case <-time.After(10 * time.Millisecond):
		}
	}

	after := scrape()
	delta := func(name string, labels ...string) float64 {
		return after.Value(name, labels...) - before.Value(name, labels...)
	}
	expect := func(want float64, name string, labels ...string) {
		t.Helper()
		if got := delta(name, labels...); got != want {
			t.Errorf("%s%v moved by %v, want %v", name, labels, got, want)
		}
	}
	var calls int
	var usage model.Usage
	for _, o := range outs {
		calls += o.APICalls
		usage.Add(o.Usage)
	}
	cm, ok := catalog.Default().Lookup("openai", "gpt-4.1-mini")
	if !ok || cm.Pricing == nil {
		t.Fatal("the catalogue has no price for gpt-4.1-mini")
	}
	expect(6, "hermes_turns_total", "outcome", "completed")
	expect(1, "hermes_turns_total", "outcome", "failed")
	expect(6, "hermes_turn_duration_seconds", "outcome", "completed")
	expect(float64(calls), "hermes_model_calls_total", "model", pricedModel)
	if calls < 9 {
		t.Errorf("the outcomes count %d model calls; the workload made at least 9", calls)
	}
	expect(float64(usage.PromptTokens), "hermes_model_tokens_total", "model", pricedModel, "type", "input")
	expect(float64(usage.CompletionTokens), "hermes_model_tokens_total", "model", pricedModel, "type", "output")
	expect(400, "hermes_model_tokens_total", "model", pricedModel, "type", "cache_read")
	if want, got := cm.Cost(usage), delta("hermes_cost_usd_total", "model", pricedModel); want <= 0 || math.Abs(got-want) > 1e-12 {
		t.Errorf("cost moved by %v, the catalogue prices the usage at %v", got, want)
	}
	expect(1, "hermes_tool_calls_total", "tool", "terminal", "verdict", "approved")
	expect(1, "hermes_tool_calls_total", "tool", "terminal", "verdict", "denied")
	expect(1, "hermes_tool_calls_total", "tool", "read_file", "verdict", "allowed")
	expect(2, "hermes_tool_duration_seconds", "tool", "terminal")
	expect(1, "hermes_approval_wait_seconds", "outcome", "approved")
	expect(1, "hermes_approval_wait_seconds", "outcome", "denied")
	expect(2, "hermes_policy_decisions_total", "hook", "approval", "decision", "ask")
	expect(1, "hermes_policy_decisions_total", "hook", "approval", "decision", "allow")
	expect(1, "hermes_policy_decisions_total", "hook", "busy_input", "decision", "reject")
	expect(3, "hermes_policy_hook_seconds", "hook", "approval", "language", "go")
	expect(1, "hermes_policy_hook_seconds", "hook", "busy_input", "language", "go")
	expect(1, "hermes_admission_rejections_total", "reason", "busy")
	expect(7, "hermes_context_used_ratio")
	if r := after.Sum("hermes_context_used_ratio") - before.Sum("hermes_context_used_ratio"); r <= 0 || r > 7 {
		t.Errorf("context ratios sum to %v", r)
	}
	if delta("hermes_store_operation_seconds", "op", "append_rows") < 7 {
		t.Errorf("append_rows observed %v times for 7 turns", delta("hermes_store_operation_seconds", "op", "append_rows"))
	}
	for _, g := range []string{"hermes_approvals_pending", "hermes_sessions_busy", "hermes_queue_depth", "hermes_leases_held"} {
		if !after.Has(g) || after.Value(g) != 0 {
			t.Errorf("%s after the workload: present %v, value %v", g, after.Has(g), after.Value(g))
		}
	}
	if after.Value("hermes_sessions_active") != 1 {
		t.Errorf("active sessions %v", after.Value("hermes_sessions_active"))
	}
	for _, f := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := after[f]; !ok {
			t.Errorf("no %s: the runtime and process collectors are missing", f)
		}
	}
}
