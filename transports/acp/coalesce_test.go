package acp_test

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/transports/acp"
)

// deltas answers with n one-letter deltas (a, b, c, …).
type deltas struct{ n int }

func (d deltas) Stream(context.Context, model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		for i := range d.n {
			if !yield(model.Chunk{Text: string(rune('a' + i%26))}, nil) {
				return
			}
		}
		yield(model.Chunk{FinishReason: "stop"}, nil)
	}
}

// TestCoalescerMergesOnlyABacklog runs whole turns before reading their events, so the reader
// finds every delta waiting: a backlog of 40 goes out as one chunk with the same text; 5
// waiting deltas (below the threshold) stay 5 chunks; other events pass through in order.
func TestCoalescerMergesOnlyABacklog(t *testing.T) {
	for _, tc := range []struct {
		n          int
		wantChunks int
	}{{40, 1}, {5, 5}} {
		eng, _ := newEngine(t, deltas{tc.n}, "")
		ctx := testCtx(t)
		s, err := eng.Create(ctx, engine.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		adm, f, err := s.Run(ctx, engine.Prompt{Text: "go"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Wait(ctx, adm.TurnID); err != nil {
			t.Fatal(err)
		}
		next := acp.Coalesce(f)
		var chunks []string
		var types []engine.EventType
		var lastSeq uint64
		for {
			ev, err := next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Seq <= lastSeq {
				t.Fatalf("seq went back: %d after %d", ev.Seq, lastSeq)
			}
			lastSeq = ev.Seq
			types = append(types, ev.Type)
			if ev.Type == engine.EvMessageDelta {
				chunks = append(chunks, ev.Text)
			}
			if ev.Type == engine.EvMessageComplete {
				break
			}
		}
		f.Close()
		var want strings.Builder
		for i := range tc.n {
			want.WriteRune(rune('a' + i%26))
		}
		if len(chunks) != tc.wantChunks || strings.Join(chunks, "") != want.String() {
			t.Fatalf("%d deltas: %d chunks %q, want %d chunks of %q", tc.n, len(chunks), chunks, tc.wantChunks, want.String())
		}
		start, firstDelta := -1, -1
		for i, ty := range types {
			if ty == engine.EvMessageStart && start < 0 {
				start = i
			}
			if ty == engine.EvMessageDelta && firstDelta < 0 {
				firstDelta = i
			}
		}
		if start < 0 || firstDelta < start {
			t.Fatalf("events out of order: %v", types)
		}
	}
}
