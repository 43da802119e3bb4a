package httpapi_test

import (
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
