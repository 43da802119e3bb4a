package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// decode unmarshals a 2xx body.
func decodeAs[T any](t *testing.T, r resp, status int) T {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return v
}

type sessionEnv struct {
	Object  string         `json:"object"`
	Session map[string]any `json:"session"`
}

func TestSessionsCRUD(t *testing.T) {
	tg := newTarget(t, nil)
	created := decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"s-one","title":"First","system_prompt":"Be terse."}`, nil), 201)
	if created.Object != "hermes.session" || created.Session["id"] != "s-one" || created.Session["title"] != "First" || created.Session["model"] != "openai:fake-agent" {
		t.Fatalf("create %+v", created)
	}
	envelope(t, tg.do(t, "POST", "/api/sessions", `{"session_id":"s-one"}`, nil), 409, "session_exists")
	envelope(t, tg.do(t, "POST", "/api/sessions", `{"title":"First"}`, nil), 400, "invalid_title")
	anon := decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"model":"other"}`, nil), 201)
	if anon.Session["id"] == "" || anon.Session["model"] != "openai:other" {
		t.Fatalf("generated %+v", anon)
	}

	// The system prompt is the first message of the transcript.
	msgs := decodeAs[struct {
		Data    []map[string]any `json:"data"`
		HasMore bool             `json:"has_more"`
	}](t, tg.do(t, "GET", "/api/sessions/s-one/messages", "", nil), 200)
	if len(msgs.Data) != 1 || msgs.Data[0]["role"] != "system" || msgs.Data[0]["content"] != "Be terse." || msgs.HasMore {
		t.Fatalf("messages %+v", msgs)
	}

	got := decodeAs[sessionEnv](t, tg.do(t, "GET", "/api/sessions/s-one", "", nil), 200)
	if got.Session["message_count"] != float64(1) || got.Session["status"] != "idle" {
		t.Fatalf("get %+v", got)
	}
	// A live session reports its context use: the stored transcript estimated, against the
	// default window (the model is not in the catalogue).
	if ci, _ := got.Session["context"].(map[string]any); ci == nil || ci["context_max"] != float64(128000) || ci["context_used"].(float64) <= 0 || ci["context_estimated"] != true {
		t.Fatalf("context %+v", got.Session["context"])
	}
	patched := decodeAs[sessionEnv](t, tg.do(t, "PATCH", "/api/sessions/s-one", `{"title":"Renamed","model":"openai:other"}`, nil), 200)
	if patched.Session["title"] != "Renamed" || patched.Session["model"] != "openai:other" {
		t.Fatalf("patch %+v", patched)
	}
	// A bad field refuses the whole patch: the title is unchanged.
	envelope(t, tg.do(t, "PATCH", "/api/sessions/s-one", `{"title":"Nope","cwd":"/"}`, nil), 400, "unsupported_session_field")
	envelope(t, tg.do(t, "PATCH", "/api/sessions/s-one", `{"title":"Nope","model":"missing:x"}`, nil), 404, "model_not_found")
	if g := decodeAs[sessionEnv](t, tg.do(t, "GET", "/api/sessions/s-one", "", nil), 200); g.Session["title"] != "Renamed" {
		t.Fatalf("a refused patch changed the title: %+v", g)
	}

	list := decodeAs[struct {
		Object  string           `json:"object"`
		Data    []map[string]any `json:"data"`
		Total   int              `json:"total"`
		HasMore bool             `json:"has_more"`
	}](t, tg.do(t, "GET", "/api/sessions?limit=1", "", nil), 200)
	if list.Object != "list" || len(list.Data) != 1 || list.Total != 2 || !list.HasMore {
		t.Fatalf("list %+v", list)
	}
	page2 := decodeAs[struct {
		Data    []map[string]any `json:"data"`
		HasMore bool             `json:"has_more"`
	}](t, tg.do(t, "GET", "/api/sessions?limit=1&offset=1", "", nil), 200)
	if len(page2.Data) != 1 || page2.HasMore || page2.Data[0]["id"] == list.Data[0]["id"] {
		t.Fatalf("page 2 %+v after %+v", page2, list)
	}

	del := decodeAs[map[string]any](t, tg.do(t, "DELETE", "/api/sessions/s-one", "", nil), 200)
	if del["object"] != "hermes.session.deleted" || del["deleted"] != true || del["id"] != "s-one" {
		t.Fatalf("delete %+v", del)
	}
	for _, path := range []string{"/api/sessions/s-one", "/api/sessions/s-one/messages"} {
		envelope(t, tg.do(t, "GET", path, "", nil), 404, "session_not_found")
	}
	envelope(t, tg.do(t, "DELETE", "/api/sessions/s-one", "", nil), 404, "session_not_found")
	envelope(t, tg.do(t, "POST", "/api/sessions/s-one/chat", `{"input":"hi"}`, nil), 404, "session_not_found")
	if l := decodeAs[struct{ Total int }](t, tg.do(t, "GET", "/api/sessions", "", nil), 200); l.Total != 1 {
		t.Fatalf("deleted session still listed: %d", l.Total)
	}
}

func TestSessionChatAndFork(t *testing.T) {
	tg := newTarget(t, nil)
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"chat-1"}`, nil), 201)
	tg.fake.Enqueue(openaitest.Text("Hello", " there"))
	out := decodeAs[map[string]any](t, tg.do(t, "POST", "/api/sessions/chat-1/chat", `{"input":"hi","instructions":"Answer in English."}`, nil), 200)
	if out["object"] != "hermes.session.chat.completion" || out["completed"] != true || out["session_id"] != "chat-1" || !strings.HasPrefix(out["run_id"].(string), "run_") {
		t.Fatalf("chat %+v", out)
	}
	if msg := out["message"].(map[string]any); msg["content"] != "Hello there" || msg["role"] != "assistant" {
		t.Fatalf("message %+v", msg)
	}
	turn := out["messages"].([]any)
	if len(turn) != 2 || turn[0].(map[string]any)["role"] != "user" || turn[1].(map[string]any)["content"] != "Hello there" {
		t.Fatalf("turn transcript %+v", turn)
	}
	// The instructions reached the model as a system message before the prompt.
	reqs := tg.fake.Requests()
	var sent struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &sent); err != nil {
		t.Fatal(err)
	}
	n := len(sent.Messages)
	if n < 3 || sent.Messages[n-2].Role != "system" || sent.Messages[n-2].Content != "Answer in English." || sent.Messages[n-1].Content != "hi" {
		t.Fatalf("model saw %+v", sent.Messages)
	}

	// A fork copies the transcript; an explicit id is honoured and must be new.
	forked := decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions/chat-1/fork", `{"id":"chat-1-b","title":"Branch"}`, nil), 201)
	if forked.Session["parent_id"] != "chat-1" || forked.Session["parent_kind"] != "branch" || forked.Session["message_count"] != float64(3) {
		t.Fatalf("fork %+v", forked)
	}
	envelope(t, tg.do(t, "POST", "/api/sessions/chat-1/fork", `{"id":"chat-1-b"}`, nil), 409, "session_exists")
	auto := decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions/chat-1/fork", ``, nil), 201)
	if auto.Session["parent_id"] != "chat-1" || auto.Session["id"] == "chat-1-b" {
		t.Fatalf("fork without body %+v", auto)
	}
	envelope(t, tg.do(t, "POST", "/api/sessions/chat-1/fork", `{"upto_row_id":999999}`, nil), 400, "invalid_value")
	envelope(t, tg.do(t, "POST", "/api/sessions/nope/fork", `{}`, nil), 404, "session_not_found")

	// The session's history continues in the next turn.
	tg.fake.Enqueue(openaitest.Text("again"))
	decodeAs[map[string]any](t, tg.do(t, "POST", "/api/sessions/chat-1-b/chat", `{"message":{"role":"user","content":[{"type":"text","text":"more"}]}}`, nil), 200)
	reqs = tg.fake.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "Hello there") {
		t.Fatalf("the fork's turn lacked the copied history: %s", reqs[len(reqs)-1].Body)
	}
}

func TestSessionChatStream(t *testing.T) {
	tg := newTarget(t, nil)
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"st-1"}`, nil), 201)
	tg.fake.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_a", Name: "read_file", Args: []string{`{"path":"missing.txt"}`}}),
		openaitest.Response{Reasoning: []string{"hmm"}, Text: []string{"No ", "file."}},
	)
	r := tg.do(t, "POST", "/api/sessions/st-1/chat/stream", `{"input":[{"type":"input_text","text":"read it"}]}`, nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") || r.header.Get("X-Hermes-Session-Id") != "st-1" {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	evs := parseSSE(t, r.body)
	var names []string
	var runID string
	for i, ev := range evs {
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatalf("%s: %v", ev.data, err)
		}
		if m["session_id"] != "st-1" || m["seq"] != float64(i+1) || m["ts"] == nil {
			t.Fatalf("event %d lacks the common fields: %s", i, ev.data)
		}
		if runID == "" {
			runID, _ = m["run_id"].(string)
		}
		if m["run_id"] != runID || !strings.HasPrefix(runID, "run_") {
			t.Fatalf("run id changed: %s", ev.data)
		}
		if ev.name != "assistant.delta" { // deltas are as many as the provider sent
			names = append(names, ev.name)
		}
		switch ev.name {
		case "run.started":
			if um := m["user_message"].(map[string]any); um["content"] != "read it" || um["role"] != "user" {
				t.Fatalf("run.started %s", ev.data)
			}
		case "tool.started", "tool.failed":
			if m["tool_name"] != "read_file" || m["preview"] != "missing.txt" || m["args"].(map[string]any)["path"] != "missing.txt" || m["message_id"] == "" {
				t.Fatalf("%s %s", ev.name, ev.data)
			}
		case "tool.progress":
			if m["tool_name"] != "_thinking" || m["delta"] != "hmm" {
				t.Fatalf("reasoning %s", ev.data)
			}
		case "assistant.completed":
			if m["content"] != "No file." || m["completed"] != true || m["partial"] != false || m["interrupted"] != false {
				t.Fatalf("assistant.completed %s", ev.data)
			}
		case "run.completed":
			if m["completed"] != true || len(m["messages"].([]any)) != 4 || m["usage"] == nil {
				t.Fatalf("run.completed %s", ev.data)
			}
		}
	}
	want := "run.started message.started tool.started tool.failed tool.progress assistant.completed run.completed done"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v, want %s", names, want)
	}
}

func TestSessionChatFailureStream(t *testing.T) {
	tg := newTarget(t, nil)
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"bad-1"}`, nil), 201)
	tg.fake.Enqueue(openaitest.HTTPError(400, openaitest.APIError{Message: "context too long", Type: "invalid_request_error"}))
	evs := parseSSE(t, tg.do(t, "POST", "/api/sessions/bad-1/chat/stream", `{"input":"x"}`, nil).body)
	last := evs[len(evs)-2]
	if last.name != "run.failed" || !strings.Contains(last.data, `"completed":false`) || !strings.Contains(last.data, `"error"`) || evs[len(evs)-1].name != "done" {
		t.Fatalf("terminal events %+v", evs[len(evs)-2:])
	}
	// Non-streamed, a failed turn with no text at all is a 502 envelope.
	tg.fake.Enqueue(openaitest.HTTPError(400, openaitest.APIError{Message: "context too long", Type: "invalid_request_error"}))
	envelope(t, tg.do(t, "POST", "/api/sessions/bad-1/chat", `{"input":"x"}`, nil), 502, "agent_error")
}

func TestSessionChatBusy(t *testing.T) {
	tg := newTarget(t, nil)
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"busy-1"}`, nil), 201)
	gate := openaitest.NewGate()
	tg.fake.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Gate: gate})
	done := make(chan resp, 1)
	go func() { done <- tg.do(t, "POST", "/api/sessions/busy-1/chat", `{"input":"first"}`, nil) }()
	<-gate.Reached()
	envelope(t, tg.do(t, "POST", "/api/sessions/busy-1/chat", `{"input":"second"}`, nil), 409, "session_busy")
	envelope(t, tg.do(t, "POST", "/api/sessions/busy-1/chat/stream", `{"input":"second","system_message":"x"}`, nil), 409, "session_busy")
	gate.Release()
	if r := <-done; r.status != 200 {
		t.Fatalf("first turn %d %s", r.status, r.body)
	}
	// The refused requests left nothing in the transcript.
	msgs := decodeAs[struct{ Data []map[string]any }](t, tg.do(t, "GET", "/api/sessions/busy-1/messages", "", nil), 200)
	if len(msgs.Data) != 2 {
		t.Fatalf("transcript %+v", msgs.Data)
	}
}

func TestSessionsBadInput(t *testing.T) {
	tg := newTarget(t, nil)
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"ok-1"}`, nil), 201)
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/api/sessions", `{`, 400, "invalid_json"},
		{"POST", "/api/sessions", `[]`, 400, "invalid_type"},
		{"POST", "/api/sessions", `null`, 400, "invalid_type"},
		{"POST", "/api/sessions", `{"id":5}`, 400, "invalid_session_id"},
		{"POST", "/api/sessions", `{"id":"../x"}`, 400, "invalid_session_id"},
		{"POST", "/api/sessions", `{"id":"a","session_id":"b"}`, 400, "invalid_session_id"},
		{"POST", "/api/sessions", `{"title":["x"]}`, 400, "invalid_title"},
		{"POST", "/api/sessions", `{"title":"` + strings.Repeat("t", 101) + `"}`, 400, "invalid_title"},
		{"POST", "/api/sessions", `{"title":"a\u0007b"}`, 400, "invalid_title"},
		{"POST", "/api/sessions", `{"title":"invoice \u202egpj.exe"}`, 400, "invalid_title"},
		{"POST", "/api/sessions", `{"system_prompt":{}}`, 400, "invalid_system_prompt"},
		{"POST", "/api/sessions", `{"model":"nope"}`, 404, "model_not_found"},
		{"POST", "/api/sessions", `{"cwd":"/"}`, 400, "unsupported_session_field"},
		{"GET", "/api/sessions?limit=x", ``, 400, "invalid_value"},
		{"GET", "/api/sessions?offset=-1", ``, 400, "invalid_value"},
		{"GET", "/api/sessions?include_children=maybe", ``, 400, "invalid_value"},
		{"GET", "/api/sessions/nope", ``, 404, "session_not_found"},
		{"PATCH", "/api/sessions/nope", `{"title":"x"}`, 404, "session_not_found"},
		{"PATCH", "/api/sessions/ok-1", `{"title":1}`, 400, "invalid_title"},
		{"PATCH", "/api/sessions/ok-1", `{"end_reason":""}`, 400, "invalid_value"},
		{"PATCH", "/api/sessions/ok-1", `{"end_reason":7}`, 400, "invalid_type"},
		{"GET", "/api/sessions/ok-1/messages?after_id=z", ``, 400, "invalid_value"},
		{"POST", "/api/sessions/ok-1/chat", ``, 400, "invalid_json"},
		{"POST", "/api/sessions/ok-1/chat", `{}`, 400, "missing_input"},
		{"POST", "/api/sessions/ok-1/chat", `{"input":"   "}`, 400, "no_user_message"},
		{"POST", "/api/sessions/ok-1/chat", `{"input":42}`, 400, "invalid_type"},
		{"POST", "/api/sessions/ok-1/chat", `{"input":[{"role":"assistant","content":"x"}]}`, 400, "no_user_message"},
		{"POST", "/api/sessions/ok-1/chat", `{"input":[{"type":"input_image","image_url":"x"}]}`, 400, "unsupported_content_type"},
		{"POST", "/api/sessions/ok-1/chat", `{"message":{"role":"system","content":"x"}}`, 400, "invalid_type"},
		{"POST", "/api/sessions/ok-1/chat", `{"input":"x","system_message":5}`, 400, "invalid_system_message"},
		{"POST", "/api/sessions/ok-1/chat/stream", `{"input":"x","instructions":[]}`, 400, "invalid_system_message"},
		{"POST", "/api/sessions/nope/chat/stream", `{"input":"x"}`, 404, "session_not_found"},
		{"POST", "/api/sessions/nope/chat", `{"input":"x"}`, 404, "session_not_found"},
	} {
		t.Run(fmt.Sprintf("%s %s %s", c.method, c.path, c.body), func(t *testing.T) {
			envelope(t, tg.do(t, c.method, c.path, c.body, nil), c.status, c.code)
		})
	}
	// Header rules apply here too; the raw request carries a control character.
	r := raw(t, tg, "GET /api/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testKey+"\r\nX-Hermes-Session-Id: a\x01b\r\nConnection: close\r\n\r\n")
	if r.status != 400 {
		t.Fatalf("control character in session header: %d %s", r.status, r.body)
	}
	envelope(t, tg.do(t, "GET", "/api/sessions", "", map[string]string{"X-Hermes-Session-Id": "../../etc"}), 400, "invalid_session_id")
	envelope(t, tg.do(t, "GET", "/api/sessions", "", map[string]string{"Authorization": ""}), 401, "invalid_api_key")
	// A body over 10 MB is refused on the header alone.
	r = raw(t, tg, fmt.Sprintf("POST /api/sessions/ok-1/chat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", testKey, 10<<20+1))
	envelope(t, r, 413, "body_too_large")
	if tg.fake.Pending() != 0 || len(tg.fake.Requests()) != 0 {
		t.Fatal("a refused request reached the model")
	}
}

func TestSessionChatStreamClientLeavesInterrupts(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) { o.KeepAlive = 20 * time.Millisecond })
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"leave-1"}`, nil), 201)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	tg.fake.Enqueue(openaitest.Response{Text: []string{"never", "seen"}, FaultAt: 1, Gate: gate})
	req, err := http.NewRequest("POST", tg.base+"/api/sessions/leave-1/chat/stream", strings.NewReader(`{"input":"long job"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && sc.Text() != "event: message.started" {
	}
	<-gate.Reached()
	res.Body.Close() // the client goes away while the model is still working
	sess, ok := tg.eng.Live("leave-1")
	if !ok {
		t.Fatal("session not live")
	}
	// The server notices at its next keepalive write and interrupts the turn.
	sub := sess.Subscribe(0)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no outcome: %v", err)
		}
		if o, ok := ev.Data.(engine.Outcome); ok {
			if o.Status != engine.StatusCancelled || !o.Interrupted {
				t.Fatalf("outcome %+v", o)
			}
			return
		}
	}
}

func TestSessionsStoreUnavailable(t *testing.T) {
	tg := newTarget(t, nil)
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"db-1"}`, nil), 201)
	if err := tg.eng.Store().Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/sessions", "/api/sessions/db-1", "/api/sessions/db-1/messages"} {
		envelope(t, tg.do(t, "GET", path, "", nil), 503, "session_db_unavailable")
	}
	r := tg.do(t, "GET", "/health/detailed", "", nil)
	if r.status != 503 || !strings.Contains(string(r.body), `"degraded"`) || r.header.Get("Retry-After") != "2" {
		t.Fatalf("health with a closed store: %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
}
