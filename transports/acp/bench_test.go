package acp_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/transports/acp"
)

// instant is a zero-latency in-process provider: a prompt mentioning "shell" gets one
// terminal call first; otherwise, and after a tool result, a short streamed answer.
type instant struct{}

func (instant) Stream(_ context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "user" && strings.Contains(last.Content, "shell") {
			yield(model.Chunk{ToolCalls: []model.ToolCallDelta{{ID: "call_1", Name: "terminal", Arguments: `{"command":"true"}`}}, FinishReason: "tool_calls"}, nil)
			return
		}
		for _, w := range []string{"all ", "done ", "here"} {
			if !yield(model.Chunk{Text: w}, nil) {
				return
			}
		}
		yield(model.Chunk{FinishReason: "stop", Usage: &model.Usage{PromptTokens: 10, CompletionTokens: 3, TotalTokens: 13}}, nil)
	}
}

func benchConn(b *testing.B) (*conn, context.Context) {
	eng, cwd := newEngine(b, instant{}, "")
	c := connect(b, eng, cwd, acp.Options{Logger: quiet})
	ctx := context.Background()
	if _, err := c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		b.Fatal(err)
	}
	return c, ctx
}

// BenchmarkSessionNew measures a session/new round trip through the SDK client.
func BenchmarkSessionNew(b *testing.B) {
	c, ctx := benchConn(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: c.cwd, McpServers: []sdk.McpServer{}}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTurn measures one turn per iteration, each on a fresh session (created outside the
// timer) so the transcript does not grow with b.N; the connection, engine and store are warm.
func benchTurn(b *testing.B, text string, wantCalls int) {
	c, ctx := benchConn(b)
	newSession := func() sdk.SessionId {
		r, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: c.cwd, McpServers: []sdk.McpServer{}})
		if err != nil {
			b.Fatal(err)
		}
		return r.SessionId
	}
	c.prompt(b, ctx, newSession(), text) // warm up
	c.cl.take()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		id := newSession()
		b.StartTimer()
		if sr := c.prompt(b, ctx, id, text); sr != sdk.StopReasonEndTurn {
			b.Fatal(sr)
		}
		if tr := summarize(c.cl.take()); tr.message != "all done here" || len(tr.calls) != wantCalls {
			b.Fatal(fmt.Sprintf("message %q calls %v", tr.message, tr.calls))
		}
	}
}

// BenchmarkWarmTurnText measures a prompt answered with three streamed deltas: prompt →
// engine turn (badger writes) → updates → response.
func BenchmarkWarmTurnText(b *testing.B) { benchTurn(b, "hello", 0) }

// BenchmarkWarmTurnShellTool adds one terminal call (`true`, a real subprocess) to the turn.
func BenchmarkWarmTurnShellTool(b *testing.B) { benchTurn(b, "run a shell command", 1) }
