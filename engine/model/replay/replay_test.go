package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/model/replay"
)

const secretKey = "sk-never-in-a-cassette"

type outcome struct {
	chunks []model.Chunk
	err    error
}

func run(seq iter.Seq2[model.Chunk, error]) outcome {
	var o outcome
	for c, err := range seq {
		if err != nil {
			o.err = err
			break
		}
		o.chunks = append(o.chunks, c)
	}
	return o
}

func ask(text string) model.Request {
	return model.Request{Model: "gpt-test", Messages: []model.Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: text},
	}}
}

// assertSameOutcome checks that a replayed call is indistinguishable from the live one.
func assertSameOutcome(t *testing.T, label string, live, replayed outcome) {
	t.Helper()
	if !reflect.DeepEqual(live.chunks, replayed.chunks) {
		t.Errorf("%s: chunks differ\n live %+v\nreplay %+v", label, live.chunks, replayed.chunks)
	}
	if (live.err == nil) != (replayed.err == nil) {
		t.Fatalf("%s: live err %v, replay err %v", label, live.err, replayed.err)
	}
	if live.err == nil {
		return
	}
	var le, re *model.Error
	if errors.As(live.err, &le) {
		if !errors.As(replayed.err, &re) || *le != *re {
			t.Errorf("%s: provider error differs\n live %#v\nreplay %#v", label, live.err, replayed.err)
		}
		return
	}
	if live.err.Error() != replayed.err.Error() {
		t.Errorf("%s: error text differs\n live %v\nreplay %v", label, live.err, replayed.err)
	}
	for _, sentinel := range []error{openai.ErrIncompleteStream, openai.ErrMalformedStream, io.ErrUnexpectedEOF} {
		if errors.Is(live.err, sentinel) != errors.Is(replayed.err, sentinel) {
			t.Errorf("%s: errors.Is(%v) differs: live %v, replay %v", label, sentinel, live.err, replayed.err)
		}
	}
}

func TestRecordThenReplayMatchesLive(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, openaitest.WithAPIKey(secretKey))
	srv.Enqueue(
		openaitest.Response{Reasoning: []string{"Think", "ing…"}, Text: []string{"Hello", ", ", "<b>wörld</b> 🌍"}},
		openaitest.Response{Style: openaitest.StyleNoIndex, Calls: []openaitest.Call{
			{Name: "get_weather", Args: []string{`{"city":`, `"Paris"}`}},
			{Name: "get_time", Args: []string{`{"tz":"CET"}`}},
		}},
		openaitest.Response{Status: 429, Header: http.Header{"Retry-After-Ms": {"20"}, "Set-Cookie": {"session=abc"}},
			Error: openaitest.APIError{Message: "Rate limit reached", Type: "requests", Code: "rate_limit_exceeded"}},
		openaitest.Text("after retry"),
		openaitest.HTTPError(400, openaitest.APIError{Message: "bad tool schema", Type: "invalid_request_error", Param: "tools"}),
		openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Fault: openaitest.FaultInBandError,
			Error: openaitest.APIError{Message: "upstream overloaded", Type: "server_error", Code: "overloaded"}},
		openaitest.Response{Text: []string{"cut ", "off"}, FaultAt: 2, Fault: openaitest.FaultDisconnect},
		openaitest.Response{Text: []string{"x"}, FaultAt: 2, Fault: openaitest.FaultMalformed},
	)
	rec := replay.NewRecorder(nil)
	client := openai.New(openai.Config{
		BaseURL: srv.URL(), APIKey: secretKey,
		HTTPClient: &http.Client{Transport: rec},
		Backoff:    func(int) time.Duration { return 0 },
	})
	prompts := []string{"greet", "weather", "rate limited", "bad", "in-band", "disconnect", "malformed"}
	var live []outcome
	for _, p := range prompts {
		live = append(live, run(client.Stream(t.Context(), ask(p))))
	}
	if live[0].err != nil || live[1].err != nil || live[2].err != nil {
		t.Fatalf("live calls that should succeed failed: %v / %v / %v", live[0].err, live[1].err, live[2].err)
	}
	for i := 3; i < len(live); i++ {
		if live[i].err == nil {
			t.Fatalf("live call %q should fail", prompts[i])
		}
	}

	path := filepath.Join(t.TempDir(), "session.json")
	if err := rec.Save(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(secretKey)) || bytes.Contains(raw, []byte("session=abc")) {
		t.Fatal("cassette leaks the API key or a cookie")
	}
	c, err := replay.Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	// One interaction per HTTP exchange, the 429 and its retry included, with the exact bodies.
	sent := srv.Requests()
	if len(c.Interactions) != len(sent) || len(sent) != len(prompts)+1 {
		t.Fatalf("interactions = %d, server requests = %d", len(c.Interactions), len(sent))
	}
	for i, it := range c.Interactions {
		if !bytes.Equal(it.Request, sent[i].Body) {
			t.Errorf("interactions[%d].request differs from the body sent:\n%s\n%s", i, it.Request, sent[i].Body)
		}
	}
	if got := c.Interactions[2].Response.Headers; got["retry-after-ms"] != "20" || got["content-type"] != "application/json" {
		t.Errorf("recorded headers = %v", got)
	}

	p := replay.New(c)
	for i, pr := range prompts {
		assertSameOutcome(t, pr, live[i], run(p.Stream(t.Context(), ask(pr))))
	}
	if p.Remaining() != 0 {
		t.Errorf("remaining = %d", p.Remaining())
	}
}

func TestRecorderKeepsUTF8PiecesReadable(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("héllo ", "wörld ", "🌍✓"))
	// One byte per read forces every multi-byte character across a read boundary.
	rec := replay.NewRecorder(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{iotest.OneByteReader(resp.Body), resp.Body}
		}
		return resp, err
	}))
	client := openai.New(openai.Config{BaseURL: srv.URL(), HTTPClient: &http.Client{Transport: rec}})
	live := run(client.Stream(t.Context(), ask("hi")))
	if live.err != nil {
		t.Fatal(live.err)
	}
	c := rec.Cassette()
	var whole []byte
	for i, p := range c.Interactions[0].Response.Body {
		if !utf8.Valid(p) {
			t.Fatalf("piece %d is not valid UTF-8: %q", i, p)
		}
		whole = append(whole, p...)
	}
	if !bytes.Contains(whole, []byte("🌍✓")) || !bytes.HasSuffix(whole, []byte("data: [DONE]\n\n")) {
		t.Fatalf("recorded body is not the wire:\n%s", whole)
	}
	assertSameOutcome(t, "utf8", live, run(replay.New(c).Stream(t.Context(), ask("hi"))))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRecordFrom(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, openaitest.WithAPIKey(secretKey))
	srv.Enqueue(openaitest.Text("one"), openaitest.Text("two"))
	c, err := replay.RecordFrom(t.Context(), srv.URL(), secretKey, []model.Request{ask("1"), ask("2")})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Interactions) != 2 || c.Version != replay.Version || c.Provider != "openai" {
		t.Fatalf("cassette = %+v", c)
	}
	p := replay.New(c)
	for _, want := range []string{"one", "two"} {
		o := run(p.Stream(t.Context(), ask("")))
		if o.err != nil || len(o.chunks) == 0 || o.chunks[0].Text != want {
			t.Fatalf("replay: %+v", o)
		}
	}

	// A failing request stops recording and says which one failed; what was recorded is kept.
	c, err = replay.RecordFrom(t.Context(), srv.URL(), "wrong-key", []model.Request{ask("1"), ask("2")})
	var me *model.Error
	if !errors.As(err, &me) || me.Code != "invalid_api_key" || !strings.Contains(err.Error(), "request 0") {
		t.Fatalf("err = %v", err)
	}
	if c == nil || len(c.Interactions) != 1 || c.Interactions[0].Response.Status != 401 {
		t.Fatalf("cassette after failure = %+v", c)
	}
}

const textBody = `"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]}\n\n", "data: [DONE]\n\n"`

func cassetteJSON(interactions ...string) []byte {
	return []byte(`{"version":1,"provider":"openai","interactions":[` + strings.Join(interactions, ",") + `]}`)
}

func textInteraction(match, text string) string {
	m := ""
	if match != "" {
		m = fmt.Sprintf(`"match":%q,`, match)
	}
	return fmt.Sprintf(`{%s"response":{"status":200,"body":[`+textBody+`]}}`, m, text)
}

func replayText(t *testing.T, p *replay.Provider, req model.Request) (string, error) {
	t.Helper()
	o := run(p.Stream(t.Context(), req))
	var a model.Accumulator
	for _, c := range o.chunks {
		a.Add(c)
	}
	return a.Text.String(), o.err
}

func TestMatchSelectsInteraction(t *testing.T) {
	t.Parallel()
	c, err := replay.Parse(cassetteJSON(
		textInteraction("Paris", "paris-1"),
		textInteraction("", "any-1"),
		textInteraction("Paris", "paris-2"),
		textInteraction("result: 42", "after-tool"),
	), "shared.json")
	if err != nil {
		t.Fatal(err)
	}
	p := replay.New(c)
	toolTurn := model.Request{Messages: []model.Message{
		{Role: "user", Content: "compute"},
		{Role: "assistant", ToolCalls: []model.ToolCall{{ID: "c1", Name: "calc"}}},
		{Role: "tool", ToolCallID: "c1", Content: "result: 42"},
		{Role: "assistant", Content: "mentions Paris but is not the last user or tool turn"},
	}}
	steps := []struct {
		req  model.Request
		want string
	}{
		{ask("weather in Paris?"), "paris-1"},
		{ask("hello"), "any-1"},
		{toolTurn, "after-tool"},
		{ask("and Paris tomorrow?"), "paris-2"},
	}
	for _, s := range steps {
		got, err := replayText(t, p, s.req)
		if err != nil || got != s.want {
			t.Fatalf("got %q, %v; want %q", got, err, s.want)
		}
	}
	_, err = replayText(t, p, ask("Paris again"))
	if !errors.Is(err, replay.ErrExhausted) || err.Error() != "cassette shared.json: no interaction left (played 4)" {
		t.Fatalf("err = %v", err)
	}
}

func TestExhaustedWithUnmatchedLeft(t *testing.T) {
	t.Parallel()
	c, err := replay.Parse(cassetteJSON(textInteraction("Berlin", "berlin")), "cities.json")
	if err != nil {
		t.Fatal(err)
	}
	p := replay.New(c)
	_, err = replayText(t, p, ask("weather in Paris?"))
	if !errors.Is(err, replay.ErrExhausted) {
		t.Fatalf("err = %v", err)
	}
	want := `cassette cities.json: no interaction left matching the last message "weather in Paris?" (played 0, 1 unused with other matches)`
	if err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	if p.Remaining() != 1 {
		t.Fatalf("remaining = %d", p.Remaining())
	}
}

func TestRetryIsOnlyFollowedForTheSameRequest(t *testing.T) {
	t.Parallel()
	c, err := replay.Parse(cassetteJSON(
		`{"request":{"model":"m","messages":[1]},"response":{"status":429,"headers":{"retry-after":"1"},"body":["{\"error\":{\"message\":\"slow\",\"code\":\"rate_limit_exceeded\"}}"]}}`,
		`{"request":{"model":"m","messages":[2]},"response":{"status":200,"body":[`+fmt.Sprintf(textBody, "second")+`]}}`,
	), "retry.json")
	if err != nil {
		t.Fatal(err)
	}
	p := replay.New(c)
	_, err = replayText(t, p, ask("x"))
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 429 || !me.Retryable || me.Code != "rate_limit_exceeded" {
		t.Fatalf("first call: %v", err)
	}
	if got, err := replayText(t, p, ask("y")); err != nil || got != "second" {
		t.Fatalf("second call: %q, %v", got, err)
	}
}

func TestRetriesStopAtTheClientLimit(t *testing.T) {
	t.Parallel()
	fail := `{"request":{"same":true},"response":{"status":500,"body":["{\"error\":{\"message\":\"boom\"}}"]}}`
	ok := `{"request":{"same":true},"response":{"status":200,"body":[` + fmt.Sprintf(textBody, "ok") + `]}}`
	// The live client gives up after 1+DefaultMaxRetries attempts, and so does the replay.
	c, err := replay.Parse(cassetteJSON(fail, fail, fail, ok), "limit.json")
	if err != nil {
		t.Fatal(err)
	}
	p := replay.New(c)
	_, err = replayText(t, p, ask("x"))
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 500 {
		t.Fatalf("err = %v", err)
	}
	if p.Remaining() != 1 {
		t.Fatalf("remaining = %d, want the success left", p.Remaining())
	}
	c, _ = replay.Parse(cassetteJSON(fail, fail, ok), "limit.json")
	if got, err := replayText(t, replay.New(c), ask("x")); err != nil || got != "ok" {
		t.Fatalf("within the limit: %q, %v", got, err)
	}
}

func TestConcurrentReplay(t *testing.T) {
	t.Parallel()
	const n = 16
	var its []string
	for i := range n {
		its = append(its, textInteraction("", fmt.Sprint(i)))
	}
	c, err := replay.Parse(cassetteJSON(its...), "many.json")
	if err != nil {
		t.Fatal(err)
	}
	p := replay.New(c)
	var wg sync.WaitGroup
	results := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { results[i], errs[i] = replayText(t, p, ask("go")) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if seen[results[i]] {
			t.Fatalf("interaction %q played twice", results[i])
		}
		seen[results[i]] = true
	}
	if len(seen) != n || p.Remaining() != 0 {
		t.Fatalf("played %d distinct, remaining %d", len(seen), p.Remaining())
	}
}

func TestReplayHonoursContext(t *testing.T) {
	t.Parallel()
	c, err := replay.Parse(cassetteJSON(textInteraction("", "a")), "ctx.json")
	if err != nil {
		t.Fatal(err)
	}
	p := replay.New(c)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	o := run(p.Stream(ctx, ask("x")))
	if !errors.Is(o.err, context.Canceled) || len(o.chunks) != 0 {
		t.Fatalf("got %+v", o)
	}
	if p.Remaining() != 1 {
		t.Fatalf("a cancelled call consumed an interaction: remaining %d", p.Remaining())
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	ok := `{"response":{"status":200,"body":["data: [DONE]\n\n"]}}`
	tests := []struct {
		name, data, want string
	}{
		{"empty", ``, "empty or truncated file"},
		{"truncated", `{"version":1,`, "empty or truncated file"},
		{"syntax", "{\"version\":1,\n\"provider\":\"openai\",\n\"interactions\":[}", "bad JSON at line 3, column 17"},
		{"wrong type", `{"version":"1"}`, `bad JSON at line 1, column 15`},
		{"unknown field", `{"version":1,"provider":"openai","interactions":[{"respnse":{}}]}`, `unknown field "respnse"`},
		{"trailing data", `{"version":1,"provider":"openai","interactions":[]} {}`, "unexpected data after the cassette object at line 1, column 53"},
		{"no version", `{"provider":"openai","interactions":[]}`, `missing "version"`},
		{"future version", `{"version":2,"provider":"openai","interactions":[]}`, "unsupported version 2 (this build reads version 1)"},
		{"no provider", `{"version":1,"interactions":[]}`, `missing "provider"`},
		{"other provider", `{"version":1,"provider":"gemini","interactions":[]}`, `unsupported provider "gemini"`},
		{"no interactions", `{"version":1,"provider":"openai"}`, `missing "interactions"`},
		{"no response", string(cassetteJSON(ok, `{"request":{}}`)), `interactions[1]: missing "response"`},
		{"bad status", string(cassetteJSON(`{"response":{"status":0,"body":[]}}`)), "interactions[0].response: status 0 is not an HTTP status"},
		{"bad piece", string(cassetteJSON(`{"response":{"status":200,"body":[42]}}`)), "a body piece must be a string"},
		{"bad base64", string(cassetteJSON(`{"response":{"status":200,"body":[{"base64":"!!"}]}}`)), "bad base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := replay.Parse([]byte(tt.data), "bad.json")
			if !errors.Is(err, replay.ErrInvalidCassette) {
				t.Fatalf("err = %v, want ErrInvalidCassette", err)
			}
			if !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to name the file and contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nope.json")
	_, err := replay.Load(path)
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, replay.ErrInvalidCassette) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
}

func TestSaveRoundTripAndAtomicity(t *testing.T) {
	t.Parallel()
	c := &replay.Cassette{Version: 1, Provider: "openai", Interactions: []replay.Interaction{{
		Match:   "hi",
		Request: []byte(`{"model":"m"}`),
		Response: &replay.Response{Status: 200, Headers: map[string]string{"content-type": "text/event-stream"},
			Body: []replay.Piece{replay.Piece("data: <think>"), replay.Piece("\xff\xfe binary"), replay.Piece("[DONE]")}},
	}}}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.json")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v): a temp file was left behind", entries, err)
	}
	raw, _ := os.ReadFile(path)
	if !bytes.Contains(raw, []byte(`"data: <think>"`)) || !bytes.Contains(raw, []byte(`{"base64":"//4gYmluYXJ5"}`)) {
		t.Fatalf("saved form:\n%s", raw)
	}
	got, err := replay.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != path {
		t.Errorf("name = %q", got.Name)
	}
	got.Name = ""
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
	}
	if err := c.Save(filepath.Join(dir, "missing", "c.json")); err == nil {
		t.Fatal("saving into a missing directory succeeded")
	}
}
