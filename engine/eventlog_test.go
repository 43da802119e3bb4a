package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// onStore is an engine harness whose store is st (shared by the engines of one test, as the
// processes of one home share the store process).
func onStore(t *testing.T, st store.Store) *enginetest.Harness {
	return enginetest.New(t, enginetest.Options{Memory: true, Configure: func(c *engine.Config) { c.Store = st }})
}

// storedUpTo waits until the session's stored log reaches seq.
func storedUpTo(t *testing.T, st store.Store, sid string, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		last, err := st.LastEventSeq(context.Background(), sid)
		if err == nil && last >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored log of %s at %d (%v), want %d", sid, last, err, seq)
		}
		time.Sleep(5 * time.Millisecond) // polls a condition; never a synchronisation by itself
	}
}

// collect reads sub until it delivered seq, or fails after 30 s.
func collect(t *testing.T, sub *engine.Subscription, seq uint64) []engine.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []engine.Event
	for sub.Cursor() < seq {
		evs, err := sub.NextBatch(ctx, nil)
		got = append(got, evs...)
		if err != nil {
			t.Fatalf("subscription at %d (want %d): %v", sub.Cursor(), seq, err)
		}
	}
	return got
}

// turnEvents reads sub through the end of the next turn: its message.complete and the
// session.info that follows it once the session is idle again.
func turnEvents(t *testing.T, sub *engine.Subscription) []engine.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []engine.Event
	complete := false
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscription at %d: %v", sub.Cursor(), err)
		}
		got = append(got, ev)
		complete = complete || ev.Type == engine.EvMessageComplete
		if complete && ev.Type == engine.EvSessionInfo {
			return got
		}
	}
}

// sameEvents checks that a follower saw exactly the owner's events under the same seqs.
func sameEvents(t *testing.T, what string, got, want []engine.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d:\n got %s\nwant %s", what, len(got), len(want), kinds(got), kinds(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.TurnID != w.TurnID || g.Text != w.Text || g.SessionID != w.SessionID {
			t.Fatalf("%s: event %d = %d %s %q, want %d %s %q", what, i, g.Seq, g.Type, g.Text, w.Seq, w.Type, w.Text)
		}
		if fmt.Sprintf("%T", g.Data) != fmt.Sprintf("%T", w.Data) {
			t.Fatalf("%s: event %d (%s) payload %T, want %T", what, g.Seq, g.Type, g.Data, w.Data)
		}
	}
}

func kinds(evs []engine.Event) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf(" %d:%s", e.Seq, e.Type)
	}
	return s
}

// TestEventLogFollowAcrossEngines: two engines on one store stand for two processes of one
// home. Engine A runs a turn; a subscriber attached through engine B receives the same events
// with the same seqs, in order, and events.since through B answers the same after the turn.
func TestEventLogFollowAcrossEngines(t *testing.T) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	a, b := onStore(t, shared), onStore(t, shared)
	ctx := enginetest.Context(t)

	s := a.Create()
	bs, err := b.Engine.Open(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	sub := bs.Subscribe(bs.LastSeq())
	defer sub.Close()
	subA := s.Subscribe(sub.Cursor())
	defer subA.Close()

	a.Server.Enqueue(openaitest.Text("hello ", "from ", "A"))
	out := a.Run(s, "hi")
	if out.Status != engine.StatusCompleted {
		t.Fatalf("turn: %+v", out)
	}
	owner := turnEvents(t, subA)
	last := owner[len(owner)-1].Seq
	got := collect(t, sub, last)
	sameEvents(t, "live through B", got, owner)
	if c := got[len(got)-1]; c.Type != engine.EvSessionInfo {
		t.Fatalf("the turn's last event through B: %s", c.Type)
	}
	var complete *engine.Outcome
	for _, e := range got {
		if o, ok := e.Data.(engine.Outcome); ok && e.Type == engine.EvMessageComplete {
			complete = &o
		}
	}
	if complete == nil || complete.Text != "hello from A" || complete.TurnID != out.TurnID {
		t.Fatalf("message.complete through B: %+v", complete)
	}

	// After the turn, a poll through B (session.events.since) gives the same.
	since, ok := bs.EventsSince(0)
	all, _ := s.EventsSince(0)
	if !ok {
		t.Fatal("events.since(0) through B is truncated")
	}
	sameEvents(t, "events.since through B", since, all)
	if bs.Generation() != s.Generation() || bs.LastSeq() != s.LastSeq() {
		t.Fatalf("B's generation %q at %d, A's %q at %d", bs.Generation(), bs.LastSeq(), s.Generation(), s.LastSeq())
	}

	// A third engine, opened after the turn, replays the whole log from the store.
	c := onStore(t, shared)
	cs, err := c.Engine.Open(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	late := cs.Subscribe(0)
	defer late.Close()
	sameEvents(t, "replay through C", collect(t, late, last), all)
}

// TestEventLogRestartContinuesSeqs: a new engine on the same store (a restarted process)
// continues the session's seqs where the log ends, never reusing one, and its subscribers see
// the earlier turn's events from the store.
func TestEventLogRestartContinuesSeqs(t *testing.T) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	a := onStore(t, shared)
	s := a.Create()
	a.Server.Enqueue(openaitest.Text("first"))
	a.Run(s, "one")
	first := s.LastSeq()
	storedUpTo(t, shared, s.ID(), first)
	if err := a.Engine.Close(); err != nil {
		t.Fatal(err)
	}
	stored, err := shared.LastEventSeq(context.Background(), s.ID())
	if err != nil || stored < first {
		t.Fatalf("stored log ends at %d (%v), the first engine numbered %d", stored, err, first)
	}

	a2 := onStore(t, shared)
	ctx := enginetest.Context(t)
	s2, err := a2.Engine.Open(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	sub := s2.Subscribe(0)
	defer sub.Close()
	a2.Server.Enqueue(openaitest.Text("second"))
	out := a2.Run(s2, "two")
	evs := collect(t, sub, s2.LastSeq())
	seen := map[uint64]bool{}
	var prev uint64
	for _, e := range evs {
		if seen[e.Seq] || e.Seq != prev+1 {
			t.Fatalf("seq %d after %d (reused or out of order):%s", e.Seq, prev, kinds(evs))
		}
		seen[e.Seq], prev = true, e.Seq
	}
	var turnStart uint64
	for _, e := range evs {
		if e.Type == engine.EvMessageStart && e.TurnID == out.TurnID {
			turnStart = e.Seq
		}
	}
	if turnStart <= stored {
		t.Fatalf("the restarted engine's turn starts at seq %d, inside the stored log (up to %d)", turnStart, stored)
	}
	storedUpTo(t, shared, s.ID(), s2.LastSeq())
	log, err := shared.EventsSince(context.Background(), s.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range log {
		if e.Seq != uint64(i+1) {
			t.Fatalf("stored log has seq %d at %d", e.Seq, i)
		}
	}
}

// blindStore passes everything to the store but delivers no change hint: its watches only
// hear Lost, when the test says so (a remote store that reconnected).
type blindStore struct {
	store.Store
	mu   sync.Mutex
	subs []*store.Subscription
}

func (b *blindStore) Watch(ctx context.Context, in store.Interest) (*store.Subscription, error) {
	sub := store.NewSubscription(ctx, in, nil)
	b.mu.Lock()
	b.subs = append(b.subs, sub)
	b.mu.Unlock()
	return sub, nil
}

func (b *blindStore) lost() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.subs {
		s.MarkLost()
	}
}

func (b *blindStore) Close() error { return nil }

// TestEventLogFollowsWithoutHints: the follower's engine never gets a hint; after a Lost it
// re-reads by cursor and still ends with exactly the owner's events.
func TestEventLogFollowsWithoutHints(t *testing.T) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	blind := &blindStore{Store: shared}
	a, b := onStore(t, shared), onStore(t, blind)
	ctx := enginetest.Context(t)
	s := a.Create()
	bs, err := b.Engine.Open(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	sub := bs.Subscribe(bs.LastSeq())
	defer sub.Close()
	start := sub.Cursor()
	subA := s.Subscribe(start)
	defer subA.Close()
	a.Server.Enqueue(openaitest.Text("unseen ", "turn"))
	a.Run(s, "hi")
	owner := turnEvents(t, subA)
	last := owner[len(owner)-1].Seq
	storedUpTo(t, shared, s.ID(), last)
	if sub.Cursor() != start {
		t.Fatalf("a follower without hints moved to %d", sub.Cursor())
	}
	blind.lost()
	sameEvents(t, "after Lost", collect(t, sub, last), owner)
}

// TestEventLogOwnerHandsOver: the log passes from the engine that ran the last turn to the one
// running the next, and each one's subscribers follow the other's turn.
func TestEventLogOwnerHandsOver(t *testing.T) {
	shared := memstore.New()
	t.Cleanup(func() { shared.Close() })
	a, b := onStore(t, shared), onStore(t, shared)
	ctx := enginetest.Context(t)
	s := a.Create()
	a.Server.Enqueue(openaitest.Text("a1"))
	a.Run(s, "first")
	storedUpTo(t, shared, s.ID(), s.LastSeq())
	bs, err := b.Engine.Open(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	subA := s.Subscribe(s.LastSeq())
	defer subA.Close()
	subB := bs.Subscribe(subA.Cursor())
	defer subB.Close()
	b.Server.Enqueue(openaitest.Text("b1"))
	out := b.Run(bs, "second")
	if out.Text != "b1" {
		t.Fatalf("turn on B: %+v", out)
	}
	want := turnEvents(t, subB)
	got := collect(t, subA, want[len(want)-1].Seq)
	sameEvents(t, "B's turn through A", got, want)
	for _, e := range got {
		if e.Type == engine.EvMessageStart && e.TurnID != out.TurnID {
			t.Fatalf("turn %s seen through A, want %s", e.TurnID, out.TurnID)
		}
	}
	if _, err := sub2(t, s); err != nil {
		t.Fatal(err)
	}

	// B gives the log back (its lease released); A's next turn is followed through B.
	engine.DisownLog(bs)
	subB2 := bs.Subscribe(bs.LastSeq())
	defer subB2.Close()
	subA2 := s.Subscribe(subB2.Cursor())
	defer subA2.Close()
	a.Server.Enqueue(openaitest.Text("a2"))
	a.Run(s, "third")
	want = turnEvents(t, subA2)
	sameEvents(t, "A's turn through B after B disowned", collect(t, subB2, want[len(want)-1].Seq), want)
}

// sub2 checks that a fresh subscription through the former owner replays without lagging.
func sub2(t *testing.T, s *engine.Session) ([]engine.Event, error) {
	t.Helper()
	sub := s.Subscribe(0)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []engine.Event
	for sub.Cursor() < s.LastSeq() {
		evs, err := sub.NextBatch(ctx, nil)
		out = append(out, evs...)
		if err != nil {
			if errors.Is(err, engine.ErrLagged) {
				return out, fmt.Errorf("replay from 0 lagged at %d", sub.Cursor())
			}
			return out, err
		}
	}
	return out, nil
}
