package httpapi_test

import (
	"fmt"
	"testing"

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
// replay, streamed or not) carries the session headers the first answer carried.
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
	if n := len(tg.fake.Requests()); n != 4 {
		t.Fatalf("the model was asked %d times, want 4", n)
	}
}
