package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/agent"
	"github.com/hermes-go/hermes/transports/mcpserver"
)

// setup serves an engine (real badger store, fake OpenAI server on 127.0.0.1) over streamable
// HTTP on a real socket and connects an MCP client to it.
func setup(t *testing.T) (*openaitest.Server, *client.Client) {
	t.Helper()
	srv, c, _ := setupEngine(t)
	return srv, c
}

func setupEngine(t testing.TB) (*openaitest.Server, *client.Client, *engine.Engine) {
	t.Helper()
	return setupBusy(t, "")
}

// setupBusy is setupEngine with the busy-input mode ("": the engine's default).
func setupBusy(t testing.TB, mode string) (*openaitest.Server, *client.Client, *engine.Engine) {
	t.Helper()
	h := enginetest.New(t, enginetest.Options{Configure: func(c *engine.Config) {
		c.Tools = tool.NewRegistry(agent.Clarify{})
		if mode != "" {
			c.Policy.Busy = policy.Defaults{BusyMode: mode}
		}
	}})
	srv, eng := h.Server, h.Engine
	hs := httptest.NewServer(mcpserver.New(eng, mcpserver.Options{Version: "test"}).HTTPHandler())
	c, err := client.NewStreamableHttpClient(hs.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		hs.Close()
	})
	ctx := ctxT(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return srv, c, eng
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func callTool(t testing.TB, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctxT(t), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	raw := res.RawStructuredContent
	if raw == nil && res.StructuredContent != nil {
		raw, _ = json.Marshal(res.StructuredContent)
	}
	if raw != nil {
		_ = json.Unmarshal(raw, &out)
	}
	return res, out
}

func text(r *mcp.CallToolResult) string {
	if len(r.Content) == 0 {
		return ""
	}
	tc, _ := mcp.AsTextContent(r.Content[0])
	if tc == nil {
		return ""
	}
	return tc.Text
}

func TestPromptWithdrawsClarify(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "clarify", Args: []string{`{"question":"which one?"}`}}),
		openaitest.Text("I will pick one myself."),
	)
	_, created := callTool(t, c, "create_session", map[string]any{"title": "t1"})
	id, _ := created["session_id"].(string)
	if id == "" {
		t.Fatalf("create_session: %v", created)
	}
	res, out := callTool(t, c, "prompt", map[string]any{"session_id": id, "text": "do it"})
	if res.IsError || text(res) != "I will pick one myself." || out["status"] != "completed" || out["refused_requests"] != float64(1) {
		t.Fatalf("prompt: %q %v", text(res), out)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "over MCP") {
		t.Fatalf("the model did not see the withdrawal: %d requests", len(reqs))
	}
}

func TestPromptFailedTurnIsAnError(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	srv.Enqueue(openaitest.HTTPError(400, openaitest.APIError{Message: "bad model", Type: "invalid_request_error"}))
	_, created := callTool(t, c, "create_session", map[string]any{})
	res, out := callTool(t, c, "prompt", map[string]any{"session_id": created["session_id"], "text": "hi"})
	if !res.IsError || out["status"] != "failed" || !strings.HasPrefix(text(res), "[failed") {
		t.Fatalf("prompt: %q %v", text(res), out)
	}
}

func TestArgumentErrors(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"prompt", map[string]any{"text": "hi"}, "session_id"},
		{"prompt", map[string]any{"session_id": "missing", "text": "hi"}, "missing"},
		{"get_history", map[string]any{"session_id": "missing"}, "missing"},
		{"create_session", map[string]any{"model": "nosuch:model"}, "nosuch"},
		{"create_session", map[string]any{"cwd": "relative/dir"}, "not an absolute path"},
		{"create_session", map[string]any{"title": 5}, "title must be a string"},
		{"list_sessions", map[string]any{"limit": "x"}, "limit must be a non-negative integer"},
		{"list_sessions", map[string]any{"limit": 1.7}, "limit must be a non-negative integer"},
		{"list_sessions", map[string]any{"limit": -3}, "limit must be a non-negative integer"},
		{"get_history", map[string]any{"session_id": "x", "limit": true}, "limit must be a non-negative integer"},
		{"create_session", map[string]any{"cwd": "/nonexistent/dir"}, "not a directory"},
	} {
		res, _ := callTool(t, c, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Errorf("%s %v: %q (error %v)", tc.tool, tc.args, text(res), res.IsError)
		}
	}
}

// Under the queue busy mode a prompt sent while a turn runs is queued, and its call returns
// that admission at once.
func TestPromptOnABusySessionReturnsTheAdmission(t *testing.T) {
	t.Parallel()
	srv, c, _ := setupBusy(t, policy.Queue)
	id, gate, done := heldPrompt(t, srv, c)
	res, out := callTool(t, c, "prompt", map[string]any{"session_id": id, "text": "two"})
	gate.Release()
	if res.IsError || out["status"] != "queued" || out["turn_id"] != nil || !strings.HasPrefix(text(res), "[queued]") {
		t.Fatalf("busy prompt: %q %v", text(res), out)
	}
	if r := <-done; r == nil {
		t.Fatal("the first prompt call failed")
	}
}

func TestCancelledPromptInterruptsTheTurn(t *testing.T) {
	t.Parallel()
	srv, c, eng := setupEngine(t)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	blocked := openaitest.Text("never read")
	blocked.Gate = gate
	srv.Enqueue(blocked)
	_, created := callTool(t, c, "create_session", map[string]any{})
	id, _ := created["session_id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "prompt", map[string]any{"session_id": id, "text": "long job"}
		_, err := c.CallTool(ctx, req)
		done <- err
	}()
	select {
	case <-gate.Reached():
	case <-ctxT(t).Done():
		t.Fatal("the turn never reached the model")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	sess, ok := eng.Live(id)
	if !ok {
		t.Fatal("session not live")
	}
	// The model is still held at the gate: only an interrupt ends the turn.
	if err := sess.WaitIdle(ctxT(t)); err != nil {
		t.Fatalf("the turn kept running after the client cancelled: %v", err)
	}
}

// BenchmarkPromptOverHTTP measures one prompt call (a one-reply turn against the fake model)
// through the streamable HTTP transport.
func BenchmarkPromptOverHTTP(b *testing.B) {
	srv, c, _ := setupEngine(b)
	_, created := callTool(b, c, "create_session", map[string]any{})
	id := created["session_id"]
	for b.Loop() {
		srv.Enqueue(openaitest.Text("ok"))
		if res, out := callTool(b, c, "prompt", map[string]any{"session_id": id, "text": "hi"}); res.IsError || out["status"] != "completed" {
			b.Fatal(text(res))
		}
	}
}

// TestServeStdio drives ServeStdio in process over pipes with mcp-go's client: the whole tool
// set (create, prompt, list, history) and a clean return when the client closes its end.
func TestServeStdio(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, enginetest.Options{Configure: func(c *engine.Config) { c.Tools = nil }})
	srv, eng := h.Server, h.Engine
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- mcpserver.New(eng, mcpserver.Options{Version: "test"}).ServeStdio(context.Background(), toServer, fromServer)
		fromServer.Close()
	}()
	c := client.NewClient(transport.NewIO(toClient, fromClient, io.NopCloser(strings.NewReader(""))))
	ctx := ctxT(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init, err := c.Initialize(ctx, mcp.InitializeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if init.ServerInfo.Name != "hermes" || init.ServerInfo.Version != "test" {
		t.Fatalf("server info %+v", init.ServerInfo)
	}

	srv.Enqueue(openaitest.Text("stdio answer"))
	_, created := callTool(t, c, "create_session", map[string]any{"title": "piped"})
	id, _ := created["session_id"].(string)
	res, out := callTool(t, c, "prompt", map[string]any{"session_id": id, "text": "over a pipe"})
	if res.IsError || text(res) != "stdio answer" || out["status"] != "completed" || out["turn_id"] == "" {
		t.Fatalf("prompt: %q %v", text(res), out)
	}
	_, hist := callTool(t, c, "get_history", map[string]any{"session_id": id})
	rows, _ := hist["rows"].([]any)
	if len(rows) != 2 || rows[0].(map[string]any)["content"] != "over a pipe" || rows[1].(map[string]any)["role"] != "assistant" {
		t.Fatalf("history %v", hist)
	}
	_, list := callTool(t, c, "list_sessions", map[string]any{})
	sessions, _ := list["sessions"].([]any)
	if len(sessions) != 1 || sessions[0].(map[string]any)["title"] != "piped" || sessions[0].(map[string]any)["rows"] != float64(2) {
		t.Fatalf("list %v", list)
	}

	// The client closing its end ends ServeStdio without an error.
	fromClient.Close()
	if err := <-served; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	c.Close()
}

// Under the interrupt busy mode a prompt sent while a turn runs interrupts it and runs next:
// its call waits for that turn and returns its answer, and the interrupted call answers
// cancelled, as ACP's prompts do.
func TestPromptThatInterruptsWaitsForItsTurn(t *testing.T) {
	t.Parallel()
	srv, c, _ := setupBusy(t, policy.Interrupt)
	id, gate, done := heldPrompt(t, srv, c)
	res, out := callTool(t, c, "prompt", map[string]any{"session_id": id, "text": "two"})
	gate.Release()
	if res.IsError || out["status"] != "completed" || out["text"] != "second answer" || out["turn_id"] == nil || text(res) != "second answer" {
		t.Fatalf("interrupting prompt: %q %v", text(res), out)
	}
	r := <-done
	if r == nil {
		t.Fatal("the interrupted prompt call failed")
	}
	if st, _ := r.StructuredContent.(map[string]any); st["status"] != "cancelled" {
		t.Fatalf("the interrupted prompt: %v", r.StructuredContent)
	}
}

// heldPrompt creates a session and calls prompt "one" on it in the background, its model call
// held at the returned gate (reached when heldPrompt returns); the fake model answers the
// next call "second answer". done gets the call's result (nil when the call failed).
func heldPrompt(t *testing.T, srv *openaitest.Server, c *client.Client) (id any, gate *openaitest.Gate, done <-chan *mcp.CallToolResult) {
	t.Helper()
	gate = openaitest.NewGate()
	first := openaitest.Text("first answer")
	first.Gate = gate
	srv.Enqueue(first, openaitest.Text("second answer"))
	_, created := callTool(t, c, "create_session", map[string]any{})
	id = created["session_id"]
	results := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "prompt", map[string]any{"session_id": id, "text": "one"}
		res, _ := c.CallTool(context.Background(), req)
		results <- res
	}()
	select {
	case <-gate.Reached():
	case <-ctxT(t).Done():
		t.Fatal("the first turn never reached the model")
	}
	return id, gate, results
}
