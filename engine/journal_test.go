package engine

import (
	"context"
	"errors"
	"testing"
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
