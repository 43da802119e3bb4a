package openai

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hermes-go/hermes/engine/model"
)

func decodeAll(r io.Reader) ([]model.Chunk, error) {
	var out []model.Chunk
	for c, err := range DecodeStream(r) {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

func TestDecodeStreamWire(t *testing.T) {
	t.Parallel()
	usage := func(p, c, cached, reasoning int) *model.Usage {
		return &model.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c, CachedTokens: cached, ReasoningTokens: reasoning}
	}
	tests := []struct {
		name    string
		wire    string
		want    []model.Chunk
		wantErr error
	}{
		{
			name: "appendix A tool call",
			wire: `data: {"id":"chatcmpl-3ec2","object":"chat.completion.chunk","created":1795989648,"model":"fake-agent","usage":null,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_38d3","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-3ec2","usage":null,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-3ec2","usage":null,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-3ec2","usage":null,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-3ec2","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}

data: [DONE]

`,
			want: []model.Chunk{
				{ToolCalls: []model.ToolCallDelta{{ID: "call_38d3", Name: "get_weather"}}},
				{ToolCalls: []model.ToolCallDelta{{Arguments: `{"city":`}}},
				{ToolCalls: []model.ToolCallDelta{{Arguments: `"Paris"}`}}},
				{FinishReason: "tool_calls"},
				{Usage: usage(12, 7, 0, 0)},
			},
		},
		{
			name: "CRLF, comments, id and retry lines, no space after colon, event: message",
			wire: ": keep-alive\r\nretry: 1000\r\nid: 7\r\nevent: message\r\ndata:{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n",
			want: []model.Chunk{{Text: "hi"}},
		},
		{
			name: "bare CR line endings",
			wire: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\rdata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\r\rdata: [DONE]\r\r",
			want: []model.Chunk{{Text: "a"}, {Text: "b"}},
		},
		{
			name: "multi-line data joined with newline",
			wire: "data: {\"choices\":\ndata: [{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n",
			want: []model.Chunk{{Text: "x"}},
		},
		{
			name: "named non-message events are skipped",
			wire: "event: ping\ndata: {}\n\nevent: ping\ndata: not json\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n",
			want: []model.Chunk{{Text: "x"}},
		},
		{
			name: "reasoning fields, first one present wins",
			wire: `data: {"choices":[{"delta":{"reasoning_content":"rc","reasoning":"rc"}}]}

data: {"choices":[{"delta":{"reasoning":"r"}}]}

data: {"choices":[{"delta":{"thinking":"t"}}]}

data: {"choices":[{"delta":{"reasoning":{"summary":"structured"},"content":"c"}}]}

data: [DONE]

`,
			want: []model.Chunk{{Reasoning: "rc"}, {Reasoning: "r"}, {Reasoning: "t"}, {Text: "c"}},
		},
		{
			name: "no index, no id on first delta, arguments as object",
			wire: `data: {"choices":[{"delta":{"tool_calls":[{"type":"function","function":{"name":"f","arguments":""}}]}}]}

data: {"choices":[{"delta":{"tool_calls":[{"id":"call_2","function":{"name":"g","arguments":{"a":1}}}]}}]}

data: [DONE]

`,
			want: []model.Chunk{
				{ToolCalls: []model.ToolCallDelta{{Name: "f"}}},
				{ToolCalls: []model.ToolCallDelta{{ID: "call_2", Name: "g", Arguments: `{"a":1}`}}},
			},
		},
		{
			name: "usage details, DeepSeek cache hits, usage on a content chunk",
			wire: `data: {"choices":[{"delta":{"content":"x"},"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":3}}}

data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_cache_hit_tokens":8}}

data: [DONE]

`,
			want: []model.Chunk{
				{Text: "x", FinishReason: "length", Usage: usage(10, 5, 4, 3)},
				{Usage: usage(10, 5, 8, 0)},
			},
		},
		{
			name: "other choices ignored, error:null is not an error, empty chunks dropped",
			wire: `data: {"error":null,"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}

data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}

data: {}

data:

data: [DONE]
`,
			want: []model.Chunk{{Text: "mine"}},
		},
		{
			name: "unterminated [DONE] at EOF",
			wire: "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]",
			want: []model.Chunk{{Text: "x"}},
		},
		{
			name: "nothing read after [DONE]",
			wire: "data: [DONE]\n\ndata: {broken\n\n",
		},
		{
			name:    "EOF before [DONE]",
			wire:    "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
			want:    []model.Chunk{{Text: "x"}},
			wantErr: ErrIncompleteStream,
		},
		{
			name:    "complete chunk without blank line at EOF is not delivered",
			wire:    "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n",
			wantErr: ErrIncompleteStream,
		},
		{
			name:    "empty body",
			wire:    "",
			wantErr: ErrIncompleteStream,
		},
		{
			name:    "malformed chunk",
			wire:    "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"choices\":[\n\ndata: [DONE]\n\n",
			want:    []model.Chunk{{Text: "x"}},
			wantErr: ErrMalformedStream,
		},
		{
			name:    "content of the wrong type",
			wire:    "data: {\"choices\":[{\"delta\":{\"content\":[{\"type\":\"text\"}]}}]}\n\n",
			wantErr: ErrMalformedStream,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, split := range []struct {
				name string
				r    func(string) io.Reader
			}{
				{"whole", func(s string) io.Reader { return strings.NewReader(s) }},
				{"bytewise", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }},
			} {
				got, err := decodeAll(split.r(tt.wire))
				if !errors.Is(err, tt.wantErr) || (err != nil && tt.wantErr == nil) {
					t.Fatalf("%s: err = %v, want %v", split.name, err, tt.wantErr)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("%s: chunks:\n got %+v\nwant %+v", split.name, got, tt.want)
				}
			}
		})
	}
}

func TestDecodeStreamInBandError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		wire string
		want model.Error
	}{
		{
			`data: {"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`,
			model.Error{Message: "overloaded", Type: "server_error"},
		},
		{
			`data: {"error":{"message":"quota","code":429,"metadata":{"raw":"x"}}}`,
			model.Error{Message: "quota", Code: "429"},
		},
		{`data: {"error":"model not loaded"}`, model.Error{Message: "model not loaded"}},
		{`data: {"error":{}}`, model.Error{Message: "unspecified error"}},
	}
	for _, tt := range tests {
		got, err := decodeAll(strings.NewReader(tt.wire + "\n\ndata: [DONE]\n\n"))
		var me *model.Error
		if !errors.As(err, &me) || *me != tt.want || len(got) != 0 {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", tt.wire, got, err, tt.want)
		}
	}
}

func TestDecodeStreamMalformedQuotesData(t *testing.T) {
	t.Parallel()
	bad := `{"choices":[{"delta":{"content":"` + strings.Repeat("x", 2000)
	_, err := decodeAll(strings.NewReader("data: " + bad + "\n\n"))
	if !errors.Is(err, ErrMalformedStream) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `{\"choices\":[{\"delta\"`) || !strings.Contains(msg, "truncated") || len(msg) > 1000 {
		t.Fatalf("message should quote a truncated prefix of the data: %.300s… (%d bytes)", msg, len(msg))
	}
}

func TestDecodeStreamNotAnEventStream(t *testing.T) {
	t.Parallel()
	_, err := decodeAll(strings.NewReader(`{"id":"chatcmpl-1","object":"chat.completion","choices":[]}` + "\n"))
	if !errors.Is(err, ErrIncompleteStream) || !strings.Contains(err.Error(), "not an event stream") {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeStreamLongLines(t *testing.T) {
	t.Parallel()
	// A single 1 MiB content delta spans many buffer refills and must come through intact.
	big := strings.Repeat("abcdefgh", 1<<17)
	wire := fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\r\n\r\ndata: [DONE]\n\n", big)
	got, err := decodeAll(strings.NewReader(wire))
	if err != nil || len(got) != 1 || got[0].Text != big {
		t.Fatalf("err = %v, %d chunks", err, len(got))
	}

	// Past the limit the decoder stops with a clear error instead of buffering on.
	huge := io.MultiReader(strings.NewReader("data: "), &repeatReader{b: 'x', n: MaxEventBytes + 10})
	_, err = decodeAll(huge)
	if !errors.Is(err, ErrMalformedStream) || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("oversized line: err = %v", err)
	}

	// Many data lines adding up past the limit are refused too.
	var b bytes.Buffer
	line := "data: " + strings.Repeat("y", 1<<20) + "\n"
	for range 9 {
		b.WriteString(line)
	}
	_, err = decodeAll(&b)
	if !errors.Is(err, ErrMalformedStream) || !strings.Contains(err.Error(), "event data exceeds") {
		t.Fatalf("oversized event: err = %v", err)
	}
}

type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n)
	for i := range n {
		p[i] = r.b
	}
	r.n -= n
	return n, nil
}

func TestDecodeStreamReadError(t *testing.T) {
	t.Parallel()
	r := io.MultiReader(strings.NewReader("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"), iotest.ErrReader(errors.New("connection reset by peer")))
	got, err := decodeAll(r)
	if !errors.Is(err, ErrIncompleteStream) || !strings.Contains(err.Error(), "connection reset by peer") || len(got) != 1 {
		t.Fatalf("got %+v, err = %v", got, err)
	}
}

func TestDecodeStreamStopsWhenConsumerStops(t *testing.T) {
	t.Parallel()
	wire := strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n", 10)
	n := 0
	for range DecodeStream(strings.NewReader(wire)) {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("n = %d", n)
	}
}

func TestErrorFromResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		header http.Header
		body   string
		want   model.Error
	}{
		{401, nil, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			model.Error{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided."}},
		{429, nil, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`,
			model.Error{Status: 429, Type: "requests", Code: "rate_limit_exceeded", Message: "slow down", Retryable: true}},
		{404, nil, `{"error":"model 'llama9' not found"}`, model.Error{Status: 404, Message: "model 'llama9' not found"}},
		{400, nil, `{"message":"bad thing","detail":"x"}`, model.Error{Status: 400, Message: "bad thing"}},
		{502, nil, "  <html>Bad Gateway</html>\n", model.Error{Status: 502, Message: "<html>Bad Gateway</html>", Retryable: true}},
		{503, http.Header{"X-Should-Retry": {"false"}}, "", model.Error{Status: 503, Message: "Service Unavailable"}},
		{409, nil, `[1,2]`, model.Error{Status: 409, Message: "[1,2]", Retryable: true}},
		{408, nil, `{"error":null}`, model.Error{Status: 408, Message: `{"error":null}`, Retryable: true}},
	}
	for _, tt := range tests {
		got := ErrorFromResponse(tt.status, tt.header, []byte(tt.body))
		if *got != tt.want {
			t.Errorf("%d %s:\n got %+v\nwant %+v", tt.status, tt.body, *got, tt.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		h      http.Header
		want   time.Duration
		wantOK bool
	}{
		{nil, 0, false},
		{http.Header{"Retry-After-Ms": {"250"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond, true},
		{http.Header{"Retry-After": {"0"}}, 0, true},
		{http.Header{"Retry-After": {"3600"}}, maxRetryAfter, true},
		{http.Header{"Retry-After": {"1e300"}}, maxRetryAfter, true},
		{http.Header{"Retry-After": {now.Add(10 * time.Second).Format(http.TimeFormat)}}, 10 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After-Ms": {"-5"}}, 0, false},
	}
	for _, tt := range tests {
		got, ok := retryAfter(tt.h, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%v: got %v,%v want %v,%v", tt.h, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	c := New(Config{})
	for attempt := 1; attempt <= 10; attempt++ {
		base := min(500*time.Millisecond<<min(attempt-1, 5), 8*time.Second)
		d := c.delay(attempt, nil)
		if d > base || d < base*3/4 {
			t.Errorf("attempt %d: delay %v outside [%v, %v]", attempt, d, base*3/4, base)
		}
	}
	if d := c.delay(1, http.Header{"Retry-After": {"3"}}); d != 3*time.Second {
		t.Errorf("Retry-After ignored: %v", d)
	}
}

func FuzzDecodeStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}],\"usage\":{\"prompt_tokens\":1}}\r\n\r\ndata: [DONE]"))
	f.Add([]byte(": c\rdata:{\"error\":{\"message\":\"x\",\"code\":1}}\r\r"))
	f.Add([]byte("event: ping\ndata: {}\n\ndata: {\"choices\":[{\"delta\":{\"reasoning\":\"r\"},\"finish_reason\":\"stop\"}]}\n\n"))
	f.Add([]byte("data: {\"choices\":[\n\n"))
	f.Fuzz(func(t *testing.T, wire []byte) {
		whole, errWhole := decodeAll(bytes.NewReader(wire))
		// Read boundaries must not change the result: a live body arrives in arbitrary pieces.
		bytewise, errBytes := decodeAll(iotest.OneByteReader(bytes.NewReader(wire)))
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("chunks differ by read size:\n%+v\n%+v", whole, bytewise)
		}
		if (errWhole == nil) != (errBytes == nil) || (errWhole != nil && errWhole.Error() != errBytes.Error()) {
			t.Fatalf("errors differ by read size: %v / %v", errWhole, errBytes)
		}
		var me *model.Error
		if errWhole != nil && !errors.Is(errWhole, ErrIncompleteStream) && !errors.Is(errWhole, ErrMalformedStream) && !errors.As(errWhole, &me) {
			t.Fatalf("unclassified error: %v", errWhole)
		}
		for _, c := range whole {
			if isEmpty(&c) {
				t.Fatalf("empty chunk yielded")
			}
		}
	})
}

func BenchmarkDecodeStream(b *testing.B) {
	// A realistic mix: a role chunk, 200 text deltas, a tool call in 20 fragments, finish, usage.
	var w bytes.Buffer
	head := `"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1795989648,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_0123456789","usage":null`
	chunks := 0
	emit := func(choice string) {
		fmt.Fprintf(&w, "data: {%s,\"choices\":[{\"index\":0,%s,\"logprobs\":null}]}\n\n", head, choice)
		chunks++
	}
	emit(`"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null`)
	for i := range 200 {
		emit(fmt.Sprintf(`"delta":{"content":" token%d"},"finish_reason":null`, i))
	}
	emit(`"delta":{"tool_calls":[{"index":0,"id":"call_abc123","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null`)
	for range 20 {
		emit(`"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": \"src/"}}]},"finish_reason":null`)
	}
	emit(`"delta":{},"finish_reason":"tool_calls"`)
	fmt.Fprintf(&w, "data: {\"id\":\"chatcmpl-AbCdEf0123456789\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":230,\"total_tokens\":1430,\"prompt_tokens_details\":{\"cached_tokens\":1024}}}\n\ndata: [DONE]\n\n")
	chunks++
	wire := w.Bytes()
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range DecodeStream(bytes.NewReader(wire)) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != chunks-1 { // the role-only chunk carries nothing and is not yielded
			b.Fatalf("decoded %d chunks, want %d", n, chunks-1)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunks), "ns/chunk")
}
