package acp_test

import (
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/acp"
)

// /queue while a turn runs merges into the one-slot follow-up queue exactly as a busy prompt
// the policy queues: /queue, a plain prompt and /queue again make one follow-up turn with the
// three texts in order, and that turn continues the trace the first /queue arrived with.
func TestQueueCommandMergesLikeABusyQueue(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(testCtx(t)) })
	srv, p := fakeProvider(t)
	eng, cwd := newEngineWith(t, p, "queue", func(c *engine.Config) { c.TracerProvider = tp })
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	gate := openaitest.NewGate()
	srv.Enqueue(openaitest.Response{Text: []string{"first done"}, Gate: gate, FaultAt: 1}, openaitest.Text("follow-up done"))
	first := make(chan sdk.StopReason, 1)
	go func() {
		r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("first")}})
		if err != nil {
			t.Error(err)
		}
		first <- r.StopReason
	}()
	select {
	case <-gate.Reached():
	case <-ctx.Done():
		t.Fatal("the first turn's model call never started")
	}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	say := func(text string, meta map[string]any) string {
		t.Helper()
		c.cl.take()
		r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}, Meta: meta})
		if err != nil || r.StopReason != sdk.StopReasonEndTurn {
			t.Fatalf("%q: %+v %v", text, r, err)
		}
		return summarize(c.cl.take()).message
	}
	for i, step := range []struct {
		text string
		meta map[string]any
	}{
		{"/queue add tests", map[string]any{"traceparent": parent}},
		{"then the docs", nil},
		{"/queue   and the changelog", nil},
	} {
		if got, want := say(step.text, step.meta), "Queued for the next turn. ("+string(rune('1'+i))+" queued)"; got != want {
			t.Fatalf("%q answered %q, want %q", step.text, got, want)
		}
	}
	sess, err := eng.Open(ctx, string(id))
	if err != nil {
		t.Fatal(err)
	}
	if q := sess.Queued(); q != "add tests\n\nthen the docs\n\nand the changelog" {
		t.Fatalf("queued slot %q", q)
	}
	gate.Release()
	if sr := <-first; sr != sdk.StopReasonEndTurn {
		t.Fatalf("first prompt: %s", sr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `"content":"add tests\n\nthen the docs\n\nand the changelog"`) {
		t.Fatalf("the follow-up turn's request lacks the merged text (%d requests): %.1500s", len(reqs), reqs[len(reqs)-1].Body)
	}
	// The follow-up turn's span ends right after its outcome is published: wait for it.
	var follow sdktrace.ReadOnlySpan
	for follow == nil {
		for _, s := range rec.Ended() {
			if s.Name() == "invoke_agent hermes" && s.Parent().IsValid() {
				follow = s
			}
		}
		if follow == nil {
			select {
			case <-ctx.Done():
				t.Fatal("no turn span continuing a trace: the queued turn did not keep the first /queue's traceparent")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if got := follow.Parent(); got.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || got.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("the queued turn's parent is %s/%s, want the first /queue's traceparent", got.TraceID(), got.SpanID())
	}
	for _, s := range rec.Started() {
		if s.Name() == "invoke_agent hermes" && s.SpanContext().TraceID() == follow.SpanContext().TraceID() && s.SpanContext().SpanID() != follow.SpanContext().SpanID() {
			t.Fatal("the first turn also joined the /queue's trace")
		}
	}
}
