package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/telemetry/otlptest"
)

// hermes mcp serve continues params._meta.traceparent of a tools/call: the prompt's turn is a
// child of the caller's span, and the model request carries the chat span as its parent.
func TestMCPServeTraceMeta(t *testing.T) {
	recv := otlptest.New(t)
	home, work := t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	env := append(otelEnv(recv), "HERMES_HOME="+home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY=test")
	c := mcpClient(t, work, env)
	_, created := mcpCall(t, c, "create_session", map[string]any{})
	sid, _ := created["session_id"].(string)
	if sid == "" {
		t.Fatalf("create_session: %v", created)
	}
	srv.Enqueue(openaitest.Text("ok"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "prompt", map[string]any{"session_id": sid, "text": "hi"}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": callerParent, "tracestate": "vendor=x"}}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(resultText(res), "ok") {
		t.Fatalf("prompt: %s", resultText(res))
	}
	waitTurnTree(t, recv, srv)
}

// Over streamable HTTP, the request's traceparent header is the parent when the call's _meta
// carries none.
func TestMCPServeHTTPTraceHeader(t *testing.T) {
	recv := otlptest.New(t)
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("ok"))
	url, stop := startMCPHTTP(t, t.TempDir(), append(otelEnv(recv), "HERMES_HOME="+t.TempDir(), "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY=test"))
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"traceparent": callerParent}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	_, created := mcpCall(t, c, "create_session", map[string]any{})
	sid, _ := created["session_id"].(string)
	res, _ := mcpCall(t, c, "prompt", map[string]any{"session_id": sid, "text": "hi"})
	if res.IsError || resultText(res) != "ok" {
		t.Fatalf("prompt: %s", resultText(res))
	}
	c.Close()
	if err := stop(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	waitTurnTree(t, recv, srv)
}
