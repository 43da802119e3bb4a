package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// modelAsked returns the model named by the i-th request the fake model received.
func modelAsked(t *testing.T, fake *openaitest.Server, i int) string {
	t.Helper()
	reqs := fake.Requests()
	if i >= len(reqs) {
		t.Fatalf("the model received %d requests, want more than %d", len(reqs), i)
	}
	var body struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(reqs[i].Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Model
}

// A default chat stream is chunks only, even while a tool runs and while the turn is quiet:
// no named event and no comment (go-openai would read either as the start of an error body).
func TestChatStreamDefaultIsChunksOnly(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) { o.KeepAlive = 10 * time.Millisecond })
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	tg.fake.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo hi"}`}}),
		openaitest.Response{Text: []string{"after ", "the tool"}, FaultAt: 1, Gate: gate},
	)
	req, _ := http.NewRequest("POST", tg.base+"/v1/chat/completions", strings.NewReader(chatBody(true, false, "user", "run it")))
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var text strings.Builder
	keepalives, done := 0, false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("a line that is not a data line: %q", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta map[string]any `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil || ch.Object != "chat.completion.chunk" || len(ch.Choices) != 1 {
			t.Fatalf("not a chunk with one choice: %s", data)
		}
		if c, ok := ch.Choices[0].Delta["content"].(string); ok {
			text.WriteString(c)
			if c == "" && ch.Choices[0].Delta["role"] == nil {
				// The model is held at the gate: the turn is quiet. Two keep-alive chunks
				// seen, let it answer.
				if keepalives++; keepalives == 2 {
					gate.Release()
				}
			}
		}
	}
	if text.String() != "after the tool" || !done || keepalives < 2 {
		t.Fatalf("text %q, [DONE] %v, keep-alive chunks %d", text.String(), done, keepalives)
	}
}

// model is optional; hermes-agent keeps the session's model; a listed model switches it for
// the session; /model sent as a prompt switches and answers 200.
func TestChatModelField(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("one"), openaitest.Text("two"), openaitest.Text("three"), openaitest.Text("four"))
	hdr := map[string]string{"X-Hermes-Session-Id": "model-switch"}
	post := func(model, prompt string) resp {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": prompt}}})
		if model == "" {
			b, _ = json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}})
		}
		r := tg.do(t, "POST", "/v1/chat/completions", string(b), hdr)
		if r.status != 200 {
			t.Fatalf("%q %q: %d %s", model, prompt, r.status, r.body)
		}
		return r
	}
	echoed := func(r resp) string {
		var c struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(r.body, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("%s", r.body)
		}
		return c.Model + " " + c.Choices[0].Message.Content
	}
	if got := echoed(post("", "no model")); got != "openai:fake-agent one" || modelAsked(t, tg.fake, 0) != "fake-agent" {
		t.Fatalf("without model: %q, model asked %q", got, modelAsked(t, tg.fake, 0))
	}
	if got := echoed(post("openai:other", "switch")); got != "openai:other two" || modelAsked(t, tg.fake, 1) != "other" {
		t.Fatalf("listed model: %q, model asked %q", got, modelAsked(t, tg.fake, 1))
	}
	if got := echoed(post("hermes-agent", "keep")); got != "openai:other three" || modelAsked(t, tg.fake, 2) != "other" {
		t.Fatalf("hermes-agent after a switch: %q, model asked %q", got, modelAsked(t, tg.fake, 2))
	}
	if got := echoed(post("hermes-agent", "/model openai:fake-agent")); got != "openai:fake-agent model switched to openai:fake-agent" {
		t.Fatalf("/model as a prompt: %q", got)
	}
	if len(tg.fake.Requests()) != 3 {
		t.Fatalf("/model reached the model")
	}
	if got := echoed(post("hermes-agent", "after the command")); got != "openai:fake-agent four" || modelAsked(t, tg.fake, 3) != "fake-agent" {
		t.Fatalf("after /model: %q, model asked %q", got, modelAsked(t, tg.fake, 3))
	}
	// Responses: model optional too.
	tg.fake.Enqueue(openaitest.Text("resp"))
	r := tg.do(t, "POST", "/v1/responses", `{"input":"no model"}`, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"output_text":"resp"`) {
		t.Fatalf("responses without model: %d %s", r.status, r.body)
	}
}

// A failed turn on /v1/responses: without a stream the error (409 turn_failed) and a stored
// failed response whose error has a string type; with a stream an error event then
// response.failed, the last event.
func TestResponsesFailure(t *testing.T) {
	tg := newTarget(t, nil)
	fail := openaitest.HTTPError(400, openaitest.APIError{Message: "bad things", Type: "invalid_request_error"})
	tg.fake.Enqueue(fail)
	r := tg.do(t, "POST", "/v1/responses", `{"model":"hermes-agent","input":"fail please"}`, nil)
	envelope(t, r, 409, "turn_failed")
	tg.fake.Enqueue(fail)
	r = tg.do(t, "POST", "/v1/responses", `{"model":"hermes-agent","input":"fail streaming","stream":true}`, nil)
	evs := parseSSE(t, r.body)
	if r.status != 200 || len(evs) < 4 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	errEv, last := evs[len(evs)-2], evs[len(evs)-1]
	var e struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Code    string `json:"code"`
		Error   struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if errEv.name != "error" || json.Unmarshal([]byte(errEv.data), &e) != nil || e.Type != "error" || !strings.Contains(e.Message, "bad things") || e.Error.Type != "server_error" || e.Error.Message != e.Message {
		t.Fatalf("error event %q %s", errEv.name, errEv.data)
	}
	var failed struct {
		Response struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  struct {
				Type    string `json:"type"`
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"response"`
	}
	if last.name != "response.failed" || json.Unmarshal([]byte(last.data), &failed) != nil || failed.Response.Status != "failed" ||
		failed.Response.Error.Type != "server_error" || failed.Response.Error.Code != "server_error" || !strings.Contains(failed.Response.Error.Message, "bad things") {
		t.Fatalf("terminal event %q %s", last.name, last.data)
	}
	got := tg.do(t, "GET", "/v1/responses/"+failed.Response.ID, "", nil)
	if got.status != 200 || !bytes.Contains(got.body, []byte(`"type":"server_error"`)) {
		t.Fatalf("stored failed response: %d %s", got.status, got.body)
	}
}

// Idempotency-Key on chat completions: the same key and body replay the first answer without
// a turn (streamed or not); another body with the key is a 409.
func TestChatIdempotencyKey(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("only ", "once"))
	hdr := map[string]string{"Idempotency-Key": "chat-key-1"}
	body := chatBody(false, false, "user", "idempotent question")
	r1 := tg.do(t, "POST", "/v1/chat/completions", body, hdr)
	r2 := tg.do(t, "POST", "/v1/chat/completions", body, hdr)
	if r1.status != 200 || r2.status != 200 || !bytes.Equal(r1.body, r2.body) || r2.header.Get("Idempotency-Replayed") != "true" || r1.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("first %d %s\nreplay %d %v %s", r1.status, r1.body, r2.status, r2.header, r2.body)
	}
	if n := len(tg.fake.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times", n)
	}
	envelope(t, tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "another question"), hdr), 409, "idempotency_key_conflict")
	// A streamed request under its own key, replayed as a stream with the same text.
	tg.fake.Enqueue(openaitest.Text("streamed ", "once"))
	hdr = map[string]string{"Idempotency-Key": "chat-key-2"}
	body = chatBody(true, false, "user", "stream it")
	var texts []string
	for range 2 {
		r := tg.do(t, "POST", "/v1/chat/completions", body, hdr)
		var text strings.Builder
		for _, ev := range parseSSE(t, r.body) {
			var ch struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			if ev.data != "[DONE]" && json.Unmarshal([]byte(ev.data), &ch) == nil && len(ch.Choices) == 1 {
				text.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		texts = append(texts, text.String())
	}
	if texts[0] != "streamed once" || texts[1] != "streamed once" || len(tg.fake.Requests()) != 2 {
		t.Fatalf("streams %q, model asked %d times", texts, len(tg.fake.Requests()))
	}
}

func TestCORSPreflightAllowsPatch(t *testing.T) {
	tg := newTarget(t, nil)
	r := tg.do(t, "OPTIONS", "/api/sessions/x", "", map[string]string{"Origin": "https://ui.example", "Authorization": "", "Access-Control-Request-Method": "PATCH"})
	if r.status != 204 || !strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "PATCH") {
		t.Fatalf("preflight %d %v", r.status, r.header)
	}
}

// Idempotency-Key on /v1/responses: the replay is the same response (same id), without a turn.
func TestResponsesIdempotencyKey(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("kept"))
	hdr := map[string]string{"Idempotency-Key": "resp-key-1"}
	body := `{"input":"idempotent response"}`
	r1 := tg.do(t, "POST", "/v1/responses", body, hdr)
	r2 := tg.do(t, "POST", "/v1/responses", body, hdr)
	var o1, o2 struct {
		ID         string `json:"id"`
		OutputText string `json:"output_text"`
	}
	if r1.status != 200 || r2.status != 200 || json.Unmarshal(r1.body, &o1) != nil || json.Unmarshal(r2.body, &o2) != nil ||
		o1.ID == "" || o1.ID != o2.ID || o2.OutputText != "kept" || r2.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("first %d %s\nreplay %d %v %s", r1.status, r1.body, r2.status, r2.header, r2.body)
	}
	if n := len(tg.fake.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times", n)
	}
	// A replay does not store the response again: once deleted, it stays deleted.
	if r := tg.do(t, "DELETE", "/v1/responses/"+o1.ID, "", nil); r.status != 200 {
		t.Fatalf("delete %d %s", r.status, r.body)
	}
	if r := tg.do(t, "POST", "/v1/responses", body, hdr); r.status != 200 || r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replay after delete %d %s", r.status, r.body)
	}
	envelope(t, tg.do(t, "GET", "/v1/responses/"+o1.ID, "", nil), 404, "response_not_found")
	// The key is per route: the same key on chat completions is a request of its own.
	tg.fake.Enqueue(openaitest.Text("chat"))
	if r := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "x"), hdr); r.status != 200 || r.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("chat with the key of a response: %d %v %s", r.status, r.header, r.body)
	}
}

// /v1/capabilities names the tool-progress header, the model alias, and the replay rules.
func TestCapabilitiesListClientFeatures(t *testing.T) {
	tg := newTarget(t, nil)
	r := tg.do(t, "GET", "/v1/capabilities", "", nil)
	var caps struct {
		Model    string         `json:"model"`
		Features map[string]any `json:"features"`
	}
	if err := json.Unmarshal(r.body, &caps); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	replay, _ := caps.Features["failed_turn_replay"].(map[string]any)
	idem, _ := caps.Features["turn_idempotency"].(map[string]any)
	if caps.Features["tool_progress_header"] != httpapi.HeaderToolProgress || caps.Features["models_agent_alias"] != httpapi.AgentModel ||
		caps.Model != "openai:fake-agent" || replay["status"] != float64(409) || replay["code"] != "turn_failed" || idem["supported"] != true {
		t.Fatalf("capabilities %s", r.body)
	}
}
