package homestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/homestore"
	"github.com/hermes-go/hermes/engine/store/storetest"
)

// benchStores runs fn against badger in this process and against the same kind of store behind
// a store process (served in this process, over its socket), for side-by-side figures.
func benchStores(b *testing.B, fn func(b *testing.B, s store.Store)) {
	b.Run("inprocess", func(b *testing.B) {
		s, err := badgerstore.Open(filepath.Join(b.TempDir(), "state"), badgerstore.DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		fn(b, s)
	})
	b.Run("remote", func(b *testing.B) {
		home := b.TempDir()
		stop := serveForBench(b, home)
		defer stop()
		c := dialBench(b, home)
		defer c.Close()
		fn(b, c)
	})
}

func BenchmarkAppendRow(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		storetest.BenchmarkAppend(b, s, 1)
	})
}

func BenchmarkAppendRow16Writers(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		storetest.BenchmarkAppend(b, s, 16)
	})
}

// BenchmarkReadHistory reads a 200-row transcript, as a turn does before calling the model.
func BenchmarkReadHistory(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		ctx := context.Background()
		if _, err := s.CreateSession(ctx, store.Session{ID: "h"}); err != nil {
			b.Fatal(err)
		}
		rows := make([]store.Row, 200)
		for i := range rows {
			rows[i] = store.Row{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("message %d of a conversation of typical length, with some words in it.", i)}
		}
		if _, err := s.AppendRows(ctx, "h", store.Fence{}, rows); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			got, err := s.Rows(ctx, "h", store.RowQuery{})
			if err != nil || len(got) != 200 {
				b.Fatalf("%d rows, %v", len(got), err)
			}
		}
	})
}

// BenchmarkList10k lists 10,000 sessions (hermes sessions reads them all, then shows the newest).
func BenchmarkList10k(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < 10_000; i += 16 {
					if _, err := s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("s%05d", i), Title: fmt.Sprintf("session %d", i), Model: "openai:gpt-4o", Source: "cli"}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			got, err := s.ListSessions(ctx, store.ListOptions{})
			if err != nil || len(got) != 10_000 {
				b.Fatalf("%d sessions, %v", len(got), err)
			}
		}
	})
}

func serveForBench(b *testing.B, home string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- homestore.Serve(ctx, homestore.ServerOptions{
			Home: home,
			Open: func() (store.Store, error) {
				return badgerstore.Open(filepath.Join(home, "state"), badgerstore.DefaultOptions())
			},
			Ready: func() { close(ready) },
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		b.Fatal(err)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

func dialBench(b *testing.B, home string) *homestore.Client {
	c, err := homestore.Dial(context.Background(), homestore.ClientOptions{Home: home})
	if err != nil {
		b.Fatal(err)
	}
	return c
}
