package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A deleted session's id is not found on every route that names a session, not "busy" or
// "exists": chat completions with X-Hermes-Session-Id and a run with session_id answer as
// PATCH and /chat do.
func TestDeletedSessionIsNotFound(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("ok"))
	if r := tg.do(t, "POST", "/api/sessions", `{"id":"gone1"}`, nil); r.status != 200 && r.status != 201 {
		t.Fatalf("create %d %s", r.status, r.body)
	}
	if r := tg.do(t, "POST", "/api/sessions/gone1/chat", `{"input":"hi"}`, nil); r.status != 200 {
		t.Fatalf("chat %d %s", r.status, r.body)
	}
	if r := tg.do(t, "DELETE", "/api/sessions/gone1", "", nil); r.status != 200 {
		t.Fatalf("delete %d %s", r.status, r.body)
	}
	envelope(t, tg.do(t, "PATCH", "/api/sessions/gone1", `{"title":"x"}`, nil), 404, "session_not_found")
	envelope(t, tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "hi"),
		map[string]string{"X-Hermes-Session-Id": "gone1"}), 404, "session_not_found")
	envelope(t, tg.do(t, "POST", "/v1/chat/completions", chatBody(true, false, "user", "hi"),
		map[string]string{"X-Hermes-Session-Id": "gone1"}), 404, "session_not_found")
	envelope(t, tg.do(t, "POST", "/v1/runs", `{"input":"x","session_id":"gone1"}`, nil), 404, "session_not_found")
	if n := len(tg.fake.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times, want 1", n)
	}
}

// A replayed chat-completions answer (the 409 turn_failed replay and the Idempotency-Key
// replay, streamed or not) carries the session headers the first answer carried; so does a
// replayed failed /v1/responses answer, with its response id.
func TestChatReplayKeepsSessionHeaders(t *testing.T) {
	tg := newTarget(t, nil)
	fail := openaitest.HTTPError(400, openaitest.APIError{Message: "bad things", Type: "invalid_request_error"})
	key := map[string]string{"X-Hermes-Session-Key": "agent:main:webui:dm:user-7"}
	check := func(what string, first, again resp) {
		t.Helper()
		sid := first.header.Get("X-Hermes-Session-Id")
		if sid == "" || again.header.Get("X-Hermes-Replayed") != "true" || again.header.Get("X-Hermes-Session-Id") != sid ||
			again.header.Get("X-Hermes-Session-Key") != "agent:main:webui:dm:user-7" {
			t.Fatalf("%s: first %v\nreplay %v", what, first.header, again.header)
		}
	}
	for _, stream := range []bool{false, true} {
		body := chatBody(stream, false, "user", fmt.Sprintf("fail %v", stream))
		tg.fake.Enqueue(fail)
		first := tg.do(t, "POST", "/v1/chat/completions", body, key)
		check(fmt.Sprintf("turn_failed stream=%v", stream), first, tg.do(t, "POST", "/v1/chat/completions", body, key))

		tg.fake.Enqueue(openaitest.Text("once"))
		hdr := map[string]string{"Idempotency-Key": fmt.Sprintf("k-%v", stream), "X-Hermes-Session-Key": key["X-Hermes-Session-Key"]}
		body = chatBody(stream, false, "user", fmt.Sprintf("keyed %v", stream))
		first = tg.do(t, "POST", "/v1/chat/completions", body, hdr)
		check(fmt.Sprintf("idempotency stream=%v", stream), first, tg.do(t, "POST", "/v1/chat/completions", body, hdr))
	}
	// The 409 replay of a failed /v1/responses turn: the same session headers and response id.
	tg.fake.Enqueue(fail)
	body := `{"input":"fail the response"}`
	first := tg.do(t, "POST", "/v1/responses", body, key)
	again := tg.do(t, "POST", "/v1/responses", body, key)
	check("responses turn_failed", first, again)
	if id := first.header.Get("X-Hermes-Response-Id"); id == "" || again.header.Get("X-Hermes-Response-Id") != id {
		t.Fatalf("response id: first %q replay %q", id, again.header.Get("X-Hermes-Response-Id"))
	}
	if n := len(tg.fake.Requests()); n != 5 {
		t.Fatalf("the model was asked %d times, want 5", n)
	}
}

// A failed /v1/responses turn without a stream answers 409 turn_failed naming the response it
// stored: X-Hermes-Response-Id and the error object's response_id, which the official client
// parses as an ordinary error (the extra field kept aside); GET reads the failed response.
func TestResponsesFailureNamesResponse(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.HTTPError(400, openaitest.APIError{Message: "bad things", Type: "invalid_request_error"}))
	client := openai.NewClient(option.WithBaseURL(tg.base+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	var raw *http.Response
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "hermes-agent", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("fail please")},
	}, option.WithResponseInto(&raw))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "turn_failed" || !strings.Contains(apiErr.Message, "bad things") {
		t.Fatalf("want *openai.Error 409 turn_failed, got %T %v", err, err)
	}
	id := raw.Header.Get("X-Hermes-Response-Id")
	if f, ok := apiErr.JSON.ExtraFields["response_id"]; !strings.HasPrefix(id, "resp_") || !ok || f.Raw() != strconv.Quote(id) {
		t.Fatalf("response id: header %q, error %s", id, apiErr.RawJSON())
	}
	got := decode(t, tg.do(t, "GET", "/v1/responses/"+id, "", nil))
	if got["id"] != id || got["status"] != "failed" {
		t.Fatalf("stored failed response %v", got)
	}
}

// An Anthropic refusal (stop_reason "refusal", which the engine records as content_filter)
// reaches a chat-completions client as finish_reason content_filter, streamed or not, and a
// responses client as incomplete with reason content_filter.
func TestAnthropicRefusalIsContentFilter(t *testing.T) {
	tg, fake := anthropicTarget(t)
	refusal := func() {
		fake.Enqueue(anthropictest.Response{Text: []string{"I can't ", "help with that."}, StopReason: "refusal"})
	}
	refusal()
	b := decode(t, tg.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"refuse 1"}]}`, nil))
	choice := b["choices"].([]any)[0].(map[string]any)
	if choice["finish_reason"] != "content_filter" || choice["message"].(map[string]any)["content"] != "I can't help with that." {
		t.Fatalf("non-streamed %v", b)
	}
	refusal()
	r := tg.do(t, "POST", "/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"refuse 2"}]}`, nil)
	var reasons []any
	for _, ev := range parseSSE(t, r.body) {
		var ch struct {
			Choices []struct {
				FinishReason any `json:"finish_reason"`
			} `json:"choices"`
		}
		if ev.data == "[DONE]" || json.Unmarshal([]byte(ev.data), &ch) != nil || len(ch.Choices) == 0 || ch.Choices[0].FinishReason == nil {
			continue
		}
		reasons = append(reasons, ch.Choices[0].FinishReason)
	}
	if len(reasons) != 1 || reasons[0] != "content_filter" {
		t.Fatalf("streamed finish reasons %v: %s", reasons, r.body)
	}
	refusal()
	resp := decode(t, tg.do(t, "POST", "/v1/responses", `{"input":"refuse 3"}`, nil))
	if d, _ := resp["incomplete_details"].(map[string]any); resp["status"] != "incomplete" || d["reason"] != "content_filter" {
		t.Fatalf("responses %v", resp)
	}
}

// Every value of the wrong type is 400 invalid_type naming the field and, in the message, the
// JSON type it must be (never a Go type), on chat completions and responses alike.
func TestWrongTypesNameJSONTypes(t *testing.T) {
	tg := newTarget(t, nil)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ path, body, param, want string }{
		{"/v1/chat/completions", `{` + msgs + `,"stream":"yes"}`, "stream", "boolean"},
		{"/v1/chat/completions", `{` + msgs + `,"stream":{}}`, "stream", "boolean"},
		{"/v1/chat/completions", `{"messages":"hi"}`, "messages", "array"},
		{"/v1/chat/completions", `{"messages":{"role":"user"}}`, "messages", "array"},
		{"/v1/chat/completions", `{` + msgs + `,"stream_options":true}`, "stream_options", "object"},
		{"/v1/chat/completions", `{` + msgs + `,"stream":true,"stream_options":{"include_usage":"always"}}`, "stream_options.include_usage", "boolean"},
		{"/v1/chat/completions", `{"model":42,` + msgs + `}`, "model", "string"},
		{"/v1/chat/completions", `{` + msgs + `,"n":"2"}`, "n", "integer"},
		{"/v1/chat/completions", `{"messages":[{"role":7,"content":"hi"}]}`, "messages.role", "string"},
		{"/v1/responses", `{"input":"hi","stream":"yes"}`, "stream", "boolean"},
		{"/v1/responses", `{"input":"hi","store":[]}`, "store", "boolean"},
		{"/v1/responses", `{"input":"hi","instructions":5}`, "instructions", "string"},
		{"/v1/responses", `{"input":"hi","model":false}`, "model", "string"},
	} {
		e := envelope(t, tg.do(t, "POST", c.path, c.body, nil), 400, "invalid_type")
		msg, _ := e["message"].(string)
		if e["param"] != c.param || !strings.Contains(msg, "expected "+c.want+",") || strings.ContainsAny(msg, "[]{}") || strings.Contains(msg, "httpapi") {
			t.Errorf("%s %s: param %v message %q, want param %s and type %s", c.path, c.body, e["param"], msg, c.param, c.want)
		}
	}
	if n := len(tg.fake.Requests()); n != 0 {
		t.Fatalf("a refused request reached the model (%d)", n)
	}
}

// GET /v1/models/{id} and a request's model field accept the same names: a listed id, its bare
// model part, and a catalogue alias of a listed model (bare or qualified, as /model takes it),
// each standing for the listed id; an unknown bare name is 404 on both.
func TestModelNamesAgreeWithListing(t *testing.T) {
	tg, fake := anthropicTarget(t)
	for name, want := range map[string]string{
		"hermes-agent":                         "hermes-agent",
		"anthropic:claude-haiku-4-5":           "anthropic:claude-haiku-4-5",
		"claude-haiku-4-5":                     "anthropic:claude-haiku-4-5",
		"claude-sonnet-4-5-20250929":           "anthropic:claude-sonnet-4-5",
		"claude-sonnet-4.5":                    "anthropic:claude-sonnet-4-5",
		"anthropic:claude-sonnet-4-5-20250929": "anthropic:claude-sonnet-4-5",
	} {
		if m := decode(t, tg.do(t, "GET", "/v1/models/"+name, "", nil)); m["id"] != want || m["object"] != "model" {
			t.Errorf("GET /v1/models/%s: %v, want id %s", name, m, want)
		}
	}
	for _, name := range []string{"claude-haiku-4-5", "claude-sonnet-4-5-20250929"} {
		fake.Enqueue(anthropictest.Text("ok"))
		b := decode(t, tg.do(t, "POST", "/v1/chat/completions", `{"model":"`+name+`","messages":[{"role":"user","content":"which `+name+`"}]}`, nil))
		if want := map[string]string{"claude-haiku-4-5": "anthropic:claude-haiku-4-5", "claude-sonnet-4-5-20250929": "anthropic:claude-sonnet-4-5"}[name]; b["model"] != want {
			t.Errorf("chat with model %s ran on %v, want %s", name, b["model"], want)
		}
	}
	envelope(t, tg.do(t, "GET", "/v1/models/no-such-model", "", nil), 404, "model_not_found")
	envelope(t, tg.do(t, "POST", "/v1/chat/completions", `{"model":"no-such-model","messages":[{"role":"user","content":"x"}]}`, nil), 404, "model_not_found")
}

// A session's usage carries cost_usd at the catalogue's prices once a priced model served it
// (claude-sonnet-4-5: $3 in, $15 out per million tokens), and none for an unpriced model.
func TestSessionUsageCost(t *testing.T) {
	tg, fake := anthropicTarget(t)
	fake.Enqueue(anthropictest.Response{Text: []string{"priced"}, Usage: &anthropictest.Usage{Input: 1000, Output: 200}})
	decode(t, tg.do(t, "POST", "/api/sessions", `{"id":"priced1"}`, nil))
	decode(t, tg.do(t, "POST", "/api/sessions/priced1/chat", `{"input":"hi"}`, nil))
	u := decode(t, tg.do(t, "GET", "/api/sessions/priced1", "", nil))["session"].(map[string]any)["usage"].(map[string]any)
	if cost, _ := u["cost_usd"].(float64); u["input_tokens"] != float64(1000) || math.Abs(cost-(1000*3+200*15)/1e6) > 1e-12 {
		t.Fatalf("usage %v", u)
	}

	plain := newTarget(t, nil)
	plain.fake.Enqueue(openaitest.Text("unpriced"))
	decode(t, plain.do(t, "POST", "/api/sessions", `{"id":"plain1"}`, nil))
	decode(t, plain.do(t, "POST", "/api/sessions/plain1/chat", `{"input":"hi"}`, nil))
	u = decode(t, plain.do(t, "GET", "/api/sessions/plain1", "", nil))["session"].(map[string]any)["usage"].(map[string]any)
	if _, ok := u["cost_usd"]; ok || u["api_calls"] != float64(1) {
		t.Fatalf("unpriced usage %v", u)
	}
}
