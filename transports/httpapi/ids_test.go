package httpapi_test

import (
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
)

// wantInvalid checks a 400 in the OpenAI error shape naming code.
func wantInvalid(t *testing.T, what string, r resp, code string) {
	t.Helper()
	if r.status != 400 {
		t.Fatalf("%s: status %d, want 400: %s", what, r.status, r.body)
	}
	m := decode(t, r)
	e, _ := m["error"].(map[string]any)
	if e == nil || e["type"] != "invalid_request_error" || e["code"] != code {
		t.Fatalf("%s: error %s, want invalid_request_error %s", what, r.body, code)
	}
}

// TestPoisonedSessionHeader is the poisoned-listing defect: a non-UTF-8 byte in
// X-Hermes-Session-Id used to store a record whose key and id disagree, after which every
// session listing failed. The id is now refused at the edge and nothing is stored.
func TestPoisonedSessionHeader(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Response{Text: []string{"should not be asked"}})
	for _, id := range []string{"a\xffb", "\xc3", "x\u202ey", strings.Repeat("é", 129)} {
		r := tg.do(t, "POST", "/v1/chat/completions", `{"model":"openai:fake-agent","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"X-Hermes-Session-Id": id})
		wantInvalid(t, "chat with session id "+strings.ToValidUTF8(id, "?")[:min(len(id), 8)], r, "invalid_session_id")
		wantInvalid(t, "session route header", tg.do(t, "GET", "/api/sessions", "", map[string]string{"X-Hermes-Session-Id": id}), "invalid_session_id")
	}
	r := tg.do(t, "GET", "/api/sessions", "", nil)
	if r.status != 200 {
		t.Fatalf("listing after refused ids: %d %s", r.status, r.body)
	}
	list, err := tg.eng.Store().ListSessions(t.Context(), store.ListOptions{})
	if err != nil || len(list) != 0 {
		t.Fatalf("store after refused ids: %v, %v", list, err)
	}
	if r := tg.do(t, "POST", "/api/sessions", `{"id":"ok\u202eid"}`, nil); r.status != 400 {
		t.Fatalf("create with an invisible character in the id: %d %s", r.status, r.body)
	}
}

// TestBadLastEventID: a Last-Event-ID that is not an event number is a 400, not a replay from
// the first event.
func TestBadLastEventID(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Response{Text: []string{"done"}})
	run := startRun(t, tg, `{"input":"hi"}`)
	tg.events(t, run, "").until("run.completed")
	for _, bad := range []string{"abc", "-1", "1.5", "0x10", "99999999999999999999999"} {
		wantInvalid(t, "Last-Event-ID "+bad, tg.do(t, "GET", "/v1/runs/"+run+"/events", "", map[string]string{"Last-Event-ID": bad}), "invalid_last_event_id")
		wantInvalid(t, "last_event_id "+bad, tg.do(t, "GET", "/v1/runs/"+run+"/events?last_event_id="+bad, "", nil), "invalid_last_event_id")
	}
	// A good cursor still resumes after its event.
	r := tg.do(t, "GET", "/v1/runs/"+run+"/events", "", map[string]string{"Last-Event-ID": " 2"})
	if r.status != 200 || strings.Contains(string(r.body), "id: 1\n") || strings.Contains(string(r.body), "id: 2\n") || !strings.Contains(string(r.body), "id: 3\n") {
		t.Fatalf("resume after event 2: %d %s", r.status, r.body)
	}
}

// TestBadPathIDs: run and response ids from the path are checked like session ids.
func TestBadPathIDs(t *testing.T) {
	tg := newTarget(t, nil)
	wantInvalid(t, "run id", tg.do(t, "GET", "/v1/runs/run_"+strings.Repeat("r", 300), "", nil), "invalid_run_id")
	wantInvalid(t, "response id", tg.do(t, "GET", "/v1/responses/resp_"+strings.Repeat("x", 300), "", nil), "invalid_response_id")
	if r := tg.do(t, "GET", "/v1/runs/run_nope", "", nil); r.status != 404 {
		t.Fatalf("a well-formed unknown run: %d %s", r.status, r.body)
	}
}

// TestPathIDsAreUnescaped: an id created in a JSON body ("café", "my chat") is reached on its
// path route percent-encoded, as every HTTP client sends it; an escaped byte that is not UTF-8
// is refused like a raw one.
func TestPathIDsAreUnescaped(t *testing.T) {
	tg := newTarget(t, nil)
	for id, path := range map[string]string{"café": "caf%C3%A9", "my chat": "my%20chat"} {
		if r := tg.do(t, "POST", "/api/sessions", `{"id":"`+id+`"}`, nil); r.status != 201 {
			t.Fatalf("create %q: %d %s", id, r.status, r.body)
		}
		r := tg.do(t, "GET", "/api/sessions/"+path, "", nil)
		if r.status != 200 || !strings.Contains(string(r.body), `"id":"`+id+`"`) {
			t.Fatalf("GET /api/sessions/%s: %d %s", path, r.status, r.body)
		}
	}
	wantInvalid(t, "escaped non-UTF-8 path id", tg.do(t, "GET", "/api/sessions/a%FFb", "", nil), "invalid_session_id")
}

// TestBodyNotUTF8: JSON text is UTF-8; a stray byte in a body id is refused, not stored as
// U+FFFD under an id the client never sent.
func TestBodyNotUTF8(t *testing.T) {
	tg := newTarget(t, nil)
	wantInvalid(t, "session create", tg.do(t, "POST", "/api/sessions", "{\"id\":\"x\xffy\"}", nil), "invalid_json")
	wantInvalid(t, "run", tg.do(t, "POST", "/v1/runs", "{\"input\":\"hi\",\"session_id\":\"x\xffy\"}", nil), "invalid_json")
	list, err := tg.eng.Store().ListSessions(t.Context(), store.ListOptions{})
	if err != nil || len(list) != 0 {
		t.Fatalf("store after refused bodies: %v, %v", list, err)
	}
}
