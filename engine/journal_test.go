package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

func TestJournalLagCutsOffSlowSubscriber(t *testing.T) {
	t.Parallel()
	j := newJournal("s", nil)
	j.window = 8
	slow := j.subscribe(0)
	defer slow.Close()
	for i := 0; i < 20; i++ {
		j.append(Event{Type: EvMessageDelta, Text: "x"})
	}
	if _, err := slow.Next(context.Background()); !errors.Is(err, ErrLagged) {
		t.Fatalf("slow subscriber: %v", err)
	}
	if slow.Cursor() != 0 {
		t.Fatalf("a lagged subscriber keeps its cursor: %d", slow.Cursor())
	}
	fresh := j.subscribe(j.lastSeq() - 3)
	defer fresh.Close()
	evs, err := fresh.NextBatch(context.Background(), nil)
	if err != nil || len(evs) != 3 || evs[0].Seq != 18 || evs[2].Seq != 20 {
		t.Fatalf("resume inside the window: %v %v", evs, err)
	}
	if _, ok := j.eventsSince(0); ok {
		t.Fatal("eventsSince must report a cursor older than the window")
	}
	j.close()
	if _, err := fresh.Next(context.Background()); !errors.Is(err, ErrJournalClosed) {
		t.Fatalf("after close: %v", err)
	}
	if seq := j.append(Event{Type: EvError}); seq != 0 {
		t.Fatal("append after close must be dropped")
	}
}

func TestJournalNextWaitsAndHonoursContext(t *testing.T) {
	t.Parallel()
	j := newJournal("s", nil)
	sub := j.subscribe(0)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	done := make(chan Event)
	go func() {
		ev, _ := sub.Next(context.Background())
		done <- ev
	}()
	j.append(Event{Type: EvMessageDelta, Text: "hello"})
	if ev := <-done; ev.Seq != 1 || ev.Text != "hello" || ev.SessionID != "s" || ev.Time.IsZero() {
		t.Fatalf("event: %+v", ev)
	}
}

// TestJournalDisownKeepsEventsRaisedMeanwhile: events appended while the owner gives its fence
// back (a turn's closing session.info races the lease's release) are stored, not forgotten:
// disown returns only once nothing it numbered under the fence is still pending, and events
// after it go on being numbered and stored unfenced.
func TestJournalDisownKeepsEventsRaisedMeanwhile(t *testing.T) {
	t.Parallel()
	for round := 0; round < 50; round++ {
		st := memstore.New()
		j := newStoredJournal("s", nil, st)
		j.born()
		ctx := context.Background()
		if _, err := st.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
			t.Fatal(err)
		}
		l, err := st.AcquireLease(ctx, "s", "me", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.own(ctx, st, l.Generation, &seqLease{reserved: seqBlock, reserve: func(context.Context, uint64) error { return nil }}); err != nil {
			t.Fatal(err)
		}
		sub := j.subscribe(0)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				j.append(Event{Type: EvMessageDelta, Text: "x"})
			}
		}()
		j.disown()
		wg.Wait()
		if err := j.flushWait(ctx); err != nil {
			t.Fatal(err)
		}
		if got := j.lastSeq(); got != 200 {
			t.Fatalf("round %d: journal at %d after 200 appends", round, got)
		}
		if last, err := st.LastEventSeq(ctx, "s"); err != nil || last != 200 {
			t.Fatalf("round %d: stored log at %d (%v), want 200", round, last, err)
		}
		for sub.Cursor() < 200 {
			if _, err := sub.NextBatch(ctx, nil); err != nil {
				t.Fatalf("round %d: subscriber at %d: %v", round, sub.Cursor(), err)
			}
		}
		sub.Close()
		j.close()
	}
}
