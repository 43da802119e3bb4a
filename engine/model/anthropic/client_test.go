package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
)

func noWait(int) time.Duration { return 0 }

// collect runs one call and folds its chunks.
func collect(t *testing.T, c *anthropic.Client, r model.Request) (*model.Accumulator, []model.Chunk, error) {
	t.Helper()
	acc := &model.Accumulator{}
	var chunks []model.Chunk
	for ch, err := range c.Stream(context.Background(), r) {
		if err != nil {
			return acc, chunks, err
		}
		chunks = append(chunks, ch)
		acc.Add(ch)
	}
	return acc, chunks, nil
}

func body(t *testing.T, req anthropictest.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(req.Body, &m); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, req.Body)
	}
	return m
}

func TestTextStreamUsageAndHeaders(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t, anthropictest.WithAPIKey("sk-ant-test"))
	srv.Enqueue(anthropictest.Response{Text: []string{"Hel", "lo"}, Usage: &anthropictest.Usage{Input: 5, CacheRead: 100, CacheWrite: 20, Output: 3}})
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "sk-ant-test", Headers: map[string]string{"anthropic-beta": "test-beta"}})
	acc, _, err := collect(t, c, model.Request{Model: "claude-sonnet-4-5", Messages: []model.Message{
		{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := acc.Text.String(); got != "Hello" {
		t.Errorf("text = %q", got)
	}
	if acc.FinishReason != "stop" {
		t.Errorf("finish = %q, want stop (end_turn)", acc.FinishReason)
	}
	want := model.Usage{PromptTokens: 125, CompletionTokens: 3, TotalTokens: 128, CachedTokens: 100, CacheWriteTokens: 20}
	if acc.Usage != want {
		t.Errorf("usage = %+v, want %+v", acc.Usage, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d", len(reqs))
	}
	h := reqs[0].Header
	if h.Get("Authorization") != "Bearer sk-ant-test" || h.Get("Anthropic-Version") == "" || h.Get("Anthropic-Beta") != "test-beta" {
		t.Errorf("headers: authorization %q, anthropic-version %q, anthropic-beta %q", h.Get("Authorization"), h.Get("Anthropic-Version"), h.Get("Anthropic-Beta"))
	}
	b := body(t, reqs[0])
	if b["model"] != "claude-sonnet-4-5" || b["stream"] != true || b["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("body model/stream/max_tokens = %v %v %v", b["model"], b["stream"], b["max_tokens"])
	}
	sys, _ := b["system"].([]any)
	if len(sys) != 1 || sys[0].(map[string]any)["text"] != "be brief" || sys[0].(map[string]any)["cache_control"] == nil {
		t.Errorf("system = %v, want one text block with cache_control", b["system"])
	}
	msgs, _ := b["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("messages = %v", msgs)
	}
	m0 := msgs[0].(map[string]any)
	blocks := m0["content"].([]any)
	if m0["role"] != "user" || blocks[0].(map[string]any)["text"] != "hi" || blocks[0].(map[string]any)["cache_control"] == nil {
		t.Errorf("message = %v, want the user text with a cache breakpoint (conversation tail)", m0)
	}
}

func TestToolUseThinkingRoundTrip(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	srv.Enqueue(
		anthropictest.Response{
			Thinking: []string{"Let me ", "list files."}, Signature: "sig-abc",
			Text:  []string{"Checking."},
			Calls: []anthropictest.Call{{ID: "toolu_1", Name: "terminal", Args: []string{`{"comm`, `and":"ls"}`}}},
		},
		anthropictest.Text("Two files."),
	)
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL() + "/v1/", ThinkingBudget: 2048, MaxTokens: 1024})
	tools := []model.ToolSpec{
		{Name: "read_file", Description: "read", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "terminal", Description: "run", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`)},
	}
	msgs := []model.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "what is here?"}}
	acc, chunks, err := collect(t, c, model.Request{Model: "claude-opus-4-5", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if acc.FinishReason != "tool_calls" {
		t.Errorf("finish = %q", acc.FinishReason)
	}
	if acc.Reasoning.String() != "Let me list files." {
		t.Errorf("reasoning = %q", acc.Reasoning.String())
	}
	if len(acc.Thinking) != 1 || acc.Thinking[0] != (model.ThinkingBlock{Text: "Let me list files.", Signature: "sig-abc"}) {
		t.Errorf("thinking blocks = %+v", acc.Thinking)
	}
	if len(acc.Calls) != 1 || acc.Calls[0] != (model.ToolCall{ID: "toolu_1", Name: "terminal", Arguments: `{"command":"ls"}`}) {
		t.Errorf("calls = %+v", acc.Calls)
	}
	var argDeltas int
	for _, ch := range chunks {
		for _, d := range ch.ToolCalls {
			if d.Index != 0 {
				t.Errorf("tool call delta index %d, want 0 (the first call)", d.Index)
			}
			if d.Arguments != "" {
				argDeltas++
			}
		}
	}
	if argDeltas != 2 {
		t.Errorf("argument deltas = %d, want the 2 streamed fragments", argDeltas)
	}
	b := body(t, srv.Requests()[0])
	if th, _ := b["thinking"].(map[string]any); th["type"] != "enabled" || th["budget_tokens"] != float64(2048) {
		t.Errorf("thinking = %v", b["thinking"])
	}
	if mt := b["max_tokens"].(float64); mt <= 2048 {
		t.Errorf("max_tokens %v not above the thinking budget", mt)
	}
	ts := b["tools"].([]any)
	if ts[0].(map[string]any)["cache_control"] != nil || ts[1].(map[string]any)["cache_control"] == nil {
		t.Errorf("tools = %v, want cache_control on the last only", ts)
	}
	schema := ts[1].(map[string]any)["input_schema"].(map[string]any)
	if schema["type"] != "object" || schema["additionalProperties"] != false || schema["required"].([]any)[0] != "command" {
		t.Errorf("input_schema = %v", schema)
	}

	// The next request of the turn carries the signed thinking, the tool_use and its result.
	msgs = append(msgs, acc.Message(), model.Message{Role: "tool", ToolCallID: "toolu_1", Name: "terminal", Content: "a.go\nb.go"})
	acc2, _, err := collect(t, c, model.Request{Model: "claude-opus-4-5", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if acc2.Text.String() != "Two files." {
		t.Errorf("second answer = %q", acc2.Text.String())
	}
	b = body(t, srv.Requests()[1])
	wire := b["messages"].([]any)
	if len(wire) != 3 {
		t.Fatalf("messages = %d, want user, assistant, user(tool_result)", len(wire))
	}
	asst := wire[1].(map[string]any)["content"].([]any)
	types := []string{}
	for _, bl := range asst {
		types = append(types, bl.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "thinking,text,tool_use" {
		t.Errorf("assistant blocks = %v", types)
	}
	if th := asst[0].(map[string]any); th["signature"] != "sig-abc" || th["thinking"] != "Let me list files." {
		t.Errorf("thinking block sent back = %v", th)
	}
	if in := asst[2].(map[string]any)["input"].(map[string]any); in["command"] != "ls" {
		t.Errorf("tool_use input = %v", in)
	}
	if asst[2].(map[string]any)["cache_control"] == nil {
		t.Errorf("the assistant message (second to last) has no cache breakpoint: %v", asst)
	}
	res := wire[2].(map[string]any)
	rb := res["content"].([]any)[0].(map[string]any)
	if res["role"] != "user" || rb["type"] != "tool_result" || rb["tool_use_id"] != "toolu_1" || rb["cache_control"] == nil {
		t.Errorf("tool result message = %v", res)
	}
}

func TestRetriesOverloadAndRateLimit(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	srv.Enqueue(
		anthropictest.HTTPError(529, "overloaded_error", "Overloaded"),
		anthropictest.Response{Status: 429, Error: anthropictest.APIError{Type: "rate_limit_error", Message: "slow down"}, Header: http.Header{"Retry-After": {"7"}}},
		anthropictest.Text("ok"),
	)
	var delays []int
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL(), Backoff: func(a int) time.Duration { delays = append(delays, a); return 0 }})
	acc, _, err := collect(t, c, model.Request{Model: "claude-haiku-4-5", Messages: []model.Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if acc.Text.String() != "ok" || len(srv.Requests()) != 3 || len(delays) != 2 {
		t.Errorf("text %q after %d requests and backoffs %v", acc.Text.String(), len(srv.Requests()), delays)
	}
}

func TestErrorEventBeforeContentIsRetried(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	// message_start and ping, then overloaded_error: nothing reached the caller yet.
	srv.Enqueue(anthropictest.Response{Text: []string{"never"}, FaultAt: 2, Fault: anthropictest.FaultError}, anthropictest.Text("fine"))
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL(), Backoff: noWait})
	acc, _, err := collect(t, c, model.Request{Model: "claude-haiku-4-5", Messages: []model.Message{{Role: "user", Content: "hi"}}})
	if err != nil || acc.Text.String() != "fine" || len(srv.Requests()) != 2 {
		t.Fatalf("text %q err %v requests %d", acc.Text.String(), err, len(srv.Requests()))
	}
}

func TestErrorAfterContentIsNotRetried(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	// message_start, ping, content_block_start(text), one text_delta, then the error.
	srv.Enqueue(anthropictest.Response{Text: []string{"part", "rest"}, FaultAt: 4, Fault: anthropictest.FaultError}, anthropictest.Text("second answer"))
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL(), Backoff: noWait})
	acc, _, err := collect(t, c, model.Request{Model: "claude-haiku-4-5", Messages: []model.Message{{Role: "user", Content: "hi"}}})
	var me *model.Error
	if !errors.As(err, &me) || me.Type != "overloaded_error" || me.Status != 0 || !me.Retryable {
		t.Fatalf("err = %#v, want the in-band overloaded_error", err)
	}
	if acc.Text.String() != "part" || len(srv.Requests()) != 1 || srv.Pending() != 1 {
		t.Errorf("text %q, %d requests, %d pending: a partial answer must not be retried", acc.Text.String(), len(srv.Requests()), srv.Pending())
	}
}

func TestRetryBudgetSpent(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	for range 3 {
		srv.Enqueue(anthropictest.HTTPError(529, "overloaded_error", "Overloaded"))
	}
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL(), MaxRetries: 2, Backoff: noWait})
	_, _, err := collect(t, c, model.Request{Model: "claude-haiku-4-5", Messages: []model.Message{{Role: "user", Content: "hi"}}})
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 529 || me.Attempts != 3 {
		t.Fatalf("err = %#v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "HTTP 529") || !strings.Contains(msg, "Overloaded") || !strings.Contains(msg, "gave up after 3 attempts: retry budget spent") {
		t.Errorf("message %q does not say what failed and that the budget is spent", msg)
	}
}

func TestNotRetried(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t, anthropictest.WithAPIKey("right"))
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "wrong", Backoff: noWait})
	_, _, err := collect(t, c, model.Request{Model: "claude-haiku-4-5", Messages: []model.Message{{Role: "user", Content: "hi"}}})
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 401 || me.Type != "authentication_error" || me.Retryable || me.Attempts != 0 {
		t.Fatalf("err = %#v", err)
	}
	if len(srv.Requests()) != 1 {
		t.Errorf("a 401 was sent %d times", len(srv.Requests()))
	}
}

func TestIncompleteStreams(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]anthropictest.Fault{"eof": anthropictest.FaultEOF, "disconnect": anthropictest.FaultDisconnect} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := anthropictest.New(t)
			srv.Enqueue(anthropictest.Response{Text: []string{"a", "b"}, FaultAt: 4, Fault: f})
			c := anthropic.New(anthropic.Config{BaseURL: srv.URL(), Backoff: noWait})
			acc, _, err := collect(t, c, model.Request{Model: "m", Messages: []model.Message{{Role: "user", Content: "hi"}}})
			if !errors.Is(err, anthropic.ErrIncompleteStream) {
				t.Fatalf("err = %v", err)
			}
			if acc.FinishReason != "" || len(srv.Requests()) != 1 {
				t.Errorf("finish %q after %d requests", acc.FinishReason, len(srv.Requests()))
			}
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	g := anthropictest.NewGate()
	srv.Enqueue(anthropictest.Response{Text: []string{"a", "b"}, FaultAt: 4, Gate: g})
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL(), Backoff: noWait})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer g.Release()
	var got error
	for ch, err := range c.Stream(ctx, model.Request{Model: "m", Messages: []model.Message{{Role: "user", Content: "hi"}}}) {
		if err != nil {
			got = err
			break
		}
		if ch.Text == "a" {
			<-g.Reached()
			cancel()
		}
	}
	if !errors.Is(got, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", got)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	c := anthropic.New(anthropic.Config{BaseURL: "http://127.0.0.1:1", MaxRetries: 1, Backoff: noWait})
	_, _, err := collect(t, c, model.Request{Model: "m", Messages: []model.Message{{Role: "user", Content: "hi"}}})
	if !errors.Is(err, anthropic.ErrUnreachable) || !strings.Contains(err.Error(), "2 attempts") {
		t.Fatalf("err = %v", err)
	}
	bad := anthropic.New(anthropic.Config{BaseURL: "ftp://x"})
	if _, _, err := collect(t, bad, model.Request{Model: "m"}); err == nil || !strings.Contains(err.Error(), "invalid base URL") {
		t.Fatalf("bad base URL: %v", err)
	}
}

func TestFinishReason(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter", "pause_turn": "pause_turn"} {
		if got := anthropic.FinishReason(in); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}
