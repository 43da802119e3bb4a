package engine_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// TestEventEncoding pins the JSON of an event for every payload type: scripts and journals see
// events in this form, and typing the payloads must not change a byte of it.
func TestEventEncoding(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := engine.Outcome{TurnID: "t1", Status: engine.StatusCompleted, ExitReason: "text_response", Completed: true, Text: "hi", Usage: model.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}, APICalls: 1, Model: "m"}
	cases := []struct {
		typ  engine.EventType
		data engine.EventData
		want string
	}{
		{engine.EvMessageDelta, nil, `{}`},
		{engine.EvMessageStart, engine.TurnStart{Prompt: "p", Origin: "cli", Model: "m", RowID: 4}, `{"prompt":"p","origin":"cli","model":"m","user_row_id":4}`},
		{engine.EvToolGenerating, engine.ToolGenerating{Index: 1, CallID: "c", Name: "n"}, `{"index":1,"call_id":"c","name":"n"}`},
		{engine.EvToolStart, engine.ToolStart{CallID: "c", Name: "n", Args: json.RawMessage(`{"a":1}`)}, `{"call_id":"c","name":"n","args":{"a":1}}`},
		{engine.EvToolProgress, engine.ToolProgress{CallID: "c", Name: "n"}, `{"call_id":"c","name":"n"}`},
		{engine.EvToolComplete, engine.ToolComplete{CallID: "c", Name: "n", Args: json.RawMessage(`{}`), Result: tool.Result{Content: "ok", IsError: true, Meta: map[string]any{"diff": "d"}}, Duration: time.Second, Blocked: true},
			`{"call_id":"c","name":"n","args":{},"result":{"content":"ok","is_error":true,"meta":{"diff":"d"}},"duration_ns":1000000000,"blocked":true}`},
		{engine.EvRequestOpen, engine.Request{ID: "r", Kind: engine.KindApproval, SessionID: "s", TurnID: "t1", Payload: map[string]any{"x": "y"}, Created: at, Deadline: at},
			`{"id":"r","method":"approval","session_id":"s","turn_id":"t1","params":{"x":"y"},"created":"2026-01-02T03:04:05Z","deadline":"2026-01-02T03:04:05Z"}`},
		{engine.EvRequestCancel, engine.RequestCancel{ID: "r", Kind: "k", Reason: "why"}, `{"id":"r","method":"k","reason":"why"}`},
		{engine.EvRequestResolved, engine.RequestResolved{ID: "r", Kind: "k", Answer: map[string]any{"choice": "once"}}, `{"id":"r","method":"k","answer":{"choice":"once"}}`},
		{engine.EvSteerDelivered, engine.SteerDelivered{IDs: []string{"s1"}, Text: "go", Iteration: 2, CallID: "c"}, `{"steer_ids":["s1"],"text":"go","iteration":2,"call_id":"c"}`},
		{engine.EvPolicyDecision, engine.PolicyDecision{Hook: "approval", CallID: "c", Decision: "allow", Reason: "r", Error: "e"}, `{"hook":"approval","call_id":"c","decision":"allow","reason":"r","error":"e"}`},
		{engine.EvStatus, engine.StatusInfo{Status: engine.StatusWorking, Kind: "k", Text: "t"}, `{"status":"working","kind":"k","text":"t"}`},
		{engine.EvQueueUpdated, engine.QueueInfo{}, `{"queued":""}`},
		{engine.EvSubagentDone, engine.SubagentInfo{ChildID: "c", Goal: "g", Outcome: &engine.Outcome{Status: engine.StatusFailed}},
			`{"child_session_id":"c","goal":"g","outcome":{"turn_id":"","status":"failed","turn_exit_reason":"","completed":false,"partial":false,"interrupted":false,"text":"","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},"api_calls":0,"model":""}}`},
		{engine.EvError, engine.ErrorInfo{Message: "m", Code: "store"}, `{"message":"m","code":"store"}`},
		{engine.EvMessageComplete, out, ``},
		{engine.EvSessionInfo, engine.Info{SessionID: "s", Title: "t", Model: "m", Cwd: "/", Status: engine.StatusIdle}, ``},
		// The two payloads that were untyped maps encode as those maps did.
		{engine.EvSessionClosed, engine.SessionClosed{Reason: "closed"}, mustJSON(t, map[string]string{"reason": "closed"})},
		{"background.complete", engine.SurfaceEvent{"task_id": "b1", "text": "done", "status": "completed"}, mustJSON(t, map[string]any{"task_id": "b1", "text": "done", "status": "completed"})},
	}
	for _, c := range cases {
		want := c.want
		if want == "" { // a payload type defined elsewhere: its own encoding, unwrapped
			want = mustJSON(t, c.data)
		}
		ev := engine.Event{Seq: 7, Type: c.typ, SessionID: "s", TurnID: "t1", Time: at, Text: "x", Data: c.data}
		got := mustJSON(t, ev)
		head := `{"seq":7,"type":"` + string(c.typ) + `","session_id":"s","turn_id":"t1","time":"2026-01-02T03:04:05Z","text":"x"`
		exp := head + `,"data":` + want + `}`
		if c.data == nil {
			exp = head + `}`
		}
		if got != exp {
			t.Errorf("%s:\n got %s\nwant %s", c.typ, got, exp)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
