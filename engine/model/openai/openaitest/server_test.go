package openaitest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

func post(t *testing.T, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// events splits an SSE body into the data of each event, checking the framing on the way.
func events(t *testing.T, body []byte) []string {
	t.Helper()
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("body does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		if strings.Contains(ev, "\n") || !strings.HasPrefix(ev, "data: ") {
			t.Fatalf("event is not a single data line: %q", ev)
		}
		out = append(out, strings.TrimPrefix(ev, "data: "))
	}
	return out
}

const streamReq = `{"model":"fake-model","stream":true,"stream_options":{"include_usage":true},"messages":[]}`

func TestCanonicalToolCallSequence(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "call_1", Name: "get_weather", Args: []string{`{"city":`, `"Paris"}`}}))
	resp, body := post(t, srv.URL()+"/chat/completions", "", streamReq)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := events(t, body)
	if evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("last event %q", evs[len(evs)-1])
	}
	want := []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000001,"model":"fake-model","usage":null,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000001,"model":"fake-model","usage":null,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000001,"model":"fake-model","usage":null,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000001,"model":"fake-model","usage":null,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000001,"model":"fake-model","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`,
		`[DONE]`,
	}
	if !reflect.DeepEqual(evs, want) {
		t.Fatalf("wire:\n%s\nwant:\n%s", strings.Join(evs, "\n"), strings.Join(want, "\n"))
	}
}

func TestTextSequenceRoleOnceAndNoUsageUnlessAsked(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Response{Reasoning: []string{"r"}, Text: []string{"a", "b"}})
	_, body := post(t, srv.URL()+"/chat/completions", "", `{"model":"m","stream":true}`)
	evs := events(t, body)
	var deltas []map[string]any
	for _, ev := range evs[:len(evs)-1] {
		var c map[string]any
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("chunk %q: %v", ev, err)
		}
		if _, ok := c["usage"]; ok {
			t.Fatalf("usage key without include_usage: %s", ev)
		}
		deltas = append(deltas, c["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any))
	}
	want := []map[string]any{
		{"role": "assistant", "content": ""},
		{"reasoning_content": "r"},
		{"content": "a"},
		{"content": "b"},
		{},
	}
	if !reflect.DeepEqual(deltas, want) {
		t.Fatalf("deltas = %v", deltas)
	}
}

func TestErrorsAndRecording(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, openaitest.WithAPIKey("k"))
	resp, body := post(t, srv.URL()+"/chat/completions", "wrong", streamReq)
	wantBody := `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}` + "\n"
	if resp.StatusCode != 401 || string(body) != wantBody || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("401: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = post(t, srv.URL()+"/chat/completions", "k", streamReq)
	if resp.StatusCode != 500 || resp.Header.Get("X-Should-Retry") != "false" || !strings.Contains(string(body), "no scripted response left") {
		t.Fatalf("empty script: %d %s", resp.StatusCode, body)
	}
	resp, _ = post(t, srv.URL()+"/completions", "k", streamReq)
	if resp.StatusCode != 404 {
		t.Fatalf("unknown path: %d", resp.StatusCode)
	}
	resp, body = post(t, srv.URL()+"/chat/completions", "k", `{"model":"m"}`)
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"param":"stream"`) {
		t.Fatalf("non-streaming: %d %s", resp.StatusCode, body)
	}
	srv.Enqueue(openaitest.Response{Status: 429, Header: http.Header{"Retry-After": {"7"}}, Error: openaitest.APIError{Message: "slow", Code: "rate_limit_exceeded"}})
	resp, body = post(t, srv.URL()+"/chat/completions", "k", streamReq)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(string(body), `"code":"rate_limit_exceeded"`) {
		t.Fatalf("429: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	reqs := srv.Requests()
	if len(reqs) != 5 || string(reqs[0].Body) != streamReq || reqs[2].Path != "/v1/completions" || reqs[1].Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("recorded %+v", reqs)
	}
	if srv.Pending() != 0 {
		t.Fatalf("pending %d", srv.Pending())
	}
}

func TestGateHoldsUntilReleased(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	g := openaitest.NewGate()
	srv.Enqueue(openaitest.Response{Text: []string{"a"}, FaultAt: 1, Gate: g})
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(streamReq))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		done <- result{body, err}
	}()
	<-g.Reached()
	select {
	case <-done:
		t.Fatal("stream finished while held at the gate")
	default:
	}
	g.Release()
	g.Release() // idempotent
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if evs := events(t, r.body); len(evs) != 5 || evs[4] != "[DONE]" {
		t.Fatalf("events after release = %q", evs)
	}
}

// A server with a context window refuses a longer request with OpenAI's 400 body and reports
// a shorter one's size as its prompt tokens; the responder answers once the queue is empty.
func TestContextWindowAndResponder(t *testing.T) {
	small := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	window := openaitest.RequestTokens([]byte(small)) + 10
	s := openaitest.New(t, openaitest.WithContextWindow(window), openaitest.WithResponder(func(r openaitest.Request) openaitest.Response {
		return openaitest.Text("answered")
	}))
	big := strings.Replace(small, `"hi"`, `"`+strings.Repeat("x", 200)+`"`, 1)
	resp, body := post(t, s.URL()+"/chat/completions", "", big)
	want := `{"error":{"message":"This model's maximum context length is ` + itoa(window) + ` tokens. However, your messages resulted in ` + itoa(openaitest.RequestTokens([]byte(big))) + ` tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	var got, exp any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(want), &exp)
	if resp.StatusCode != http.StatusBadRequest || !reflect.DeepEqual(got, exp) {
		t.Fatalf("%d %s, want 400 %s", resp.StatusCode, body, want)
	}
	resp, body = post(t, s.URL()+"/chat/completions", "", small)
	evs := events(t, body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(joined(evs), `"content":"answered"`) ||
		!strings.Contains(evs[len(evs)-2], `"prompt_tokens":`+itoa(openaitest.RequestTokens([]byte(small)))) {
		t.Fatalf("%d %q", resp.StatusCode, evs)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func joined(evs []string) string { return strings.Join(evs, "\n") }
