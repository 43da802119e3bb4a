package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/acp"
)

// raw drives the adapter with hand-written frames, as a buggy or hostile client would.
type raw struct {
	t   *testing.T
	w   *io.PipeWriter
	r   *bufio.Reader
	out chan map[string]json.RawMessage
}

func rawConnect(t *testing.T) (*raw, *openaitest.Server, string) {
	t.Helper()
	return rawConnectWith(t, acp.Options{Logger: quiet, MaxMessageBytes: 1 << 20})
}

func rawConnectWith(t *testing.T, o acp.Options) (*raw, *openaitest.Server, string) {
	t.Helper()
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	rw := rawPipe(t, func(in io.Reader, out io.Writer) error {
		return acp.Serve(context.Background(), eng, in, out, o)
	})
	return rw, srv, cwd
}

// rawPipe runs serve over pipes and connects a raw client to it.
func rawPipe(t *testing.T, serve func(in io.Reader, out io.Writer) error) *raw {
	t.Helper()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := serve(c2aR, a2cW)
		a2cW.Close()
		done <- err
	}()
	rw := &raw{t: t, w: c2aW, r: bufio.NewReaderSize(a2cR, 1<<16), out: make(chan map[string]json.RawMessage, 64)}
	go func() {
		defer close(rw.out)
		for {
			line, err := rw.r.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				t.Errorf("agent wrote a non-JSON line %q", line)
				return
			}
			rw.out <- m
		}
	}()
	t.Cleanup(func() {
		c2aW.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		for range rw.out {
		}
	})
	return rw
}

func (rw *raw) send(s string) {
	rw.t.Helper()
	if _, err := io.WriteString(rw.w, s+"\n"); err != nil {
		rw.t.Fatal(err)
	}
}

// response waits for the response with the given id (null for id-less errors), skipping
// notifications. A minute without it fails the test.
func (rw *raw) response(id string) map[string]json.RawMessage {
	rw.t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		select {
		case m, ok := <-rw.out:
			if !ok {
				rw.t.Fatalf("connection closed waiting for id %s", id)
			}
			if _, isReq := m["method"]; isReq {
				continue
			}
			if string(m["id"]) == id {
				return m
			}
			rw.t.Fatalf("unexpected response %v while waiting for id %s", m, id)
		case <-timeout.C:
			rw.t.Fatalf("no response with id %s", id)
		}
	}
}

func errCode(rw *raw, m map[string]json.RawMessage) int {
	rw.t.Helper()
	var e struct{ Code int }
	if err := json.Unmarshal(m["error"], &e); err != nil || e.Code == 0 {
		rw.t.Fatalf("want an error, got %v", m)
	}
	return e.Code
}

func TestBadInputGetsJSONRPCErrorsAndAgentSurvives(t *testing.T) {
	rw, srv, cwd := rawConnect(t)
	rw.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if _, ok := rw.response("1")["result"]; !ok {
		t.Fatal("initialize failed")
	}
	rw.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":` + strconvQuote(cwd) + `,"mcpServers":[]}}`)
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(rw.response("2")["result"], &created); err != nil || created.SessionID == "" {
		t.Fatal("session/new failed")
	}
	sid := strconvQuote(created.SessionID)
	cases := []struct {
		name, frame, id string
		code            int
		msg             string // in the error's message, which is what a client shows
	}{
		{"malformed", `{"jsonrpc":"2.0","id":3,"method":`, "null", -32700, ""},
		{"not an object", `[1,2,3]`, "null", -32600, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"session/teleport","params":{}}`, "4", -32601, ""},
		{"wrong param types", `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":42,"prompt":"hi"}}`, "5", -32602, ""},
		{"missing cwd", `{"jsonrpc":"2.0","id":6,"method":"session/new","params":{"mcpServers":[]}}`, "6", -32602, ""},
		{"relative cwd", `{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"rel","mcpServers":[]}}`, "7", -32602, "Invalid params: cwd must be an absolute path"},
		{"unknown session", `{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}`, "8", -32602, `Invalid params: unknown session "nope"`},
		{"missing folder", `{"jsonrpc":"2.0","id":17,"method":"session/new","params":{"cwd":` + strconvQuote(filepath.Join(cwd, "no-such-dir")) + `,"mcpServers":[]}}`, "17", -32602, "is not a directory"},
		{"empty prompt", `{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":` + sid + `,"prompt":[]}}`, "9", -32602, ""},
		{"audio prompt", `{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":` + sid + `,"prompt":[{"type":"audio","data":"AAAA","mimeType":"audio/wav"}]}}`, "10", -32602, ""},
		{"bad image", `{"jsonrpc":"2.0","id":11,"method":"session/prompt","params":{"sessionId":` + sid + `,"prompt":[{"type":"image","data":"%%%","mimeType":"image/png"}]}}`, "11", -32602, ""},
	}
	for _, tc := range cases {
		rw.send(tc.frame)
		m := rw.response(tc.id)
		if code := errCode(rw, m); code != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.code)
		}
		var e struct{ Message string }
		if err := json.Unmarshal(m["error"], &e); err != nil || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: error %s does not say %q", tc.name, m["error"], tc.msg)
		}
	}
	// A frame over the limit (a 20 MB prompt against a 1 MiB limit here) is refused by id
	// without being buffered whole.
	big := strings.Repeat("x", 20<<20)
	rw.send(`{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"sessionId":` + sid + `,"prompt":[{"type":"text","text":"` + big + `"}]}}`)
	if code := errCode(rw, rw.response("12")); code != -32600 {
		t.Errorf("oversized: code %d", code)
	}
	// A prompt for a closed session.
	rw.send(`{"jsonrpc":"2.0","id":13,"method":"session/close","params":{"sessionId":` + sid + `}}`)
	rw.response("13")
	rw.send(`{"jsonrpc":"2.0","id":14,"method":"session/prompt","params":{"sessionId":` + sid + `,"prompt":[{"type":"text","text":"hi"}]}}`)
	if code := errCode(rw, rw.response("14")); code != -32602 {
		t.Errorf("closed session: code %d", code)
	}
	// Still alive: a fresh session (from a client that omits mcpServers) answers a prompt.
	rw.send(`{"jsonrpc":"2.0","id":15,"method":"session/new","params":{"cwd":` + strconvQuote(cwd) + `}}`)
	if err := json.Unmarshal(rw.response("15")["result"], &created); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.Text("alive"))
	rw.send(`{"jsonrpc":"2.0","id":16,"method":"session/prompt","params":{"sessionId":` + strconvQuote(created.SessionID) + `,"prompt":[{"type":"text","text":"hi"}]}}`)
	var res struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(rw.response("16")["result"], &res); err != nil || res.StopReason != "end_turn" {
		t.Fatalf("after bad input: %+v %v", res, err)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestPromptBlocksReachTheModel(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{ImageDir: t.TempDir()})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	srv.Enqueue(openaitest.Text("seen"))
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	_, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{
		sdk.TextBlock("look at this"),
		sdk.ResourceLinkBlock("main.go", "file:///src/main.go"),
		sdk.ResourceBlock(sdk.EmbeddedResourceResource{TextResourceContents: &sdk.TextResourceContents{Uri: "file:///src/util.go", Text: "package util"}}),
		sdk.ImageBlock(png, "image/png"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	body := string(reqs[len(reqs)-1].Body)
	for _, want := range []string{"look at this", "file:///src/main.go", "package util", "data:image/png;base64"} {
		if !strings.Contains(body, want) {
			t.Errorf("model request lacks %q", want)
		}
	}
}

func FuzzGuard(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n"))
	f.Add([]byte("garbage\n[1]\n{\"id\":\"x\"\n"))
	f.Add([]byte(`{"id":` + strings.Repeat("9", 300) + "}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var passed, replies strings.Builder
		if err := acp.Guard(strings.NewReader(string(in)), &passed, &replies, 64); err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(passed.String(), "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("passed an invalid line %q", line)
			}
			// A passed line is rebuilt (jsonrpc supplied, the id swapped for a surrogate,
			// mcpServers supplied): it may grow by those few members, never more.
			if len(line) > 64+64 {
				t.Fatalf("passed a line over the limit: %d bytes", len(line))
			}
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(replies.String(), "\n"), "\n") {
			if line != "" && (!json.Valid([]byte(line)) || !utf8.ValidString(line)) {
				t.Fatalf("replied with invalid JSON %q", line)
			}
		}
	})
}
