package engine

import (
	"context"
	"iter"
	"runtime"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// deltaProvider streams n one-word text chunks.
type deltaProvider struct{ n int }

func (p deltaProvider) Stream(ctx context.Context, _ model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		c := model.Chunk{Text: "tok "}
		for i := 0; i < p.n; i++ {
			if !yield(c, nil) {
				return
			}
		}
	}
}

func benchEngine(b *testing.B) *Engine {
	e, err := New(Config{Store: memstore.New(), Providers: map[string]model.Provider{"p": deltaProvider{}}, DefaultModel: "p:m", Cwd: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// BenchmarkStreamDelta measures the engine's cost per streamed text delta: provider chunk →
// accumulator → journal append (seq, window) → in-flight text for snapshots.
func BenchmarkStreamDelta(b *testing.B) {
	e := benchEngine(b)
	s, err := e.Create(context.Background(), CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s.mu.Lock()
	t := s.newTurnLocked("bench", "bench", trace.SpanContext{})
	s.mu.Unlock()
	var out Outcome
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := t.streamModel(deltaProvider{n: b.N}, "p:m", nil, false, &out); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkJournalFanOut100 measures one append delivered to 100 live subscribers, each
// reading in its own goroutine (ns per event appended, all deliveries included).
func BenchmarkJournalFanOut100(b *testing.B) {
	j := newJournal("bench", nil)
	j.window = b.N + 1 // measure delivery, not the lag cut-off of readers slower than the writer
	const subs = 100
	var wg sync.WaitGroup
	total := uint64(b.N)
	for i := 0; i < subs; i++ {
		sub := j.subscribe(0)
		wg.Go(func() {
			defer sub.Close()
			buf := make([]Event, 0, 256)
			for sub.Cursor() < total {
				var err error
				buf, err = sub.NextBatch(context.Background(), buf[:0])
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j.append(Event{Type: EvMessageDelta, Text: "tok "})
	}
	wg.Wait()
}

// BenchmarkIdleSessionMemory reports the live heap per idle session (created, not running).
func BenchmarkIdleSessionMemory(b *testing.B) {
	const n = 2000
	for i := 0; i < b.N; i++ {
		e := benchEngine(b)
		ctx := context.Background()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		keep := make([]*Session, 0, n)
		for k := 0; k < n; k++ {
			s, err := e.Create(ctx, CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			keep = append(keep, s)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/session")
		runtime.KeepAlive(keep)
	}
}
