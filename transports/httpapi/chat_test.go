package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

type sseEvent struct {
	name string
	data string
}

// parseSSE splits a complete event stream strictly: "\n" line endings only, every event
// (the last included) terminated by a blank line, at most one data line per event, no BOM.
// Comment lines are dropped.
func parseSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	if bytes.HasPrefix(body, []byte("\xef\xbb\xbf")) || bytes.ContainsRune(body, '\r') {
		t.Fatalf("BOM or CR in stream: %q", body)
	}
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []sseEvent
	for _, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		var ev sseEvent
		datas := 0
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
				datas++
			default:
				t.Fatalf("unexpected line %q in %q", line, block)
			}
		}
		if datas > 1 {
			t.Fatalf("several data lines: %q", block)
		}
		if datas == 1 {
			out = append(out, ev)
		}
	}
	return out
}

func chatBody(stream, usage bool, msgs ...string) string {
	type m struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var ms []m
	for i := 0; i+1 < len(msgs); i += 2 {
		ms = append(ms, m{msgs[i], msgs[i+1]})
	}
	b := map[string]any{"model": "openai:fake-agent", "messages": ms, "stream": stream, "user": map[string]any{"id": "u1"}, "temperature": 1}
	if usage {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	out, _ := json.Marshal(b)
	return string(out)
}

func TestChatNonStreaming(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("Hel", "lo"))
	r := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "system", "be brief", "user", "hi"), nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	var out struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Index        int            `json:"index"`
			Message      map[string]any `json:"message"`
			FinishReason string         `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]int `json:"usage"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.ID, "chatcmpl-") || out.Object != "chat.completion" || out.Model != "openai:fake-agent" || len(out.Choices) != 1 {
		t.Fatalf("%s", r.body)
	}
	c := out.Choices[0]
	if c.Message["role"] != "assistant" || c.Message["content"] != "Hello" || c.FinishReason != "stop" {
		t.Fatalf("%s", r.body)
	}
	if out.Usage["total_tokens"] == 0 {
		t.Fatalf("usage %s", r.body)
	}
	sid := r.header.Get("X-Hermes-Session-Id")
	if !strings.HasPrefix(sid, "api-") {
		t.Fatalf("session header %q", sid)
	}
	// The system message reached the model.
	if reqs := tg.fake.Requests(); len(reqs) != 1 || !bytes.Contains(reqs[0].Body, []byte("be brief")) {
		t.Fatalf("model request %s", reqs)
	}
}

func TestChatStreamCanonicalSequence(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("Hel", "lo"))
	r := tg.do(t, "POST", "/v1/chat/completions", chatBody(true, true, "user", "hi"), map[string]string{"X-Hermes-Session-Key": "agent:main:webui:dm:user-42"})
	if r.status != 200 || r.header.Get("Content-Type") != "text/event-stream; charset=utf-8" || r.header.Get("Cache-Control") != "no-cache" || r.header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("%d %v", r.status, r.header)
	}
	if r.header.Get("X-Hermes-Session-Id") == "" || r.header.Get("X-Hermes-Session-Key") != "agent:main:webui:dm:user-42" {
		t.Fatalf("session headers %v", r.header)
	}
	evs := parseSSE(t, r.body)
	want := []string{
		`{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"usage":null}`,
		`{"choices":[{"delta":{"content":"Hel"},"finish_reason":null,"index":0,"logprobs":null}],"usage":null}`,
		`{"choices":[{"delta":{"content":"lo"},"finish_reason":null,"index":0,"logprobs":null}],"usage":null}`,
		`{"choices":[{"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"usage":null}`,
		`{"choices":[],"usage":{"completion_tokens":*,"prompt_tokens":*,"total_tokens":*}}`,
		`[DONE]`,
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(evs), len(want), r.body)
	}
	var id string
	var created float64
	for i, ev := range evs {
		if ev.name != "" {
			t.Fatalf("event line on a chat chunk: %+v", ev)
		}
		if ev.data == "[DONE]" {
			if want[i] != "[DONE]" {
				t.Fatalf("early [DONE]")
			}
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatal(err)
		}
		if m["object"] != "chat.completion.chunk" || m["model"] != "openai:fake-agent" {
			t.Fatalf("chunk %s", ev.data)
		}
		if _, has := m["error"]; has {
			t.Fatalf("error key on a normal chunk: %s", ev.data)
		}
		if i == 0 {
			id, created = m["id"].(string), m["created"].(float64)
		} else if m["id"] != id || m["created"] != created {
			t.Fatalf("id/created changed: %s", ev.data)
		}
		delete(m, "id")
		delete(m, "created")
		delete(m, "object")
		delete(m, "model")
		if u, ok := m["usage"].(map[string]any); ok {
			for k, v := range u {
				if v.(float64) <= 0 {
					t.Fatalf("usage %s = %v", k, v)
				}
				u[k] = "*"
			}
		}
		got, _ := json.Marshal(m)
		if w := strings.ReplaceAll(want[i], "*", `"*"`); string(got) != w {
			t.Fatalf("chunk %d:\n got %s\nwant %s", i, got, w)
		}
	}
}

func TestChatStreamWithoutUsage(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("ok"))
	r := tg.do(t, "POST", "/v1/chat/completions", chatBody(true, false, "user", "hi"), nil)
	evs := parseSSE(t, r.body)
	if len(evs) != 4 || evs[3].data != "[DONE]" || strings.Contains(string(r.body), `"usage"`) {
		t.Fatalf("%s", r.body)
	}
}

func TestChatToolProgressAndApprovalDenied(t *testing.T) {
	tg := newTarget(t, nil)
	if err := os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	tg.fake.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_ls", Name: "terminal", Args: []string{`{"command":"ls"}`}}),
		openaitest.ToolCalls(openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}),
		openaitest.Text("done"),
	)
	r := tg.do(t, "POST", "/v1/chat/completions", chatBody(true, false, "user", "clean up"), map[string]string{httpapi.HeaderToolProgress: "true"})
	evs := parseSSE(t, r.body)
	var progress []map[string]any
	var content strings.Builder
	for _, ev := range evs {
		switch {
		case ev.name == "hermes.tool.progress":
			var m map[string]any
			if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
				t.Fatal(err)
			}
			progress = append(progress, m)
		case ev.name != "":
			t.Fatalf("unexpected event %q", ev.name)
		case ev.data != "[DONE]":
			var m struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			_ = json.Unmarshal([]byte(ev.data), &m)
			content.WriteString(m.Choices[0].Delta.Content)
		}
	}
	if content.String() != "done" || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream %s", r.body)
	}
	// ls ran: running then completed.
	if len(progress) < 2 || progress[0]["status"] != "running" || progress[0]["toolCallId"] != "call_ls" || progress[0]["tool"] != "terminal" || progress[0]["label"] != "ls" ||
		progress[1]["status"] != "completed" || progress[1]["toolCallId"] != "call_ls" {
		t.Fatalf("progress %v", progress)
	}
	// rm -r was announced, then denied: its completion says it was blocked.
	if len(progress) != 4 || progress[2]["toolCallId"] != "call_rm" || progress[2]["status"] != "running" ||
		progress[3]["toolCallId"] != "call_rm" || progress[3]["status"] != "completed" || progress[3]["blocked"] != true {
		t.Fatalf("progress %v", progress)
	}
	if _, has := progress[1]["blocked"]; has {
		t.Fatalf("ls marked blocked: %v", progress[1])
	}
	if _, err := os.Stat(filepath.Join(tg.cwd, "build")); err != nil {
		t.Fatalf("the dangerous command ran: %v", err)
	}
	reqs := tg.fake.Requests()
	if len(reqs) != 3 || !bytes.Contains(reqs[2].Body, []byte("BLOCKED")) {
		t.Fatalf("the model was not told the call was blocked: %d requests", len(reqs))
	}
}

func TestChatSessionContinuity(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("first answer"), openaitest.Text("second answer"), openaitest.Text("third"))
	r1 := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "first question"), nil)
	r2 := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "first question", "assistant", "first answer", "user", "second question"), nil)
	sid := r1.header.Get("X-Hermes-Session-Id")
	if r1.status != 200 || r2.status != 200 || sid == "" || r2.header.Get("X-Hermes-Session-Id") != sid {
		t.Fatalf("%d %d %q %q", r1.status, r2.status, sid, r2.header.Get("X-Hermes-Session-Id"))
	}
	reqs := tg.fake.Requests()
	if !bytes.Contains(reqs[1].Body, []byte("first answer")) || !bytes.Contains(reqs[1].Body, []byte("second question")) {
		t.Fatalf("second model request lacks the history: %s", reqs[1].Body)
	}
	// An explicit id continues that session whatever the request's history says.
	r3 := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "unrelated", "user", "third question"), map[string]string{"X-Hermes-Session-Id": sid})
	if r3.status != 200 || r3.header.Get("X-Hermes-Session-Id") != sid {
		t.Fatalf("%d %s", r3.status, r3.body)
	}
	reqs = tg.fake.Requests()
	if b := reqs[2].Body; !bytes.Contains(b, []byte("second answer")) || bytes.Contains(b, []byte("unrelated")) {
		t.Fatalf("third model request: %s", b)
	}
	// A new explicit id starts a session seeded with the request's history.
	tg.fake.Enqueue(openaitest.Text("x"))
	r4 := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "seeded q", "assistant", "seeded a", "user", "go"), map[string]string{"X-Hermes-Session-Id": "my-chat-1"})
	if r4.status != 200 || r4.header.Get("X-Hermes-Session-Id") != "my-chat-1" {
		t.Fatalf("%d %s", r4.status, r4.body)
	}
	if b := tg.fake.Requests()[3].Body; !bytes.Contains(b, []byte("seeded a")) {
		t.Fatalf("seed missing: %s", b)
	}
}

func TestChatModelFailure(t *testing.T) {
	tg := newTarget(t, nil)
	fail := openaitest.HTTPError(400, openaitest.APIError{Message: "bad things", Type: "invalid_request_error"})
	tg.fake.Enqueue(fail)
	r := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "hi"), nil)
	envelope(t, r, 409, "turn_failed")
	if r.header.Get("x-should-retry") != "false" || r.header.Get("X-Hermes-Replayed") != "" {
		t.Fatalf("retry header %v", r.header)
	}
	// The same request again (a client's automatic retry) gets the same answer and starts no
	// turn: the model is not asked again.
	asked := len(tg.fake.Requests())
	r = tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "hi"), nil)
	if e := envelope(t, r, 409, "turn_failed"); !strings.Contains(e["message"].(string), "bad things") || r.header.Get("X-Hermes-Replayed") != "true" {
		t.Fatalf("replay %v %s", r.header, r.body)
	}
	if n := len(tg.fake.Requests()); n != asked {
		t.Fatalf("the retry reached the model: %d requests, want %d", n, asked)
	}
	tg.fake.Enqueue(fail)
	r = tg.do(t, "POST", "/v1/chat/completions", chatBody(true, false, "user", "again"), nil)
	evs := parseSSE(t, r.body)
	if r.status != 200 || len(evs) != 2 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var e struct {
		Error   map[string]any `json:"error"`
		Choices any            `json:"choices"`
	}
	if err := json.Unmarshal([]byte(evs[1].data), &e); err != nil || e.Error["code"] != "agent_error" || e.Choices != nil {
		t.Fatalf("in-band error %s", evs[1].data)
	}
	if strings.Contains(string(r.body), "[DONE]") {
		t.Fatalf("[DONE] after an error")
	}
}

func TestChatClientDisconnectInterrupts(t *testing.T) {
	// A short keepalive makes the server notice the gone client soon; nothing asserts on it.
	tg := newTarget(t, func(o *httpapi.Options) { o.KeepAlive = 20 * time.Millisecond })
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	tg.fake.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Gate: gate})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", tg.base+"/v1/chat/completions", strings.NewReader(chatBody(true, false, "user", "hi")))
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sid := res.Header.Get("X-Hermes-Session-Id")
	br := bufio.NewReader(res.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"role":"assistant"`) {
		t.Fatalf("%q %v", line, err)
	}
	<-gate.Reached()
	cancel()
	res.Body.Close()
	sess, ok := tg.eng.Live(sid)
	if !ok {
		t.Fatalf("session %q not live", sid)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	// The turn ends only because the server interrupted it: the model stream is still held.
	for ev, err := range sess.Events(wctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := ev.Data.(engine.Outcome); ok {
			if !o.Interrupted || o.Status != engine.StatusCancelled {
				t.Fatalf("outcome %+v", o)
			}
			break
		}
	}
	_, _ = io.Copy(io.Discard, br)
	// An interrupted turn is not a failed one: the same request again runs a new turn instead
	// of replaying the interruption.
	if err := sess.WaitIdle(wctx); err != nil {
		t.Fatal(err)
	}
	tg.fake.Enqueue(openaitest.Text("again"))
	r := tg.do(t, "POST", "/v1/chat/completions", chatBody(true, false, "user", "hi"), nil)
	if r.status != 200 || r.header.Get("X-Hermes-Replayed") != "" || !strings.Contains(string(r.body), `"content":"again"`) {
		t.Fatalf("the request after the interruption: %d %v %s", r.status, r.header, r.body)
	}
}

func TestChatStreamReasoning(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Response{Reasoning: []string{"let me think"}, Text: []string{"42"}})
	r := tg.do(t, "POST", "/v1/chat/completions", chatBody(true, false, "user", "answer?"), nil)
	evs := parseSSE(t, r.body)
	var sawReasoning bool
	for _, ev := range evs[1:] {
		if ev.data == "[DONE]" {
			continue
		}
		var m struct {
			Choices []struct {
				Delta map[string]any `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatal(err)
		}
		d := m.Choices[0].Delta
		if d["reasoning_content"] != nil {
			sawReasoning = true
			if _, has := d["content"]; has {
				t.Fatalf("reasoning delta with content: %s", ev.data)
			}
		}
	}
	if !sawReasoning {
		t.Fatalf("no reasoning_content delta:\n%s", r.body)
	}
}
