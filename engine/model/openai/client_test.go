package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

const testKey = "sk-test-123"

// backoffLog is a Backoff hook that records the attempts it was asked about and never waits.
type backoffLog struct {
	mu       sync.Mutex
	attempts []int
}

func (b *backoffLog) hook(attempt int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts = append(b.attempts, attempt)
	return time.Microsecond
}

func (b *backoffLog) got() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.attempts...)
}

func newClient(t *testing.T, srv *openaitest.Server, b *backoffLog) *openai.Client {
	t.Helper()
	cfg := openai.Config{BaseURL: srv.URL() + "/", APIKey: testKey}
	if b != nil {
		cfg.Backoff = b.hook
	}
	return openai.New(cfg)
}

func userRequest(text string) model.Request {
	return model.Request{Model: "gpt-test", Messages: []model.Message{{Role: "user", Content: text}}}
}

func collect(seq iter.Seq2[model.Chunk, error]) (chunks []model.Chunk, err error) {
	for c, e := range seq {
		if e != nil {
			return chunks, e
		}
		chunks = append(chunks, c)
	}
	return chunks, nil
}

func accumulate(t *testing.T, chunks []model.Chunk) *model.Accumulator {
	t.Helper()
	var a model.Accumulator
	for _, c := range chunks {
		a.Add(c)
	}
	return &a
}

func TestStreamText(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, openaitest.WithAPIKey(testKey))
	srv.Enqueue(openaitest.Text("Hel", "lo, ", "world"))
	chunks, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("hi")))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Chunk{
		{Text: "Hel"}, {Text: "lo, "}, {Text: "world"},
		{FinishReason: "stop"},
		{Usage: &model.Usage{PromptTokens: 12, CompletionTokens: 7, TotalTokens: 19}},
	}
	if !reflect.DeepEqual(chunks, want) {
		t.Fatalf("chunks:\n got %+v\nwant %+v", chunks, want)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
}

func TestStreamReasoning(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"reasoning_content", "reasoning", "thinking"} {
		t.Run(key, func(t *testing.T) {
			srv := openaitest.New(t)
			srv.Enqueue(openaitest.Response{
				Reasoning: []string{"The user ", "greets."}, ReasoningKey: key, Text: []string{"Hi!"},
				Usage: &model.Usage{PromptTokens: 5, CompletionTokens: 9, TotalTokens: 14, CachedTokens: 2, ReasoningTokens: 6},
			})
			chunks, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("hi")))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			a := accumulate(t, chunks)
			if got := a.Reasoning.String(); got != "The user greets." {
				t.Errorf("reasoning = %q", got)
			}
			if got := a.Text.String(); got != "Hi!" {
				t.Errorf("text = %q", got)
			}
			if chunks[0].Text != "" || chunks[0].Reasoning == "" {
				t.Errorf("first chunk %+v: reasoning must come before text", chunks[0])
			}
			want := model.Usage{PromptTokens: 5, CompletionTokens: 9, TotalTokens: 14, CachedTokens: 2, ReasoningTokens: 6}
			if !a.HaveUsage || a.Usage != want {
				t.Errorf("usage = %+v (have %v), want %+v", a.Usage, a.HaveUsage, want)
			}
		})
	}
}

func TestStreamToolCallStyles(t *testing.T) {
	t.Parallel()
	calls := []openaitest.Call{
		{ID: "call_a", Name: "get_weather", Args: []string{`{"ci`, `ty":"Pa`, `ris"}`}},
		{ID: "call_b", Name: "get_time", Args: []string{`{"tz":`, `"CET"}`}},
	}
	want := []model.ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{ID: "call_b", Name: "get_time", Arguments: `{"tz":"CET"}`},
	}
	styles := map[string]openaitest.Style{
		"indexed":     openaitest.StyleIndexed,
		"interleaved": openaitest.StyleInterleaved,
		"noindex":     openaitest.StyleNoIndex,
		"oneshot":     openaitest.StyleOneShot,
	}
	for name, style := range styles {
		t.Run(name, func(t *testing.T) {
			srv := openaitest.New(t)
			srv.Enqueue(openaitest.Response{Calls: calls, Style: style})
			chunks, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("weather and time?")))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			a := accumulate(t, chunks)
			if !reflect.DeepEqual(a.Calls, want) {
				t.Fatalf("calls:\n got %+v\nwant %+v", a.Calls, want)
			}
			if a.FinishReason != "tool_calls" {
				t.Errorf("finish = %q", a.FinishReason)
			}
			if a.Text.Len() != 0 {
				t.Errorf("unexpected text %q", a.Text.String())
			}
		})
	}
}

func TestStreamInterleavedKeepsIndexes(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Response{Style: openaitest.StyleInterleaved, Calls: []openaitest.Call{
		{Name: "a", Args: []string{"{", "}"}}, {Name: "b", Args: []string{"{", "}"}},
	}})
	chunks, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("x")))
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	for _, c := range chunks {
		for _, d := range c.ToolCalls {
			order = append(order, d.Index)
		}
	}
	if want := []int{0, 1, 0, 1, 0, 1}; !reflect.DeepEqual(order, want) {
		t.Fatalf("delta indexes = %v, want %v", order, want)
	}
}

func TestRequestBodyShape(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("ok"))
	temp := 0.25
	req := model.Request{
		Model: "gpt-test",
		Messages: []model.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "weather?"},
			{Role: "assistant", Reasoning: "secret thoughts", ToolCalls: []model.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_2", Name: "noargs"},
			}},
			{Role: "tool", ToolCallID: "call_1", Name: "get_weather", Content: "sunny"},
			{Role: "tool", ToolCallID: "call_2", Name: "noargs", Content: ""},
		},
		Tools: []model.ToolSpec{{
			Name: "get_weather", Description: "Weather for a city",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`),
		}},
		MaxTokens:   100,
		Temperature: &temp,
	}
	client := openai.New(openai.Config{BaseURL: srv.URL(), Headers: map[string]string{"HTTP-Referer": "https://example.test"}})
	if _, err := collect(client.Stream(t.Context(), req)); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d", len(reqs))
	}
	got := reqs[0]
	if got.Path != "/v1/chat/completions" || got.Method != http.MethodPost {
		t.Errorf("%s %s", got.Method, got.Path)
	}
	if a := got.Header.Get("Authorization"); a != "" {
		t.Errorf("Authorization sent without a key: %q", a)
	}
	if h := got.Header.Get("HTTP-Referer"); h != "https://example.test" {
		t.Errorf("custom header = %q", h)
	}
	if ct := got.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	wantBody := `{
		"model": "gpt-test",
		"messages": [
			{"role": "system", "content": "be brief"},
			{"role": "user", "content": "weather?"},
			{"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
				{"id": "call_2", "type": "function", "function": {"name": "noargs", "arguments": "{}"}}
			]},
			{"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
			{"role": "tool", "content": "", "tool_call_id": "call_2"}
		],
		"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
			"parameters": {"type":"object","properties":{"city":{"type":"string"}}}}}],
		"max_tokens": 100,
		"temperature": 0.25,
		"stream": true,
		"stream_options": {"include_usage": true}
	}`
	assertJSONEqual(t, got.Body, []byte(wantBody))
}

func TestRequestOmitsUnsetOptions(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, openaitest.WithAPIKey(testKey))
	srv.Enqueue(openaitest.Text("ok"))
	if _, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("hi"))); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if a := got.Header.Get("Authorization"); a != "Bearer "+testKey {
		t.Errorf("Authorization = %q", a)
	}
	assertJSONEqual(t, got.Body, []byte(`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],
		"stream":true,"stream_options":{"include_usage":true}}`))
}

func assertJSONEqual(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("bad expectation: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("body:\n got %s\nwant %s", got, want)
	}
}

func TestUnauthorizedIsNotRetried(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, openaitest.WithAPIKey(testKey))
	var b backoffLog
	client := openai.New(openai.Config{BaseURL: srv.URL(), APIKey: "wrong", Backoff: b.hook})
	_, err := collect(client.Stream(t.Context(), userRequest("hi")))
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("err = %v (%T), want *model.Error", err, err)
	}
	want := model.Error{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided."}
	if *me != want {
		t.Fatalf("error = %+v, want %+v", *me, want)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("server saw %d requests, want 1 (401 must not be retried)", n)
	}
	if len(b.got()) != 0 {
		t.Fatalf("backoff consulted: %v", b.got())
	}
}

func TestRateLimitRetriedThenSucceeds(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.Response{Status: 429, Header: http.Header{"Retry-After": {"1"}},
			Error: openaitest.APIError{Message: "Rate limit reached", Type: "requests", Code: "rate_limit_exceeded"}},
		openaitest.Text("finally"),
	)
	var b backoffLog
	chunks, err := collect(newClient(t, srv, &b).Stream(t.Context(), userRequest("hi")))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got := accumulate(t, chunks).Text.String(); got != "finally" {
		t.Fatalf("text = %q", got)
	}
	if got := b.got(); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("backoff attempts = %v, want [1]", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || string(reqs[0].Body) != string(reqs[1].Body) {
		t.Fatalf("want the same body sent twice, got %d requests", len(reqs))
	}
}

func TestServerErrorRetriesExhausted(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	fail := openaitest.HTTPError(500, openaitest.APIError{Message: "boom", Type: "server_error"})
	srv.Enqueue(fail, fail, fail, openaitest.Text("never reached"))
	var b backoffLog
	_, err := collect(newClient(t, srv, &b).Stream(t.Context(), userRequest("hi")))
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 500 || !me.Retryable || me.Message != "boom" || me.Type != "server_error" {
		t.Fatalf("err = %#v", err)
	}
	if n := len(srv.Requests()); n != 1+openai.DefaultMaxRetries {
		t.Fatalf("server saw %d requests, want %d", n, 1+openai.DefaultMaxRetries)
	}
	if got := b.got(); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("backoff attempts = %v", got)
	}
	if srv.Pending() != 1 {
		t.Fatalf("pending = %d, want the success left unused", srv.Pending())
	}
}

func TestMaxRetriesConfig(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	fail := openaitest.HTTPError(503, openaitest.APIError{Message: "overloaded", Type: "server_error"})
	srv.Enqueue(fail, fail, fail, fail, fail, fail)
	var b backoffLog
	c := openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1, Backoff: b.hook})
	if _, err := collect(c.Stream(t.Context(), userRequest("hi"))); err == nil {
		t.Fatal("want an error")
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("MaxRetries -1: %d requests, want 1", n)
	}
	c = openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: 4, Backoff: b.hook})
	if _, err := collect(c.Stream(t.Context(), userRequest("hi"))); err == nil {
		t.Fatal("want an error")
	}
	if n := len(srv.Requests()); n != 1+5 {
		t.Fatalf("MaxRetries 4: %d requests in total, want 6", n)
	}
}

func TestShouldRetryHeaderOverrides(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(
		// x-should-retry:true turns a normally final 400 into a retry...
		openaitest.Response{Status: 400, Header: http.Header{"X-Should-Retry": {"true"}}, Error: openaitest.APIError{Message: "flaky"}},
		openaitest.Text("ok"),
		// ...and x-should-retry:false makes a 500 final.
		openaitest.Response{Status: 500, Header: http.Header{"X-Should-Retry": {"false"}}, Error: openaitest.APIError{Message: "side effects happened"}},
		openaitest.Text("must not be used"),
	)
	var b backoffLog
	c := newClient(t, srv, &b)
	if _, err := collect(c.Stream(t.Context(), userRequest("one"))); err != nil {
		t.Fatalf("first call: %v", err)
	}
	_, err := collect(c.Stream(t.Context(), userRequest("two")))
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 500 || me.Retryable {
		t.Fatalf("second call err = %#v", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("requests = %d, want 3", n)
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Response{Status: 502, Header: http.Header{"X-Should-Retry": {"false"}},
		RawBody: "<html><body>502 Bad Gateway</body></html>" + strings.Repeat(" pad", 500)})
	_, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("hi")))
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 502 {
		t.Fatalf("err = %#v", err)
	}
	if !strings.HasPrefix(me.Message, "<html><body>502 Bad Gateway") || !strings.HasSuffix(me.Message, "…(truncated)") || len(me.Message) > 600 {
		t.Fatalf("message = %q", me.Message)
	}
}

func TestMalformedChunk(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Response{Text: []string{"a", "b"}, Fault: openaitest.FaultMalformed, FaultAt: 2})
	chunks, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("hi")))
	if !errors.Is(err, openai.ErrMalformedStream) {
		t.Fatalf("err = %v, want ErrMalformedStream", err)
	}
	if !strings.Contains(err.Error(), `"delta\":{\"content\":\"cut`) {
		t.Errorf("error does not quote the bad data: %v", err)
	}
	if !reflect.DeepEqual(chunks, []model.Chunk{{Text: "a"}}) {
		t.Errorf("chunks before the fault = %+v", chunks)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("requests = %d: a stream failure must not be retried", n)
	}
}

func TestDisconnectMidStream(t *testing.T) {
	t.Parallel()
	for name, fault := range map[string]openaitest.Fault{"abort": openaitest.FaultDisconnect, "eof": openaitest.FaultEOF} {
		t.Run(name, func(t *testing.T) {
			srv := openaitest.New(t)
			srv.Enqueue(openaitest.Response{Text: []string{"partial ", "answer"}, Fault: fault, FaultAt: 2})
			chunks, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("hi")))
			if !errors.Is(err, openai.ErrIncompleteStream) {
				t.Fatalf("err = %v, want ErrIncompleteStream", err)
			}
			if !reflect.DeepEqual(chunks, []model.Chunk{{Text: "partial "}}) {
				t.Errorf("chunks = %+v", chunks)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("requests = %d: a broken stream must not be retried", n)
			}
		})
	}
}

func TestInBandError(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 3, Fault: openaitest.FaultInBandError,
		Error: openaitest.APIError{Message: "context length exceeded", Type: "invalid_request_error", Code: "context_length_exceeded"}})
	chunks, err := collect(newClient(t, srv, nil).Stream(t.Context(), userRequest("hi")))
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("err = %v (%T)", err, err)
	}
	want := model.Error{Type: "invalid_request_error", Code: "context_length_exceeded", Message: "context length exceeded"}
	if *me != want {
		t.Fatalf("error = %+v, want %+v", *me, want)
	}
	if len(chunks) != 2 {
		t.Errorf("chunks = %+v", chunks)
	}
}

func TestCancelWhileBlocked(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	gate := openaitest.NewGate()
	defer gate.Release()
	srv.Enqueue(openaitest.Response{Text: []string{"first", "never"}, FaultAt: 2, Gate: gate})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var chunks []model.Chunk
	var err error
	for c, e := range newClient(t, srv, nil).Stream(ctx, userRequest("hi")) {
		if e != nil {
			err = e
			break
		}
		chunks = append(chunks, c)
		<-gate.Reached() // the server is now holding the stream open
		cancel()
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !reflect.DeepEqual(chunks, []model.Chunk{{Text: "first"}}) {
		t.Fatalf("chunks = %+v", chunks)
	}
}

func TestCancelBeforeResponse(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	gate := openaitest.NewGate()
	defer gate.Release()
	srv.Enqueue(openaitest.Response{Text: []string{"never"}, FaultAt: 0, Gate: gate})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-gate.Reached()
		cancel()
	}()
	_, err := collect(newClient(t, srv, nil).Stream(ctx, userRequest("hi")))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := collect(newClient(t, srv, nil).Stream(ctx, userRequest("hi")))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestUnreachableEndpoint(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	var b backoffLog
	c := openai.New(openai.Config{BaseURL: "http://" + addr + "/v1", Backoff: b.hook})
	_, err = collect(c.Stream(t.Context(), userRequest("hi")))
	if !errors.Is(err, openai.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, addr) || !strings.Contains(msg, "3 attempts") {
		t.Errorf("error should name the address and the attempts: %s", msg)
	}
	if got := b.got(); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("backoff attempts = %v, want [1 2]", got)
	}
}

func TestEarlyBreakClosesStream(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("a", "b", "c"), openaitest.Text("second"))
	c := newClient(t, srv, nil)
	for range c.Stream(t.Context(), userRequest("hi")) {
		break
	}
	// The client is still usable and the next call gets the next response.
	chunks, err := collect(c.Stream(t.Context(), userRequest("again")))
	if err != nil || accumulate(t, chunks).Text.String() != "second" {
		t.Fatalf("second call: %+v, %v", chunks, err)
	}
}

func TestInvalidBaseURL(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"api.openai.com/v1", "ftp://example.test/v1", "http://", "http://a b/v1"} {
		var b backoffLog
		c := openai.New(openai.Config{BaseURL: base, Backoff: b.hook})
		_, err := collect(c.Stream(t.Context(), userRequest("hi")))
		if err == nil || !strings.Contains(err.Error(), "invalid base URL") || !strings.Contains(err.Error(), base) {
			t.Errorf("%q: err = %v", base, err)
		}
		if len(b.got()) != 0 {
			t.Errorf("%q: retried a request that cannot be sent", base)
		}
	}
}
