package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// TestRepeatedToolCallIDsAreMadeUnique: a provider that numbers calls per response (call_0 in
// each) gets distinct ids within the turn, consistently in events, transcript and the next
// request, so no surface merges two calls.
func TestRepeatedToolCallIDsAreMadeUnique(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_0", Name: "terminal", Args: []string{`{"command":"echo one"}`}}),
		openaitest.ToolCalls(openaitest.Call{ID: "call_0", Name: "terminal", Args: []string{`{"command":"echo two"}`}}),
		openaitest.Text("done"),
	)
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	if out := h.run(s, "twice"); out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	var starts []string
	for {
		ev := next(t, sub, engine.EvToolStart)
		starts = append(starts, ev.Data.(engine.ToolStart).CallID)
		if len(starts) == 2 {
			break
		}
	}
	if starts[0] != "call_0" || starts[1] == "call_0" || starts[1] == "" {
		t.Fatalf("tool.start ids %v", starts)
	}
	var toolRows []string
	for _, r := range mustRows(t, s) {
		if r.Role == "tool" {
			toolRows = append(toolRows, r.ToolCallID)
		}
	}
	if len(toolRows) != 2 || toolRows[0] != starts[0] || toolRows[1] != starts[1] {
		t.Fatalf("transcript ids %v, events %v", toolRows, starts)
	}
	// The last request pairs every assistant tool call with its result by the same id.
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	reqs := h.srv.Requests()
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &req); err != nil {
		t.Fatal(err)
	}
	var calls, results []string
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID)
		}
		if m.Role == "tool" {
			results = append(results, m.ToolCallID)
		}
	}
	if len(calls) != 2 || calls[0] != results[0] || calls[1] != results[1] || calls[0] == calls[1] {
		t.Fatalf("request ids: calls %v results %v", calls, results)
	}
}
