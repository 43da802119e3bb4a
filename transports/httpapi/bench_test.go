package httpapi_test

import (
	"context"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model"
)

// instant answers every call at once: the benchmark measures the server and the engine, not
// a model.
type instant struct{}

func (instant) Stream(ctx context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		if !yield(model.Chunk{Text: "ok"}, nil) {
			return
		}
		yield(model.Chunk{FinishReason: "stop", Usage: &model.Usage{PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11}}, nil)
	}
}

// BenchmarkChatNonStreaming posts non-streamed chat completions, each the first message of a
// new conversation (so each creates its session), from parallel clients; it reports
// requests/s and the p50/p99 latency.
func BenchmarkChatNonStreaming(b *testing.B) {
	tg := newTargetWith(b, instant{}, nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var n atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			body := `{"model":"openai:fake-agent","messages":[{"role":"user","content":"question ` + strconv.FormatInt(n.Add(1), 10) + `"}]}`
			req, _ := http.NewRequest("POST", tg.base+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			t0 := time.Now()
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			mine = append(mine, time.Since(t0))
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
				return
			}
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
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
