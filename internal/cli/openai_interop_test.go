package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/interop"
	"github.com/hermes-go/hermes/internal/loadgen"
)

// The official OpenAI clients (the openai npm package and openai-go) against a real
// `hermes serve` subprocess on 127.0.0.1 whose model is the fake OpenAI server. The fake
// plays its script in the order the agent calls it, so each test enqueues answers in the
// order its client asks its questions.

const (
	interopModel = "openai:fake-agent"
	// notesText is the content of the file the tool-progress turn reads: its presence in the
	// model's next request proves the tool really ran on the server.
	notesText = "the launch code is 0000"
	// heldTurns is the concurrency cap of `hermes serve`, which leaves
	// httpapi.Options.MaxConcurrent at its default (10): that many held turns make the next
	// request a 429.
	heldTurns = 10
)

// lockedBuffer collects a subprocess's stderr while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveProc is a running `hermes serve`.
type serveProc struct {
	base  string // http://127.0.0.1:port
	model *openaitest.Server
	home  string // HERMES_HOME
	cmd   *exec.Cmd
	logs  *lockedBuffer
}

// startServe runs this test binary as `hermes serve --addr 127.0.0.1:0` over a fresh fake
// model, waits for its "listening on" line, and stops it with SIGTERM when the test ends.
func startServe(tb testing.TB, extraEnv ...string) *serveProc {
	tb.Helper()
	return startServeBin(tb, os.Args[0], extraEnv...)
}

// startServeBin is startServe with another hermes executable (bin).
func startServeBin(tb testing.TB, bin string, extraEnv ...string) *serveProc {
	tb.Helper()
	home, cwd := tb.TempDir(), tb.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte(notesText+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	p := &serveProc{model: openaitest.New(tb), home: home, logs: &lockedBuffer{}}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = cwd
	asMain := "0" // a built hermes ignores it; the test binary acts as hermes with "1"
	if bin == os.Args[0] {
		asMain = "1"
	}
	cmd.Env = append(os.Environ(), "HERMES_TEST_AS_MAIN="+asMain, "HERMES_HOME="+home, "HERMES_MODEL="+interopModel,
		"OPENAI_BASE_URL="+p.model.URL(), "OPENAI_API_KEY=k", "HERMES_API_KEY="+testAPIKey)
	cmd.Env = append(cmd.Env, extraEnv...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p.cmd = cmd
	addr := make(chan string, 1)
	drained := make(chan struct{})
	// The reader owns the pipe until EOF (the process exited); cleanup waits for it before Wait.
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			if _, after, ok := strings.Cut(line, "listening on http://"); ok && !sent {
				sent = true
				addr <- strings.Fields(after)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		close(addr)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-drained:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-drained
		}
		if err := cmd.Wait(); err != nil {
			tb.Errorf("hermes serve did not exit cleanly on SIGTERM: %v\n%s", err, p.logs.String())
		}
	})
	select {
	case a, ok := <-addr:
		if !ok {
			tb.Fatalf("hermes serve exited before listening:\n%s", p.logs.String())
		}
		p.base = "http://" + a
	case <-time.After(60 * time.Second):
		tb.Fatalf("hermes serve did not start listening:\n%s", p.logs.String())
	}
	return p
}

// modelRefusal fails a turn at the model (not retried: a 400), after the client's stream
// began, so the server reports it in-band.
var modelRefusal = openaitest.HTTPError(400, openaitest.APIError{Message: "the model refused", Type: "invalid_request_error", Code: "refused"})

// scriptInteropModel enqueues, in client order, the fake model's answers for the shared scenario the Node
// and Go clients both walk through. It returns the gate holding the turns of the 429 case.
func scriptInteropModel(srv *openaitest.Server) *openaitest.Gate {
	srv.Enqueue(
		openaitest.Text("Plain ", "answer."),    // chat, plain
		openaitest.Text("Streamed ", "answer."), // chat, streamed
		openaitest.ToolCalls(openaitest.Call{Name: "read_file", Args: []string{`{"path":`, `"notes.txt"}`}}),
		openaitest.Text("The notes say: ", notesText),         // chat, streamed, after the tool
		openaitest.Text("Response ", "one."),                  // responses, plain
		openaitest.Text("Streamed ", "response."),             // responses, streamed
		openaitest.Text("Hello Ada."),                         // chain, turn 1
		openaitest.Text("Noted: tea."),                        // chain, turn 2
		openaitest.Text("Your name is Ada and you like tea."), // chain, turn 3
	)
	g := openaitest.NewGate()
	for range heldTurns {
		// Held after the role chunk until the client has seen its 429.
		srv.Enqueue(openaitest.Response{Text: []string{"released"}, FaultAt: 1, Gate: g})
	}
	return g
}

// chatMessages decodes the messages of a request the fake model received.
func chatMessages(t *testing.T, r openaitest.Request) []struct{ Role, Content string } {
	t.Helper()
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("model request: %v\n%s", err, r.Body)
	}
	var out []struct{ Role, Content string }
	for _, m := range body.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			s = string(m.Content) // parts or null: keep the raw JSON for substring checks
		}
		out = append(out, struct{ Role, Content string }{m.Role, s})
	}
	return out
}

// checkModelSaw asserts what the agent sent the model: the tool result reached it, and the
// third turn of the previous_response_id chain carried both earlier turns.
func checkModelSaw(t *testing.T, srv *openaitest.Server) {
	t.Helper()
	reqs := srv.Requests()
	var sawTool, sawChain bool
	for _, r := range reqs {
		msgs := chatMessages(t, r)
		if len(msgs) == 0 {
			continue
		}
		var all strings.Builder
		for _, m := range msgs {
			all.WriteString(m.Role + ": " + m.Content + "\n")
		}
		last := msgs[len(msgs)-1]
		if last.Role == "user" && strings.Contains(last.Content, "Node: plain question") && !strings.Contains(all.String(), "Answer briefly.") {
			t.Errorf("the client's system message (sent as content parts) did not reach the model:\n%s", all.String())
		}
		if last.Role == "tool" && strings.Contains(last.Content, notesText) {
			sawTool = true
		}
		if last.Role == "user" && last.Content == "What is my name, and what do I like?" {
			sawChain = true
			for _, want := range []string{"user: My name is Ada.", "assistant: Hello Ada.", "user: I like tea.", "assistant: Noted: tea."} {
				if !strings.Contains(all.String(), want) {
					t.Errorf("the third turn of the chain did not carry %q; the model saw:\n%s", want, all.String())
				}
			}
		}
	}
	if !sawTool {
		t.Errorf("no model request carried the read_file result %q (%d requests)", notesText, len(reqs))
	}
	if !sawChain {
		t.Errorf("the model never received the third turn of the chain (%d requests)", len(reqs))
	}
	if n := srv.Pending(); n != 0 {
		t.Errorf("%d scripted model answers were never asked for", n)
	}
}

// TestOpenAINodeClient runs interop/node/openai_client.mjs (the openai npm package) against
// the real server. The script prints "HOLDING" once it has seen the 429 while every slot is
// taken by a held stream; the test then releases the held model answers.
func TestOpenAINodeClient(t *testing.T) {
	n := interop.RequireNode(t)
	n.Package(t, "openai")
	p := startServe(t)
	gate := scriptInteropModel(p.model)
	defer gate.Release()
	p.model.Enqueue(openaitest.Text("Helper ", "answer."),
		// the .stream() helper over a turn with tool progress events
		openaitest.ToolCalls(openaitest.Call{Name: "read_file", Args: []string{`{"path":"notes.txt"}`}}),
		openaitest.Text("Helper read: ", notesText),
		openaitest.Text("Helper ", "response."), openaitest.Text("Not stored."), modelRefusal)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Bin, "openai_client.mjs")
	cmd.Dir = n.Dir
	cmd.Env = append(os.Environ(), "HERMES_URL="+p.base+"/v1", "HERMES_API_KEY="+testAPIKey,
		"HERMES_MODEL="+interopModel, "HERMES_HELD_TURNS="+strconv.Itoa(heldTurns), "HERMES_NOTES="+notesText)
	var out lockedBuffer
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.Write([]byte(line + "\n"))
		if line == "HOLDING" {
			gate.Release()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node openai_client.mjs: %v\n--- client output\n%s--- server log\n%s", err, out.String(), p.logs.String())
	}
	t.Logf("client output:\n%s", out.String())
	if !strings.Contains(out.String(), "ALL OK") {
		t.Fatalf("the script did not finish:\n%s", out.String())
	}
	checkModelSaw(t, p.model)
}

// TestOpenAIGoClient walks the same scenario with github.com/openai/openai-go/v3.
func TestOpenAIGoClient(t *testing.T) {
	p := startServe(t)
	gate := scriptInteropModel(p.model)
	defer gate.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithAPIKey(testAPIKey))

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) < 2 || page.Data[0].ID != "hermes-agent" || page.Data[1].ID != interopModel || page.Data[1].Object != "model" || page.Data[1].OwnedBy != "openai" {
			t.Fatalf("models: %+v", page.Data)
		}
		m, err := client.Models.Get(ctx, interopModel)
		if err != nil || m.ID != interopModel {
			t.Fatalf("retrieve: %v %+v", err, m)
		}
	})

	t.Run("chat", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    interopModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go: plain question")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content != "Plain answer." || c.Choices[0].FinishReason != "stop" || c.Object != "chat.completion" {
			t.Fatalf("completion: %s", c.RawJSON())
		}
	})

	t.Run("chat-stream", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         interopModel,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go: streamed question")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			chunks++
			if !acc.AddChunk(stream.Current()) {
				t.Errorf("accumulator refused chunk %d: %s", chunks, stream.Current().RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Streamed answer." || acc.Choices[0].FinishReason != "stop" || acc.Choices[0].Message.Role != "assistant" {
			t.Fatalf("accumulated: %+v", acc.ChatCompletion)
		}
		if acc.Usage.TotalTokens == 0 {
			t.Errorf("include_usage: no usage chunk")
		}
	})

	t.Run("chat-stream-tool-progress", func(t *testing.T) {
		// Tool progress is asked for: without the header the stream is chunks only.
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:    interopModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go: what do my notes say?")},
		}, option.WithHeader("X-Hermes-Tool-Progress", "true"))
		var acc openai.ChatCompletionAccumulator
		var text strings.Builder
		progress := 0
		for stream.Next() {
			ch := stream.Current()
			if ch.ID == "" && len(ch.Choices) == 0 {
				// The named hermes.tool.progress event: the SDK hands it over as a chunk
				// without id or choices. It must not disturb the accumulated answer.
				if !strings.Contains(ch.RawJSON(), `"tool":"read_file"`) {
					t.Errorf("unexpected chunk without choices: %s", ch.RawJSON())
				}
				progress++
			}
			acc.AddChunk(ch)
			for _, c := range ch.Choices {
				text.WriteString(c.Delta.Content)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		want := "The notes say: " + notesText
		if text.String() != want || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].FinishReason != "stop" {
			t.Fatalf("streamed %q, accumulated %+v", text.String(), acc.ChatCompletion)
		}
		if progress != 2 {
			t.Errorf("want 2 tool progress events (running, completed), got %d", progress)
		}
	})

	var first string
	t.Run("responses", func(t *testing.T) {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: interopModel,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Go: a response please")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.OutputText() != "Response one." || r.Status != "completed" || !strings.HasPrefix(r.ID, "resp_") {
			t.Fatalf("response: %s", r.RawJSON())
		}
		got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		if err != nil || got.OutputText() != "Response one." {
			t.Fatalf("retrieve: %v", err)
		}
		first = r.ID
	})

	t.Run("responses-stream", func(t *testing.T) {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: interopModel,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Go: stream a response")},
		})
		var types []string
		var text strings.Builder
		seq := int64(-1)
		var final responses.Response
		for stream.Next() {
			ev := stream.Current()
			if ev.SequenceNumber != seq+1 {
				t.Errorf("sequence_number %d after %d (%s)", ev.SequenceNumber, seq, ev.Type)
			}
			seq = ev.SequenceNumber
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed":
				final = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(types) == 0 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
			t.Fatalf("events: %v", types)
		}
		if text.String() != "Streamed response." || final.OutputText() != "Streamed response." || final.Status != "completed" {
			t.Fatalf("deltas %q, final %s", text.String(), final.RawJSON())
		}
	})

	t.Run("responses-chain", func(t *testing.T) {
		prev := ""
		var last *responses.Response
		for _, turn := range []string{"My name is Ada.", "I like tea.", "What is my name, and what do I like?"} {
			params := responses.ResponseNewParams{Model: interopModel, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(turn)}}
			if prev != "" {
				params.PreviousResponseID = openai.String(prev)
			}
			r, err := client.Responses.New(ctx, params)
			if err != nil {
				t.Fatalf("%q: %v", turn, err)
			}
			if prev != "" && r.PreviousResponseID != prev {
				t.Errorf("previous_response_id %q, want %q", r.PreviousResponseID, prev)
			}
			prev, last = r.ID, r
		}
		if last.OutputText() != "Your name is Ada and you like tea." {
			t.Fatalf("third answer: %s", last.RawJSON())
		}
	})

	t.Run("errors", func(t *testing.T) {
		wantErr := func(t *testing.T, err error, status int, code string) {
			t.Helper()
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Errorf("want *openai.Error %d %s, got %T %v", status, code, err, err)
				return
			}
			if apiErr.StatusCode != status || apiErr.Code != code || apiErr.Type == "" || apiErr.Message == "" {
				t.Errorf("want %d %s, got %d code=%q type=%q message=%q", status, code, apiErr.StatusCode, apiErr.Code, apiErr.Type, apiErr.Message)
			}
		}
		// 400: a body the server cannot use (no messages).
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: interopModel, Messages: []openai.ChatCompletionMessageParamUnion{}})
		wantErr(t, err, 400, "missing_messages")
		_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: interopModel, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}, PreviousResponseID: openai.String("resp_nope")})
		wantErr(t, err, 400, "previous_response_not_found")
		// 401.
		bad := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithAPIKey("wrong-key-0123456789"))
		_, err = bad.Models.List(ctx)
		wantErr(t, err, 401, "invalid_api_key")
		// 404: unknown response, unknown model.
		_, err = client.Responses.Get(ctx, "resp_unknown", responses.ResponseGetParams{})
		wantErr(t, err, 404, "response_not_found")
		_, err = client.Models.Get(ctx, "no-such-model")
		wantErr(t, err, 404, "model_not_found")
		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "no-such-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		wantErr(t, err, 404, "model_not_found")
		// Delete, then the id is gone.
		if first != "" {
			if err := client.Responses.Delete(ctx, first); err != nil {
				t.Fatalf("delete: %v", err)
			}
			_, err = client.Responses.Get(ctx, first, responses.ResponseGetParams{})
			wantErr(t, err, 404, "response_not_found")
		}

		// 429: every slot of the concurrency cap is held by a streaming turn whose model
		// answer waits at the gate; one more turn is refused.
		var streams []*heldStream
		for i := range heldTurns {
			streams = append(streams, holdStream(ctx, client, "Go: held turn "+strconv.Itoa(i)))
		}
		for _, s := range streams {
			<-s.started
		}
		var raw *http.Response
		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: interopModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go: one too many")},
		}, option.WithMaxRetries(0), option.WithResponseInto(&raw))
		wantErr(t, err, 429, "rate_limit_exceeded")
		if raw == nil || raw.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
		gate.Release()
		for i, s := range streams {
			if got := <-s.done; got != "released" {
				t.Errorf("held turn %d: %q", i, got)
			}
		}
	})
	t.Run("chat-stream-in-band-error", func(t *testing.T) {
		p.model.Enqueue(modelRefusal)
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:    interopModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go: this turn fails")},
		})
		chunks := 0
		for stream.Next() {
			chunks++
		}
		var se *ssestream.StreamError
		if !errors.As(stream.Err(), &se) || !strings.Contains(se.Message, "the model refused") || !strings.Contains(se.Message, "agent_error") {
			t.Fatalf("want a StreamError carrying the model failure after %d chunks, got %T %v", chunks, stream.Err(), stream.Err())
		}
		if chunks == 0 {
			t.Errorf("the error came before any chunk: it should follow the role chunk")
		}
	})
	checkModelSaw(t, p.model)
}

// TestOpenAIGoClientGeneratedKey starts `hermes serve` with no key configured: it creates one
// (0600, under HERMES_HOME) on first start without printing it, and the official client
// authenticates with it and only with it.
func TestOpenAIGoClientGeneratedKey(t *testing.T) {
	p := startServe(t, "HERMES_API_KEY=", "API_SERVER_KEY=")
	path := filepath.Join(p.home, "api_key")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no generated key: %v\n%s", err, p.logs.String())
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("api_key mode %v, want 0600", fi.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))
	if len(key) < 16 || !strings.Contains(p.logs.String(), "created an API key") || strings.Contains(p.logs.String(), key) {
		t.Fatalf("key %d chars; the log must say a key was created without printing it:\n%s", len(key), p.logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	good := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithAPIKey(key))
	page, err := good.Models.List(ctx)
	if err != nil || len(page.Data) == 0 {
		t.Fatalf("with the generated key: %v", err)
	}
	other := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithAPIKey(testAPIKey))
	_, err = other.Models.List(ctx)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("another key: want 401, got %v", err)
	}
}

// heldStream is a streaming completion read to its end by its own goroutine.
type heldStream struct {
	started chan struct{} // the first chunk arrived: the turn holds a slot
	done    chan string   // the streamed text, or "error: …"
}

func holdStream(ctx context.Context, client openai.Client, prompt string) *heldStream {
	h := &heldStream{started: make(chan struct{}), done: make(chan string, 1)}
	go func() {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: interopModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		})
		var text strings.Builder
		started := false
		for stream.Next() {
			if !started {
				started = true
				close(h.started)
			}
			for _, c := range stream.Current().Choices {
				text.WriteString(c.Delta.Content)
			}
		}
		if !started {
			close(h.started)
		}
		if err := stream.Err(); err != nil {
			h.done <- "error: " + err.Error()
			return
		}
		h.done <- text.String()
	}()
	return h
}

// buildHermes compiles the hermes command into dir: memory figures must be those of the
// shipped program, not of a test binary that also links the test dependencies.
func buildHermes(dir string) (string, error) {
	bin := filepath.Join(dir, "hermes")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = repoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// BenchmarkServeRSS measures the memory of a real `hermes serve` (the built binary, over the
// fake model) from /proc/PID/status: at idle right after it listens, after a warm-up turn,
// under 1,000 concurrent SSE clients, and after 500 more one-turn conversations.
//
// The load: every turn slot of the server's concurrency cap is taken, by heldTurns-1 streamed
// chat completions and one run, all held at the model; then 1,000 clients follow the run's
// event stream (GET /v1/runs/{id}/events) at once. The cap of `hermes serve` is the
// httpapi default (10), so 1,000 simultaneous chat turns cannot be held on this process; the
// in-process BenchmarkChatStreams1000 (transports/httpapi) lifts the cap for that. Errors
// (any stream not ending with its terminal event) are counted and must be 0. Run with
// -benchtime=1x. HERMES_BENCH_SERVE_ENV adds space-separated KEY=VALUE pairs to the server's
// environment, e.g. "GOMEMLIMIT=48MiB" to compare runtime settings.
func BenchmarkServeRSS(b *testing.B) {
	bin, err := buildHermes(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	const followers = 1000
	for range b.N {
		p := startServeBin(b, bin, strings.Fields(os.Getenv("HERMES_BENCH_SERVE_ENV"))...)
		idle, err := loadgen.ReadMem(p.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		lt := &loadgen.Target{BaseURL: p.base + "/v1", APIKey: testAPIKey, Client: loadgen.NewClient(followers + heldTurns)}
		p.model.Enqueue(openaitest.Text("warm"))
		if _, err := lt.Post(ctx, "/chat/completions", []byte(`{"model":"`+interopModel+`","messages":[{"role":"user","content":"warm up"}]}`)); err != nil {
			b.Fatal(err)
		}
		warm, _ := loadgen.ReadMem(p.cmd.Process.Pid)

		gate := openaitest.NewGate()
		for range heldTurns {
			p.model.Enqueue(openaitest.Response{Text: []string{"held ", "then released"}, FaultAt: 2, Gate: gate})
		}
		chats := loadgen.Hold(heldTurns-1, func(i int) (*loadgen.Stream, error) {
			return lt.OpenStream(ctx, "/chat/completions", []byte(`{"model":"`+interopModel+`","stream":true,"messages":[{"role":"user","content":"held chat `+strconv.Itoa(i)+`"}]}`))
		})
		runID, err := startRun(ctx, lt, "held run")
		if err != nil {
			gate.Release()
			b.Fatal(err)
		}
		<-gate.Reached()
		followersHeld := loadgen.Hold(followers, func(int) (*loadgen.Stream, error) {
			return lt.OpenEvents(ctx, "/runs/"+runID+"/events")
		})
		loaded, err := loadgen.ReadMem(p.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		gate.Release()
		chatSum, runSum := chats.Drain(), followersHeld.Drain()
		lt.Client.CloseIdleConnections()
		drained, _ := loadgen.ReadMem(p.cmd.Process.Pid)
		// Churn: many short conversations. Each is a new session written to the store (filling
		// the memtable, whose arena is allocated at open but resident only once written) and
		// stays live in the engine afterwards.
		const churn = 500
		for i := range churn {
			p.model.Enqueue(openaitest.Text("short answer"))
			if _, err := lt.Post(ctx, "/chat/completions", []byte(`{"model":"`+interopModel+`","messages":[{"role":"user","content":"churn `+strconv.Itoa(i)+`"}]}`)); err != nil {
				b.Fatal(err)
			}
		}
		after, _ := loadgen.ReadMem(p.cmd.Process.Pid)
		cancel()
		lt.Client.CloseIdleConnections()
		errs := chatSum.Errors + runSum.Errors
		if errs > 0 {
			b.Errorf("%d streams failed; chat: %v; run followers: %v", errs, chatSum.Err, runSum.Err)
		}
		b.ReportMetric(float64(idle.RSS)/(1<<20), "idle-RSS-MB")
		b.ReportMetric(float64(idle.Anon)/(1<<20), "idle-anon-MB")
		b.ReportMetric(float64(idle.File)/(1<<20), "idle-file-MB")
		b.ReportMetric(float64(warm.RSS)/(1<<20), "warm-RSS-MB")
		b.ReportMetric(float64(loaded.RSS)/(1<<20), "load-RSS-MB")
		b.ReportMetric(float64(drained.RSS)/(1<<20), "drained-RSS-MB")
		b.ReportMetric(float64(after.RSS)/(1<<20), "churn-RSS-MB")
		b.ReportMetric(float64(after.HWM)/(1<<20), "peak-HWM-MB")
		b.ReportMetric(float64(len(followersHeld.Streams)+len(chats.Streams)), "streams-held")
		b.ReportMetric(float64(errs), "errors")
	}
}

// startRun posts a run and returns its id.
func startRun(ctx context.Context, lt *loadgen.Target, input string) (string, error) {
	body, _ := json.Marshal(map[string]any{"input": input})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lt.BaseURL+"/runs", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+lt.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := lt.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var out struct {
		RunID string `json:"run_id"`
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &out) != nil || out.RunID == "" {
		return "", fmt.Errorf("POST /v1/runs: %d %s", res.StatusCode, raw)
	}
	return out.RunID, nil
}
