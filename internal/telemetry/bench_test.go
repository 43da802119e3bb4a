package telemetry_test

import (
	"context"
	"encoding/json"
	"iter"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/internal/telemetry"
	"github.com/hermes-go/hermes/internal/telemetry/otlptest"
)

// toolThenText is a zero-latency model: a call of the echo tool, then (once the tool's result
// is the last message) three text deltas, each answer with usage.
type toolThenText struct{}

func (toolThenText) Stream(_ context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	usage := &model.Usage{PromptTokens: 100, CompletionTokens: 3, TotalTokens: 103}
	chunks := []model.Chunk{{ToolCalls: []model.ToolCallDelta{{Index: 0, ID: "call_1", Name: "echo", Arguments: `{"text":"hi"}`}}}, {Usage: usage, FinishReason: "tool_calls"}}
	if last := r.Messages[len(r.Messages)-1]; last.Role == "tool" {
		chunks = []model.Chunk{{Text: "one "}, {Text: "two "}, {Text: "three"}, {Usage: usage, FinishReason: "stop"}}
	}
	return func(yield func(model.Chunk, error) bool) {
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
		}
	}
}

// BenchmarkWarmTurnTracing measures a warm turn with one tool call (the 2nd+ prompt of a
// session, submit → outcome: two model calls, one tool call, one approval hook — five spans)
// in process with a zero-latency model and the in-memory store, with tracing off (no SDK
// installed: the API's no-op tracer, as every command runs without an OTLP endpoint) and on
// (the SDK with the batch processor and the OTLP/HTTP exporter sending to an in-process
// receiver, as hermes sets it up from OTEL_EXPORTER_OTLP_ENDPOINT). The two engines take
// turns, one turn each per iteration, so both see the same machine load; it reports each
// one's mean time per turn and the difference.
func BenchmarkWarmTurnTracing(b *testing.B) {
	recv := otlptest.New(b)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(recv.Endpoint()+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp, err := telemetry.NewProvider(context.Background(), exp, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	turns := [2]func(){}
	for i, on := range []bool{false, true} {
		cfg := engine.Config{Store: memstore.New(), Providers: map[string]model.Provider{"fake": toolThenText{}}, DefaultModel: "fake:m",
			Tools: tool.NewRegistry(echoTool{}), Cwd: b.TempDir(), Policy: policy.Set{Approver: policy.Defaults{}, Busy: policy.NewBusySetting(policy.Queue)}}
		if on {
			cfg.TracerProvider = tp
		}
		eng, err := engine.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { eng.Close() })
		ctx := context.Background()
		s, err := eng.Create(ctx, engine.CreateOptions{Source: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		turns[i] = func() {
			adm, err := s.Submit(ctx, engine.Prompt{Text: "go"})
			if err != nil {
				b.Fatal(err)
			}
			if out, err := s.Wait(ctx, adm.TurnID); err != nil || out.Status != engine.StatusCompleted {
				o, _ := json.Marshal(out)
				b.Fatal(string(o), err)
			}
		}
		turns[i]()
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k := range 2 {
			k = (k + i) % 2 // alternate which goes first
			start := time.Now()
			turns[k]()
			spent[k] += time.Since(start)
		}
	}
	off, on := float64(spent[0])/float64(b.N), float64(spent[1])/float64(b.N)
	b.ReportMetric(off, "off-ns/turn")
	b.ReportMetric(on, "on-ns/turn")
	b.ReportMetric(100*(on-off)/off, "overhead-%")
}

// BenchmarkSpansOff measures what the engine's instrumentation costs a turn with tracing off:
// the five spans of a tool-call turn (turn, two chats, tool, policy hook) started and ended on
// the global tracer with no SDK installed, each guarded by IsRecording as the engine does. Set
// against a warm turn's time this is the "off vs no instrumentation" difference.
func BenchmarkSpansOff(b *testing.B) {
	tr := otel.GetTracerProvider().Tracer("bench")
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		tctx, turn := tr.Start(ctx, "invoke_agent hermes")
		for _, name := range []string{"chat m", "execute_tool echo", "hermes.policy approval", "chat m"} {
			_, sp := tr.Start(tctx, name)
			if sp.IsRecording() {
				b.Fatal("a recording span without an SDK")
			}
			sp.End()
		}
		turn.End()
	}
}
