package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/postgres"
	"github.com/hermes-go/hermes/engine/store/postgres/pgtest"
)

// The same workloads on PostgreSQL (a private cluster, fsync on) and on badger (synced writes),
// so one run gives the figures side by side:
//
//	go test -run '^$' -bench . -benchtime 5s ./engine/store/postgres/

func benchStores(b *testing.B, fn func(b *testing.B, s store.Store)) {
	b.Run("postgres", func(b *testing.B) {
		s := openSchema(b, pgtest.DB(b), "hermes")
		defer s.Close()
		fn(b, s)
	})
	b.Run("badger", func(b *testing.B) {
		s, err := badgerstore.Open(b.TempDir(), badgerstore.Options{SyncWrites: true})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		fn(b, s)
	})
}

const benchContent = "a chat message of typical length. a chat message of typical length. a chat message of typical length. a chat message."

// fencedAppend has writers goroutines, each the lease holder of a session of its own, append
// one fenced row per call. It reports acknowledged rows/s.
func fencedAppend(b *testing.B, s store.Store, writers int) { appendRows(b, s, writers, true) }

// appendRows is fencedAppend, or the same appends without a fence (no lease row to check).
func appendRows(b *testing.B, s store.Store, writers int, fenced bool) {
	ctx := context.Background()
	fences := make([]store.Fence, writers)
	for w := range writers {
		sid := fmt.Sprintf("bench-%d", w)
		if _, err := s.CreateSession(ctx, store.Session{ID: sid}); err != nil {
			b.Fatal(err)
		}
		l, err := s.AcquireLease(ctx, sid, fmt.Sprintf("node-%d", w%3), time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		if fenced {
			fences[w] = store.Fence{Generation: l.Generation}
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	b.ResetTimer()
	for w := range writers {
		wg.Go(func() {
			sid := fmt.Sprintf("bench-%d", w)
			row := []store.Row{{Role: "assistant", Content: benchContent}}
			for next.Add(1) <= int64(b.N) {
				if _, err := s.AppendRows(ctx, sid, fences[w], row); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// 50 writers on 50 sessions, every row fenced and durable before it is acknowledged.
func BenchmarkFencedAppend50Writers(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) { fencedAppend(b, s, 50) })
	// With a connection per writer, every writer's commit can share a WAL flush.
	b.Run("postgres-pool50", func(b *testing.B) {
		s, err := postgres.Open(context.Background(), pgtest.DB(b), postgres.Options{MaxConns: 50})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		fencedAppend(b, s, 50)
	})
}

// The same appends unfenced: what the lease check costs.
func BenchmarkUnfencedAppend50Writers(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) { appendRows(b, s, 50, false) })
}

// One writer on one session: no concurrency to share a commit with.
func BenchmarkFencedAppendSingleSession(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) { fencedAppend(b, s, 1) })
}

// Reading a 200-row history (the whole active transcript, as a resume does).
func BenchmarkHistoryRead200(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		ctx := context.Background()
		if _, err := s.CreateSession(ctx, store.Session{ID: "h"}); err != nil {
			b.Fatal(err)
		}
		batch := make([]store.Row, 20)
		for i := range batch {
			batch[i] = store.Row{Role: "user", Content: strings.Repeat("x", 400), TurnID: "t"}
		}
		for range 10 {
			if _, err := s.AppendRows(ctx, "h", store.Fence{}, batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for b.Loop() {
			rows, err := s.Rows(ctx, "h", store.RowQuery{})
			if err != nil || len(rows) != 200 {
				b.Fatalf("%d rows, %v", len(rows), err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
	})
}

// Cross-node hint latency: node a appends a row, node b's watcher is woken by the NOTIFY that
// carries the hint (sent at once after a quiet spell, as here). It reports the p50 and p99
// of append-returned → hint-taken on b; what a follower on another node adds to a commit before
// it can read the row.
func BenchmarkCrossNodeHint(b *testing.B) {
	ctx := context.Background()
	url := pgtest.DB(b)
	na, nb := openSchema(b, url, "hermes"), openSchema(b, url, "hermes")
	defer na.Close()
	defer nb.Close()
	if _, err := na.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		b.Fatal(err)
	}
	sub, err := nb.Watch(ctx, store.Interest{Sessions: []string{"s"}})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	drain := func() {
		for {
			select {
			case <-sub.C():
				sub.Take()
			case <-time.After(50 * time.Millisecond):
				return
			}
		}
	}
	drain()
	row := []store.Row{{Role: "assistant", Content: benchContent}}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		if _, err := na.AppendRows(ctx, "s", store.Fence{}, row); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for got := false; !got; {
			select {
			case <-sub.C():
				cs, lost := sub.Take()
				got = lost || slices.Contains(cs, store.Change{SessionID: "s"})
			case <-time.After(10 * time.Second):
				b.Fatal("no hint on the other node within 10s")
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
