package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
)

func respBody(t *testing.T, fields map[string]any) string {
	t.Helper()
	if _, ok := fields["model"]; !ok {
		fields["model"] = "openai:fake-agent"
	}
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func decode(t *testing.T, r resp) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%d %v: %s", r.status, err, r.body)
	}
	return m
}

func TestResponsesStatefulChain(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("Paris"), openaitest.Text("about 2 million"), openaitest.Text("x"))
	r := tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "capital of France?", "instructions": "answer in one word"}), nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	first := decode(t, r)
	id, _ := first["id"].(string)
	if !strings.HasPrefix(id, "resp_") || first["object"] != "response" || first["status"] != "completed" || first["output_text"] != "Paris" || first["store"] != true {
		t.Fatalf("%s", r.body)
	}
	out := first["output"].([]any)[0].(map[string]any)
	if out["type"] != "message" || out["role"] != "assistant" || out["content"].([]any)[0].(map[string]any)["text"] != "Paris" {
		t.Fatalf("output %v", out)
	}
	if u := first["usage"].(map[string]any); u["total_tokens"].(float64) <= 0 {
		t.Fatalf("usage %v", u)
	}
	// Continue the chain: the model sees the earlier exchange.
	r = tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "population?"}}}}, "previous_response_id": id}), nil)
	second := decode(t, r)
	if r.status != 200 || second["previous_response_id"] != id || second["output_text"] != "about 2 million" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if b := tg.fake.Requests()[1].Body; !bytes.Contains(b, []byte("capital of France?")) || !bytes.Contains(b, []byte("Paris")) || !bytes.Contains(b, []byte("population?")) {
		t.Fatalf("history missing: %s", b)
	}
	// GET returns the stored object; DELETE removes it; then both 404.
	g := decode(t, tg.do(t, "GET", "/v1/responses/"+id, "", nil))
	if g["id"] != id || g["output_text"] != "Paris" {
		t.Fatalf("get %v", g)
	}
	d := tg.do(t, "DELETE", "/v1/responses/"+id, "", nil)
	if dm := decode(t, d); d.status != 200 || dm["deleted"] != true || dm["id"] != id {
		t.Fatalf("delete %d %s", d.status, d.body)
	}
	envelope(t, tg.do(t, "GET", "/v1/responses/"+id, "", nil), 404, "response_not_found")
	envelope(t, tg.do(t, "DELETE", "/v1/responses/"+id, "", nil), 404, "response_not_found")
	e := envelope(t, tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "again", "previous_response_id": id}), nil), 400, "previous_response_not_found")
	if e["param"] != "previous_response_id" {
		t.Fatalf("param %v", e["param"])
	}
}

func TestResponsesStoreFalseAndConversation(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("one"), openaitest.Text("two"), openaitest.Text("three"))
	r := decode(t, tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "hi", "store": false}), nil))
	envelope(t, tg.do(t, "GET", "/v1/responses/"+r["id"].(string), "", nil), 404, "response_not_found")
	envelope(t, tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "x", "previous_response_id": r["id"]}), nil), 400, "previous_response_not_found")

	a := tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "remember 42", "conversation": "conv-a"}), nil)
	b := tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "what number?", "conversation": "conv-a"}), nil)
	if a.status != 200 || b.status != 200 || a.header.Get("X-Hermes-Session-Id") != b.header.Get("X-Hermes-Session-Id") {
		t.Fatalf("%d %d %q %q", a.status, b.status, a.header.Get("X-Hermes-Session-Id"), b.header.Get("X-Hermes-Session-Id"))
	}
	if body := tg.fake.Requests()[2].Body; !bytes.Contains(body, []byte("remember 42")) {
		t.Fatalf("conversation history missing: %s", body)
	}
	envelope(t, tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "x", "conversation": "conv-a", "previous_response_id": "resp_1"}), nil), 400, "invalid_request")
	envelope(t, tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": 5}), nil), 400, "invalid_type")
	envelope(t, tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{}), nil), 400, "missing_input")
	envelope(t, tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": []any{map[string]any{"type": "item_reference", "id": "x"}}}), nil), 400, "unsupported_content_type")
}

// A stored response lives in the session store: a new server on the same store serves it.
func TestResponsesSurviveServerRestart(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("kept"))
	id := decode(t, tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "hi"}), nil))["id"].(string)
	gw := gateway.New(tg.eng, gateway.Options{})
	defer gw.Close()
	srv2, err := httpapi.New(tg.eng, gw, httpapi.Options{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv2.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv2.Shutdown(ctx)
		<-done
	}()
	tg2 := &target{base: "http://" + ln.Addr().String()}
	if g := decode(t, tg2.do(t, "GET", "/v1/responses/"+id, "", nil)); g["output_text"] != "kept" {
		t.Fatalf("%v", g)
	}
}

func TestResponsesStreamSequence(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("Hel", "lo"))
	r := tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "hi", "stream": true}), nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %v", r.status, r.header)
	}
	evs := parseSSE(t, r.body)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.completed"}
	if len(evs) != len(want) {
		t.Fatalf("%d events:\n%s", len(evs), r.body)
	}
	var id string
	for i, ev := range evs {
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatal(err)
		}
		if ev.name != want[i] || m["type"] != want[i] || m["sequence_number"] != float64(i) {
			t.Fatalf("event %d: %q %v seq %v", i, ev.name, m["type"], m["sequence_number"])
		}
		switch want[i] {
		case "response.created":
			resp := m["response"].(map[string]any)
			id = resp["id"].(string)
			if resp["status"] != "in_progress" || len(resp["output"].([]any)) != 0 || resp["usage"] != nil {
				t.Fatalf("created %v", resp)
			}
		case "response.output_text.done":
			if m["text"] != "Hello" {
				t.Fatalf("done %v", m)
			}
		case "response.completed":
			resp := m["response"].(map[string]any)
			if resp["id"] != id || resp["status"] != "completed" || resp["output_text"] != "Hello" || resp["usage"] == nil {
				t.Fatalf("completed %v", resp)
			}
		}
	}
	if g := decode(t, tg.do(t, "GET", "/v1/responses/"+id, "", nil)); g["output_text"] != "Hello" {
		t.Fatalf("streamed response not stored: %v", g)
	}
}

func TestResponsesStreamFailure(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.HTTPError(400, openaitest.APIError{Message: "nope", Type: "invalid_request_error"}))
	r := tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "hi", "stream": true}), nil)
	evs := parseSSE(t, r.body)
	last := evs[len(evs)-1]
	var m map[string]any
	if err := json.Unmarshal([]byte(last.data), &m); err != nil {
		t.Fatal(err)
	}
	resp, _ := m["response"].(map[string]any)
	if last.name != "response.failed" || resp["status"] != "failed" || resp["error"].(map[string]any)["code"] != "server_error" {
		t.Fatalf("%s", r.body)
	}
}
