package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/interop"
)

// Third-party clients as their READMEs use them, against a real `hermes serve`: a streamed
// answer, a streamed answer while the server runs a tool, a model failure after the stream
// started and before it (no stream), and the client's retry of a turn whose tool ran before
// the model failed, which must not run the tool again. The Go clients are here; the Node ones
// (openai 4.x and 7.x, the AI SDK, LangChain) run interop/node/clients.mjs.

// unknownModel starts the prompts TestOpenAIGoClientTurns sends with a model the server does
// not list.
const unknownModel = "openai-go, unknown model: "

// readNotes is the model's call of read_file on the notes the server's working directory holds.
var readNotes = openaitest.ToolCalls(openaitest.Call{Name: "read_file", Args: []string{`{"path":"notes.txt"}`}})

// attempts is an http.RoundTripper that notes every answer to a POST: its status and whether
// the server marked it a replay.
type attempts struct {
	mu   sync.Mutex
	seen []string // "409", "409 replayed"
}

func (a *attempts) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost {
		s := res.Status[:3]
		if res.Header.Get("X-Hermes-Replayed") == "true" {
			s += " replayed"
		}
		a.mu.Lock()
		a.seen = append(a.seen, s)
		a.mu.Unlock()
	}
	return res, err
}

func (a *attempts) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// toolResults counts the model requests that carried the notes read by the tool: one per run
// of the tool.
func toolResults(t *testing.T, srv *openaitest.Server) int {
	t.Helper()
	n := 0
	for _, r := range srv.Requests() {
		msgs := chatMessages(t, r)
		if len(msgs) > 0 && msgs[len(msgs)-1].Role == "tool" && strings.Contains(msgs[len(msgs)-1].Content, notesText) {
			n++
		}
	}
	return n
}

// TestGoOpenAIClient drives github.com/sashabaranov/go-openai, which parses every data line
// of a chat stream as a chunk and every other line as part of an error body.
func TestGoOpenAIClient(t *testing.T) {
	p := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := goopenai.DefaultConfig(testAPIKey)
	cfg.BaseURL = p.base + "/v1"
	client := goopenai.NewClientWithConfig(cfg)
	req := func(prompt string, stream bool) goopenai.ChatCompletionRequest {
		return goopenai.ChatCompletionRequest{Model: "hermes-agent", Stream: stream,
			Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: prompt}}}
	}
	// stream reads a stream the README's way: Choices[0] of every chunk.
	stream := func(prompt string) (string, error) {
		s, err := client.CreateChatCompletionStream(ctx, req(prompt, true))
		if err != nil {
			return "", err
		}
		defer s.Close()
		var text strings.Builder
		for {
			res, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return text.String(), nil
			}
			if err != nil {
				return text.String(), err
			}
			text.WriteString(res.Choices[0].Delta.Content)
		}
	}
	wantAPIError := func(t *testing.T, err error, status int) {
		t.Helper()
		var ae *goopenai.APIError
		if !errors.As(err, &ae) || ae.HTTPStatusCode != status || !strings.Contains(ae.Message, "the model refused") || ae.Type != "server_error" {
			t.Fatalf("want an *APIError %d carrying the model failure, got %T %v", status, err, err)
		}
	}

	t.Run("stream", func(t *testing.T) {
		p.model.Enqueue(openaitest.Text("Hello ", "from go-openai."))
		if text, err := stream("go-openai: say hello"); err != nil || text != "Hello from go-openai." {
			t.Fatalf("%q %v", text, err)
		}
	})
	t.Run("stream-while-a-tool-runs", func(t *testing.T) {
		p.model.Enqueue(readNotes, openaitest.Text("Notes: ", notesText))
		if text, err := stream("go-openai: what do my notes say?"); err != nil || text != "Notes: "+notesText {
			t.Fatalf("%q %v", text, err)
		}
	})
	t.Run("failure-after-the-stream-started", func(t *testing.T) {
		p.model.Enqueue(modelRefusal)
		_, err := stream("go-openai: fail after the stream started")
		wantAPIError(t, err, 0) // in-band: no HTTP status of its own
	})
	t.Run("stream-refused-before-it-started", func(t *testing.T) {
		r := req("go-openai: unknown model", true)
		r.Model = "no-such-model"
		_, err := client.CreateChatCompletionStream(ctx, r)
		var ae *goopenai.APIError
		if !errors.As(err, &ae) || ae.HTTPStatusCode != http.StatusNotFound || ae.Code != "model_not_found" {
			t.Fatalf("want an *APIError 404 model_not_found, got %T %v", err, err)
		}
	})
	t.Run("failure-before-the-stream-and-retry", func(t *testing.T) {
		p.model.Enqueue(readNotes, modelRefusal)
		before := toolResults(t, p.model)
		r := req("go-openai: read my notes, then fail", false)
		_, err := client.CreateChatCompletion(ctx, r)
		wantAPIError(t, err, http.StatusConflict)
		// go-openai does not retry; its caller does, with the same request.
		_, err = client.CreateChatCompletion(ctx, r)
		wantAPIError(t, err, http.StatusConflict)
		if n := toolResults(t, p.model) - before; n != 1 {
			t.Fatalf("the tool ran %d times, want 1", n)
		}
	})
	if n := p.model.Pending(); n != 0 {
		t.Errorf("%d scripted model answers were never asked for", n)
	}
}

// TestOpenAIGoClientTurns drives github.com/openai/openai-go/v3 through the same scenarios
// on both APIs, at its default retry settings (2 retries of a 409 or 5xx unless the server
// says x-should-retry: false).
func TestOpenAIGoClientTurns(t *testing.T) {
	p := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := &attempts{}
	client := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithAPIKey(testAPIKey), option.WithHTTPClient(&http.Client{Transport: seen}))
	// A prompt starting with unknownModel is sent with a model the server does not list.
	modelFor := func(prompt string) string {
		if strings.HasPrefix(prompt, unknownModel) {
			return "no-such-model"
		}
		return "hermes-agent"
	}
	chat := func(prompt string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: modelFor(prompt), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	}
	resp := func(prompt string) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: modelFor(prompt), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
	}
	chatStream := func(prompt string) (string, error) {
		s := client.Chat.Completions.NewStreaming(ctx, chat(prompt))
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			if !acc.AddChunk(s.Current()) {
				t.Errorf("the accumulator refused a chunk: %s", s.Current().RawJSON())
			}
		}
		if len(acc.Choices) == 0 {
			return "", s.Err()
		}
		return acc.Choices[0].Message.Content, s.Err()
	}
	respStream := func(prompt string) (string, error) {
		s := client.Responses.NewStreaming(ctx, resp(prompt))
		var text strings.Builder
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.output_text.delta" {
				text.WriteString(ev.Delta)
			}
		}
		return text.String(), s.Err()
	}
	wantFailure := func(t *testing.T, err error, status int) {
		t.Helper()
		var ae *openai.Error
		if status == 0 {
			if err == nil || !strings.Contains(err.Error(), "the model refused") {
				t.Fatalf("want the model failure, got %v", err)
			}
			return
		}
		if !errors.As(err, &ae) || ae.StatusCode != status || ae.Code != "turn_failed" || !strings.Contains(ae.Message, "the model refused") {
			t.Fatalf("want *openai.Error %d turn_failed carrying the model failure, got %T %v", status, err, err)
		}
	}
	for _, api := range []struct {
		name   string
		stream func(string) (string, error)
		plain  func(string) error
	}{
		{"chat", chatStream, func(prompt string) error { _, err := client.Chat.Completions.New(ctx, chat(prompt)); return err }},
		{"responses", respStream, func(prompt string) error { _, err := client.Responses.New(ctx, resp(prompt)); return err }},
	} {
		t.Run(api.name+"/stream", func(t *testing.T) {
			p.model.Enqueue(openaitest.Text("Hello ", "from openai-go."))
			if text, err := api.stream("openai-go " + api.name + ": say hello"); err != nil || text != "Hello from openai-go." {
				t.Fatalf("%q %v", text, err)
			}
		})
		t.Run(api.name+"/stream-while-a-tool-runs", func(t *testing.T) {
			p.model.Enqueue(readNotes, openaitest.Text("Notes: ", notesText))
			if text, err := api.stream("openai-go " + api.name + ": what do my notes say?"); err != nil || text != "Notes: "+notesText {
				t.Fatalf("%q %v", text, err)
			}
		})
		t.Run(api.name+"/failure-after-the-stream-started", func(t *testing.T) {
			p.model.Enqueue(modelRefusal)
			_, err := api.stream("openai-go " + api.name + ": fail after the stream started")
			wantFailure(t, err, 0)
		})
		t.Run(api.name+"/stream-refused-before-it-started", func(t *testing.T) {
			from := len(seen.list())
			_, err := api.stream(unknownModel + api.name)
			var ae *openai.Error
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Code != "model_not_found" {
				t.Fatalf("want *openai.Error 404 model_not_found, got %T %v", err, err)
			}
			if got := seen.list()[from:]; len(got) != 1 {
				t.Errorf("attempts %v: a 404 is not retried", got)
			}
		})
		t.Run(api.name+"/failure-before-the-stream-and-retry", func(t *testing.T) {
			p.model.Enqueue(readNotes, modelRefusal)
			before, from := toolResults(t, p.model), len(seen.list())
			wantFailure(t, api.plain("openai-go "+api.name+": read my notes, then fail"), http.StatusConflict)
			if got := seen.list()[from:]; len(got) != 1 || got[0] != "409" {
				t.Errorf("attempts %v: want one, answered 409 (x-should-retry: false)", got)
			}
			if n := toolResults(t, p.model) - before; n != 1 {
				t.Fatalf("the tool ran %d times, want 1", n)
			}
		})
	}
	if n := p.model.Pending(); n != 0 {
		t.Errorf("%d scripted model answers were never asked for", n)
	}
}

// TestNodeClients runs interop/node/clients.mjs: openai 4.x and 7.x, the AI SDK with
// @ai-sdk/openai-compatible and @ai-sdk/openai (chat and responses), and LangChain's
// ChatOpenAI on both APIs. The script names its clients, waits until the fake model holds
// their answers, then walks its scenarios in that order.
func TestNodeClients(t *testing.T) {
	n := interop.RequireNode(t)
	for _, pkg := range []string{"openai-v4", "openai-v7", "ai", "@ai-sdk/openai-compatible", "@ai-sdk/openai", "@langchain/openai"} {
		n.Package(t, pkg)
	}
	p := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Bin, "clients.mjs")
	cmd.Dir = n.Dir
	cmd.Env = append(os.Environ(), "HERMES_URL="+p.base+"/v1", "HERMES_API_KEY="+testAPIKey, "HERMES_NOTES="+notesText)
	var out lockedBuffer
	cmd.Stderr = &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var clients []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.Write([]byte(line + "\n"))
		names, ok := strings.CutPrefix(line, "CLIENTS ")
		if !ok {
			continue
		}
		clients = strings.Split(names, "|")
		for _, c := range clients {
			p.model.Enqueue(openaitest.Text("Hello ", "from "+c+"."), readNotes, openaitest.Text("Notes: ", notesText), modelRefusal)
		}
		for range clients {
			p.model.Enqueue(readNotes, modelRefusal)
		}
		if _, err := io.WriteString(stdin, "GO\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node clients.mjs: %v\n--- client output\n%s--- server log\n%s", err, out.String(), p.logs.String())
	}
	t.Logf("client output:\n%s", out.String())
	if len(clients) == 0 || !strings.Contains(out.String(), "ALL OK") {
		t.Fatalf("the script did not finish:\n%s", out.String())
	}
	// Each client's tool turn and its failing turn ran the tool once each; retries ran nothing.
	if got, want := toolResults(t, p.model), 2*len(clients); got != want {
		t.Errorf("the tool ran %d times for %d clients, want %d", got, len(clients), want)
	}
	if n := p.model.Pending(); n != 0 {
		t.Errorf("%d scripted model answers were never asked for", n)
	}
	if got, want := len(p.model.Requests()), 6*len(clients); got != want {
		t.Errorf("the model was asked %d times, want %d", got, want)
	}
}
