package httpapi_test

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/internal/loadgen"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// burst streams n one-word deltas with no latency: a stream benchmark over it measures how
// fast the engine and the server turn model chunks into SSE events.
type burst struct{ n int }

func (m burst) Stream(ctx context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		for range m.n {
			if !yield(model.Chunk{Text: "w "}, nil) {
				return
			}
		}
		yield(model.Chunk{FinishReason: "stop", Usage: &model.Usage{PromptTokens: 10, CompletionTokens: m.n, TotalTokens: 10 + m.n}}, nil)
	}
}

// BenchmarkChatStreamEvents streams one chat completion of 2,000 deltas per iteration and
// reports the SSE events the client received per second. Every delta must arrive: a stream
// that drops some (a lagging subscription) fails the benchmark.
func BenchmarkChatStreamEvents(b *testing.B) {
	const deltas = 2000
	tg := newTargetWith(b, burst{n: deltas}, nil)
	lt := &loadgen.Target{BaseURL: tg.base + "/v1", APIKey: testKey}
	want := strings.Repeat("w ", deltas)
	events := 0
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		body := `{"model":"openai:fake-agent","stream":true,"messages":[{"role":"user","content":"stream ` + strconv.Itoa(i) + `"}]}`
		s, err := lt.OpenStream(context.Background(), "/chat/completions", []byte(body))
		if err != nil {
			b.Fatal(err)
		}
		r, err := s.Drain()
		if err != nil {
			b.Fatal(err)
		}
		if r.Text != want {
			b.Fatalf("stream %d: %d of %d bytes of text arrived", i, len(r.Text), len(want))
		}
		events += r.Events
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(events)/float64(b.N), "events/stream")
}

// held answers with one delta, then waits until release is closed (or the turn is
// interrupted) before it finishes: every turn stays in flight until the benchmark lets go.
type held struct {
	release <-chan struct{}
}

func (m held) Stream(ctx context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		if !yield(model.Chunk{Text: "held "}, nil) {
			return
		}
		select {
		case <-m.release:
		case <-ctx.Done():
			yield(model.Chunk{}, ctx.Err())
			return
		}
		if !yield(model.Chunk{Text: "released"}, nil) {
			return
		}
		yield(model.Chunk{FinishReason: "stop", Usage: &model.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}}, nil)
	}
}

// BenchmarkChatStreams1000 holds 1,000 streamed chat completions open at once (each its own
// session and turn, the concurrency cap lifted), then lets every model answer finish and
// drains them. It reports the errors (must be 0), how long opening all of them took, and the
// Go heap and goroutines of the process (server and clients) while all are held. Run it with
// -benchtime=1x; each iteration is the whole scenario.
func BenchmarkChatStreams1000(b *testing.B) {
	const streams = 1000
	for i := range b.N {
		release := make(chan struct{})
		tg := newTargetWith(b, held{release: release}, func(o *httpapi.Options) { o.MaxConcurrent = -1 })
		lt := &loadgen.Target{BaseURL: tg.base + "/v1", APIKey: testKey, Client: loadgen.NewClient(streams)}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		h := loadgen.Hold(streams, func(j int) (*loadgen.Stream, error) {
			body := `{"model":"openai:fake-agent","stream":true,"messages":[{"role":"user","content":"client ` + strconv.Itoa(i) + `-` + strconv.Itoa(j) + `"}]}`
			return lt.OpenStream(ctx, "/chat/completions", []byte(body))
		})
		opened := time.Since(start)
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		goroutines := runtime.NumGoroutine()
		close(release)
		sum := h.Drain()
		cancel()
		if sum.Errors > 0 {
			b.Errorf("%d of %d streams failed; first: %v", sum.Errors, streams, sum.Err)
		}
		if sum.Streams == streams && sum.Texts["held released"] != streams {
			b.Errorf("unexpected answers: %v", sum.Texts)
		}
		b.ReportMetric(float64(sum.Errors), "errors")
		b.ReportMetric(float64(len(h.Streams)), "held")
		b.ReportMetric(float64(opened.Milliseconds()), "open-all-ms")
		b.ReportMetric(float64(during.HeapInuse-min(before.HeapInuse, during.HeapInuse))/(1<<20), "heap-MB-held")
		b.ReportMetric(float64(goroutines), "goroutines")
		lt.Client.CloseIdleConnections()
	}
}

// BenchmarkResponsesNonStreaming is BenchmarkChatNonStreaming for POST /v1/responses (each a
// new stored response), from parallel clients.
func BenchmarkResponsesNonStreaming(b *testing.B) {
	tg := newTargetWith(b, instant{}, nil)
	lt := &loadgen.Target{BaseURL: tg.base + "/v1", APIKey: testKey}
	var mu sync.Mutex
	var lat []time.Duration
	var n int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			mu.Lock()
			n++
			body := fmt.Sprintf(`{"model":"openai:fake-agent","input":"question %d"}`, n)
			mu.Unlock()
			d, err := lt.Post(context.Background(), "/responses", []byte(body))
			if err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, d)
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(loadgen.Percentile(lat, 50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(loadgen.Percentile(lat, 99).Microseconds()), "p99-µs")
}

// BenchmarkChatRetainedPerConversation serves 200 one-turn conversations (non-streamed, each
// a new session, 200 deltas per answer) and reports the Go heap still live afterwards per
// conversation, and how many sessions the engine keeps live. What stays is what a long-running
// server accumulates for every conversation it has served until the idle sweep releases it
// (BenchmarkChatRetainedPerConversationRelease shows both sides).
func BenchmarkChatRetainedPerConversation(b *testing.B) {
	for i := range b.N {
		retainedPerConversation(b, i, 200, false)
	}
}

// BenchmarkChatRetainedPerConversationRelease is BenchmarkChatRetainedPerConversation for
// answers of 1, 200 and 2,000 deltas, measured right after serving ("kept": the sessions are
// still live, as within the idle period) and after one idle-session sweep ("swept").
func BenchmarkChatRetainedPerConversationRelease(b *testing.B) {
	for _, deltas := range []int{1, 200, 2000} {
		for _, swept := range []bool{false, true} {
			name := fmt.Sprintf("deltas=%d/kept", deltas)
			if swept {
				name = fmt.Sprintf("deltas=%d/swept", deltas)
			}
			b.Run(name, func(b *testing.B) {
				for i := range b.N {
					retainedPerConversation(b, i, deltas, swept)
				}
			})
		}
	}
}

// retainedPerConversation serves 200 conversations of one turn each and reports the heap
// retained per conversation; with sweep, idle sessions are released first.
func retainedPerConversation(b *testing.B, i, deltas int, sweep bool) {
	const convs = 200
	tg := newTargetWith(b, burst{n: deltas}, func(o *httpapi.Options) {
		if sweep {
			o.SessionIdleRelease = time.Nanosecond
		}
	})
	lt := &loadgen.Target{BaseURL: tg.base + "/v1", APIKey: testKey}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for j := range convs {
		body := `{"model":"openai:fake-agent","messages":[{"role":"user","content":"conversation ` + strconv.Itoa(i) + `-` + strconv.Itoa(j) + `"}]}`
		if _, err := lt.Post(context.Background(), "/chat/completions", []byte(body)); err != nil {
			b.Fatal(err)
		}
	}
	if sweep {
		tg.srv.SweepIdle()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1024/convs, "retained-KB/conv")
	b.ReportMetric(float64(len(tg.eng.LiveSessions())), "live-sessions")
}
