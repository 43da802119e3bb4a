package metrics_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/internal/metrics"
)

// instant is a zero-latency model: three text deltas, usage, stop.
type instant struct{}

func (instant) Stream(context.Context, model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		for _, c := range []model.Chunk{{Text: "one "}, {Text: "two "}, {Text: "three"}, {Usage: &model.Usage{PromptTokens: 100, CompletionTokens: 3, TotalTokens: 103}, FinishReason: "stop"}} {
			if !yield(c, nil) {
				return
			}
		}
	}
}

// BenchmarkWarmTurnMetrics measures a warm text turn (the 2nd+ prompt of a session, submit →
// outcome) in process with a zero-latency model, with metrics off and on (the event tap, the
// timing store and the timing policy hooks, as hermes serve wires them), on the in-memory and
// the durable badger store. The two engines take turns, one turn each per iteration, so both
// see the same machine load; it reports each one's mean time per turn and the difference.
func BenchmarkWarmTurnMetrics(b *testing.B) {
	for _, durable := range []bool{false, true} {
		b.Run(map[bool]string{false: "memstore", true: "badger"}[durable], func(b *testing.B) {
			turns := [2]func(){}
			for i, on := range []bool{false, true} {
				var st store.Store = memstore.New()
				if durable {
					bst, err := badgerstore.Open(b.TempDir(), badgerstore.DefaultOptions())
					if err != nil {
						b.Fatal(err)
					}
					st = bst
				}
				b.Cleanup(func() { st.Close() })
				cfg := engine.Config{Store: st, Providers: map[string]model.Provider{"fake": instant{}}, DefaultModel: "fake:m", Tools: tool.NewRegistry(),
					Policy: policy.Set{Approver: policy.Defaults{}, Busy: policy.NewBusySetting(policy.Queue)}}
				if on {
					m := metrics.New()
					cfg.Store, cfg.Policy, cfg.OnEvent = m.Store(st), m.Policy(cfg.Policy), m.OnEvent
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
						b.Fatal(out, err)
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
		})
	}
}

// BenchmarkTapTurn measures the tap alone on the events of one warm text turn (start, three
// deltas, the outcome, session info) plus an approved tool call (decision, request open and
// resolved, tool start and complete): what metrics add to a turn, without the noise of the
// turn itself.
func BenchmarkTapTurn(b *testing.B) {
	m := metrics.New()
	now := time.Now()
	out := engine.Outcome{TurnID: "turn_1", Status: engine.StatusCompleted, Model: "openai:gpt-4.1-mini", APICalls: 2,
		Usage: model.Usage{PromptTokens: 1200, CompletionTokens: 80, CachedTokens: 300, CostUSD: 0.0004}, Duration: time.Millisecond,
		Context: engine.ContextInfo{Used: 1280, Max: 1047576}}
	events := []engine.Event{
		{Type: engine.EvMessageStart, SessionID: "s", Data: engine.TurnStart{Prompt: "go"}},
		{Type: engine.EvPolicyDecision, SessionID: "s", Data: engine.PolicyDecision{Hook: "approval", CallID: "c1", Decision: policy.Ask}},
		{Type: engine.EvRequestOpen, SessionID: "s", Data: engine.Request{ID: "r1", Kind: engine.KindApproval, Created: now}},
		{Type: engine.EvRequestResolved, SessionID: "s", Time: now.Add(time.Second), Data: engine.RequestResolved{ID: "r1", Kind: engine.KindApproval, Answer: map[string]any{"choice": "once"}}},
		{Type: engine.EvToolStart, SessionID: "s", Data: engine.ToolStart{CallID: "c1", Name: "terminal"}},
		{Type: engine.EvToolComplete, SessionID: "s", Data: engine.ToolComplete{CallID: "c1", Name: "terminal", Duration: time.Millisecond}},
		{Type: engine.EvMessageDelta, SessionID: "s", Text: "one "},
		{Type: engine.EvMessageDelta, SessionID: "s", Text: "two "},
		{Type: engine.EvMessageDelta, SessionID: "s", Text: "three"},
		{Type: engine.EvMessageComplete, SessionID: "s", Data: out},
		{Type: engine.EvSessionInfo, SessionID: "s", Data: engine.Info{SessionID: "s"}},
	}
	b.ReportAllocs()
	for range b.N {
		for _, e := range events {
			m.OnEvent(e)
		}
	}
}
