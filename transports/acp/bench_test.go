package acp_test

import (
	"context"
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

// chunksPerWord is how many deltas each "chunk" word of a prompt asks instant for.
const chunksPerWord = 250

func (instant) Stream(_ context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "user" && strings.Contains(last.Content, "shell") {
			yield(model.Chunk{ToolCalls: []model.ToolCallDelta{{ID: "call_1", Name: "terminal", Arguments: `{"command":"true"}`}}, FinishReason: "tool_calls"}, nil)
			return
		}
		if n := strings.Count(last.Content, "chunk"); last.Role == "user" && n > 0 {
			// "chunk ×n": n one-character deltas, to measure the cost each chunk adds.
			for range n * chunksPerWord {
				if !yield(model.Chunk{Text: "x"}, nil) {
					return
				}
			}
			yield(model.Chunk{FinishReason: "stop"}, nil)
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
			b.Fatalf("message %q calls %v", tr.message, tr.calls)
		}
	}
}

// BenchmarkWarmTurnText measures a prompt answered with three streamed deltas: prompt →
// engine turn (badger writes) → updates → response.
func BenchmarkWarmTurnText(b *testing.B) { benchTurn(b, "hello", 0) }

// BenchmarkWarmTurnShellTool adds one terminal call (`true`, a real subprocess) to the turn.
func BenchmarkWarmTurnShellTool(b *testing.B) { benchTurn(b, "run a shell command", 1) }

// BenchmarkStreamedChunk measures what one more streamed delta adds to a turn: a turn of
// 1,000 one-character deltas, reported per delta (engine journal → agent_message_chunk
// notification → SDK client). Subtract BenchmarkWarmTurnText/1000 for the pure per-chunk cost.
func BenchmarkStreamedChunk(b *testing.B) {
	c, ctx := benchConn(b)
	const words = 4 // 4 × chunksPerWord = 1,000 deltas
	text := strings.Repeat("chunk ", words)
	newSession := func() sdk.SessionId {
		r, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: c.cwd, McpServers: []sdk.McpServer{}})
		if err != nil {
			b.Fatal(err)
		}
		return r.SessionId
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		id := newSession()
		b.StartTimer()
		if sr := c.prompt(b, ctx, id, text); sr != sdk.StopReasonEndTurn {
			b.Fatal(sr)
		}
		b.StopTimer()
		if tr := summarize(c.cl.take()); len(tr.message) != words*chunksPerWord {
			b.Fatalf("message of %d bytes, want %d", len(tr.message), words*chunksPerWord)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(words*chunksPerWord), "ns/chunk")
}
