package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
)

// BenchmarkAppend measures single-row appends from writers goroutines, each appending to a
// session of its own (the shape of many concurrent chats). It reports rows/s; ns/op is the
// wall-clock cost per row across all writers.
func BenchmarkAppend(b *testing.B, s store.Store, writers int) {
	ctx := context.Background()
	for w := range writers {
		if _, err := s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("bench-%d", w)}); err != nil {
			b.Fatal(err)
		}
	}
	content := strings.Repeat("a chat message of typical length. ", 4) // ~140 bytes
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	b.ReportAllocs()
	b.ResetTimer()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("bench-%d", w)
			row := []store.Row{{Role: "assistant", Content: content}}
			for next.Add(1) <= int64(b.N) {
				if _, err := s.AppendRows(ctx, sid, store.Fence{}, row); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
