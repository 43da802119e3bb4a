package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// A write whose wall-clock budget was spent before it could try again (its process was
// stopped with the write in flight, and continued past storeTimeout) still makes
// minStoreAttempts attempts in all, then gives up; one within its budget goes on.
func TestWriteRetryCountsAttempts(t *testing.T) {
	spent := &writeRetry{deadline: time.Now().Add(-time.Minute), wait: time.Microsecond}
	for i := 1; i < minStoreAttempts; i++ {
		if !spent.again() {
			t.Fatalf("gave up after %d attempts with its budget spent while stopped; want %d", i, minStoreAttempts)
		}
	}
	if spent.again() {
		t.Fatalf("tried a %dth time past its deadline", minStoreAttempts+1)
	}
	fresh := &writeRetry{deadline: time.Now().Add(time.Hour), wait: time.Microsecond}
	for i := range 2 * minStoreAttempts {
		if !fresh.again() {
			t.Fatalf("gave up after %d attempts within its budget", i+1)
		}
	}
}

// lossyStore loses the answers of event appends and lookups on purpose: the first lose
// appends report the store unreachable, whether or not they were applied (apply; lost runs
// meanwhile), and the first blind lookups fail likewise.
type lossyStore struct {
	store.Store
	lose, blind int
	apply       bool
	lost        func()
}

func (s *lossyStore) AppendEvents(ctx context.Context, sid string, f store.Fence, evs []store.StoredEvent) error {
	if s.lose > 0 {
		s.lose--
		if s.apply {
			if err := s.Store.AppendEvents(ctx, sid, f, evs); err != nil {
				return err
			}
		}
		if s.lost != nil {
			s.lost()
		}
		return fmt.Errorf("%w: the answer was lost", store.ErrUnavailable)
	}
	return s.Store.AppendEvents(ctx, sid, f, evs)
}

func (s *lossyStore) EventsSince(ctx context.Context, sid string, after uint64, limit int) ([]store.StoredEvent, error) {
	if s.blind > 0 {
		s.blind--
		return nil, fmt.Errorf("%w: the lookup failed", store.ErrUnavailable)
	}
	return s.Store.EventsSince(ctx, sid, after, limit)
}

func (s *lossyStore) LastEventSeq(ctx context.Context, sid string) (uint64, error) {
	if s.blind > 0 {
		s.blind--
		return 0, fmt.Errorf("%w: the lookup failed", store.ErrUnavailable)
	}
	return s.Store.LastEventSeq(ctx, sid)
}

// An append whose answer was lost is stored when the log holds these very events at its seqs
// (it landed: sent again, it is refused as seqs taken), and refused when another writer took
// the seqs meanwhile: the stored last seq alone would call that stored.
func TestWriteAfterLostAnswer(t *testing.T) {
	ctx := context.Background()
	evs := func(turn string) []store.StoredEvent {
		return []store.StoredEvent{
			{Seq: 1, Type: "turn.started", Time: time.Now(), TurnID: turn, Data: json.RawMessage(`{"turn_id":"` + turn + `"}`)},
			{Seq: 2, Type: "message.delta", Time: time.Now(), TurnID: turn, Text: "hi"},
		}
	}
	setup := func(t *testing.T) (*memstore.Store, *journal) {
		mem := memstore.New()
		if _, err := mem.CreateSession(ctx, store.Session{ID: "s1"}); err != nil {
			t.Fatal(err)
		}
		return mem, &journal{sid: "s1"}
	}

	t.Run("landed, its lookup lost too", func(t *testing.T) {
		mem, j := setup(t)
		st := &lossyStore{Store: mem, lose: 1, apply: true, blind: 1}
		if err := j.write(st, 0, evs("t1")); err != nil {
			t.Fatalf("an append that landed is reported failed: %v", err)
		}
		got, _ := mem.EventsSince(ctx, "s1", 0, 0)
		if len(got) != 2 || got[0].TurnID != "t1" {
			t.Fatalf("stored %+v", got)
		}
	})

	t.Run("another writer took the seqs", func(t *testing.T) {
		mem, j := setup(t)
		st := &lossyStore{Store: mem, lose: 1, lost: func() {
			if err := mem.AppendEvents(ctx, "s1", store.Fence{}, evs("other")); err != nil {
				t.Error(err)
			}
		}}
		err := j.write(st, 0, evs("t1"))
		if !errors.Is(err, store.ErrEventSeq) {
			t.Fatalf("an append whose seqs another writer took: %v, want ErrEventSeq", err)
		}
		got, _ := mem.EventsSince(ctx, "s1", 0, 0)
		if len(got) != 2 || got[0].TurnID != "other" {
			t.Fatalf("stored %+v", got)
		}
	})
}

// landsRefused applies its first event append and answers it with a refusal, as a retried
// append whose first attempt landed unseen is answered.
type landsRefused struct {
	store.Store
	done bool
}

func (s *landsRefused) AppendEvents(ctx context.Context, sid string, f store.Fence, evs []store.StoredEvent) error {
	if s.done {
		return s.Store.AppendEvents(ctx, sid, f, evs)
	}
	s.done = true
	if err := s.Store.AppendEvents(ctx, sid, f, evs); err != nil {
		return err
	}
	return fmt.Errorf("%w: refused, though it landed", store.ErrEventSeq)
}

// A journal whose write failed does not trust a last seq its lease read before the failure:
// the write may have landed, and numbering from the older seq would have the turn's first
// event refused as a seq taken (and the turn's events, an approval request among them, kept
// in this process only).
func TestOwnAfterFailedWrite(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	if _, err := mem.CreateSession(ctx, store.Session{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	st := &landsRefused{Store: mem}
	j := newStoredJournal("s1", nil, st)
	j.born()
	j.append(Event{Type: EvSessionInfo, Data: Info{SessionID: "s1"}})
	j.bornStored(nil)
	if err := j.flushWait(ctx); err != nil {
		t.Fatal(err)
	}
	// The lease was acquired, and the stored last seq read, before the write ended.
	l, err := mem.AcquireLease(ctx, "s1", "me", time.Minute)
	if err != nil || l.Generation != 1 {
		t.Fatal(l, err)
	}
	sl := &seqLease{stored: 0, storedKnown: true, reserved: seqBlock, reserve: func(context.Context, uint64) error { return nil }}
	if err := j.own(ctx, st, 1, sl); err != nil {
		t.Fatal(err)
	}
	j.append(Event{Type: EvStatus, Data: StatusInfo{Status: StatusWorking}})
	if err := j.flushWait(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := mem.EventsSince(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Seq != 2 || got[1].Generation != 1 {
		t.Fatalf("stored %+v, want the session's info then the turn's status under the lease", got)
	}
	if !j.writesLog() {
		t.Fatal("the lease holder's journal no longer writes the log")
	}
	j.close()
}

// A journal that owns the log and finds its own pending events stored (their write's answer was
// lost in a database restart, and not written again yet; its birth event unfenced, before its
// lease) keeps the log: they count as stored. Different events at those seqs are another
// writer's, and it follows the log from then on.
func TestRefreshFindsItsOwnEventsStored(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		other bool
	}{{"its own", false}, {"another writer's", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := storeWithSession(t, "s1")
			j := newStoredJournal("s1", nil, mem)
			j.born()
			j.append(Event{Type: EvSessionInfo, Data: Info{SessionID: "s1"}})
			j.mu.Lock()
			birth := j.events[0]
			j.log.aligned, j.log.needSync, j.log.owner, j.log.fence = true, false, true, 1
			j.log.pending, j.log.durable = []Event{birth}, 0
			j.mu.Unlock()
			stored := storedEvent(birth)
			if tc.other {
				stored.Data = json.RawMessage(`{"session_id":"s1","model":"another"}`)
			}
			if err := mem.AppendEvents(ctx, "s1", store.Fence{}, []store.StoredEvent{stored}); err != nil {
				t.Fatal(err)
			}
			j.refresh(ctx, mem)
			j.mu.Lock()
			owner, durable, pending := j.log.owner, j.log.durable, len(j.log.pending)
			j.mu.Unlock()
			if tc.other {
				if owner {
					t.Fatal("another writer's event at its seq left the journal owning the log")
				}
				return
			}
			if !owner || durable != 1 || pending != 0 {
				t.Fatalf("owner %v, durable %d, pending %d: want the log still its own with seq 1 stored", owner, durable, pending)
			}
		})
	}
}

// heldAppends holds event appends until released.
type heldAppends struct {
	store.Store
	release chan struct{}
}

func (s *heldAppends) AppendEvents(ctx context.Context, sid string, f store.Fence, evs []store.StoredEvent) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.AppendEvents(ctx, sid, f, evs)
}

// A lease holder publishes the events it reserved seqs for as it appends them; a stored
// subscription gets them once the store holds them, with the same seqs, and no sooner.
func TestSubscribeStoredWaitsForTheStore(t *testing.T) {
	ctx := context.Background()
	mem := storeWithSession(t, "s1")
	lease, err := mem.AcquireLease(ctx, "s1", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	held := &heldAppends{Store: mem, release: make(chan struct{})}
	j := newStoredJournal("s1", nil, held)
	j.born()
	j.mu.Lock()
	j.log.aligned, j.log.needSync, j.log.owner, j.log.fence, j.log.leased = true, false, true, lease.Generation, true
	j.log.reserved, j.log.reserve = 100, func(context.Context, uint64) error { return nil }
	j.mu.Unlock()
	defer j.close()
	plain, stored := j.subscribe(0), j.subscribeTo(0, true)
	defer plain.Close()
	defer stored.Close()
	for _, text := range []string{"a", "b", "c"} {
		j.append(Event{Type: EvMessageDelta, TurnID: "t1", Text: text})
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	published, err := plain.NextBatch(wctx, nil)
	if err != nil || len(published) != 3 {
		t.Fatalf("the plain subscription: %d events, %v", len(published), err)
	}
	early, cancelEarly := context.WithTimeout(ctx, 300*time.Millisecond)
	got, err := stored.NextBatch(early, nil)
	cancelEarly()
	if err == nil {
		t.Fatalf("the stored subscription delivered %d events the store does not hold", len(got))
	}
	close(held.release)
	for len(got) < 3 {
		more, err := stored.NextBatch(wctx, nil)
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		last, _ := mem.LastEventSeq(ctx, "s1")
		for _, ev := range more {
			if ev.Seq > last {
				t.Fatalf("event %d delivered with the store at %d", ev.Seq, last)
			}
		}
		got = append(got, more...)
	}
	for i := range got {
		if got[i].Seq != published[i].Seq || got[i].Text != published[i].Text {
			t.Fatalf("event %d: stored %d %q, published %d %q", i, got[i].Seq, got[i].Text, published[i].Seq, published[i].Text)
		}
	}
}

// A lease holder whose pending events begin with its own birth event, already stored unfenced
// by a write whose answer it lost, finds it stored when the fenced append is refused for that
// seq: the rest of the batch is stored after it and the journal keeps writing the log. Another
// writer's event at that seq still ends the write.
func TestWriteFindsItsOwnEventsAlreadyStored(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		other bool
	}{{"its own", false}, {"another writer's", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := storeWithSession(t, "s1")
			lease, err := mem.AcquireLease(ctx, "s1", "me", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			j := newStoredJournal("s1", nil, mem)
			j.born()
			j.append(Event{Type: EvSessionInfo, Data: Info{SessionID: "s1"}})
			j.append(Event{Type: EvMessageDelta, TurnID: "t1", Text: "after the birth"})
			j.mu.Lock()
			birth := storedEvent(j.events[0])
			if tc.other {
				birth.Data = json.RawMessage(`{"session_id":"s1","model":"another"}`)
			}
			j.mu.Unlock()
			if err := mem.AppendEvents(ctx, "s1", store.Fence{}, []store.StoredEvent{birth}); err != nil {
				t.Fatal(err)
			}
			batch := []store.StoredEvent{storedEvent(j.events[0]), storedEvent(j.events[1])}
			err = j.write(mem, lease.Generation, batch)
			if tc.other {
				if !errors.Is(err, store.ErrEventSeq) {
					t.Fatalf("another writer's event at the seq: %v, want the seq refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("the write refused its own stored birth event: %v", err)
			}
			got, err := mem.EventsSince(ctx, "s1", 0, 10)
			if err != nil || len(got) != 2 || got[1].Text != "after the birth" || got[1].Generation != lease.Generation {
				t.Fatalf("stored %+v (%v): want the birth event, then the delta under the lease", got, err)
			}
		})
	}
}

// storeWithSession is an in-memory store holding the session sid, closed with the test.
func storeWithSession(t *testing.T, sid string) *memstore.Store {
	t.Helper()
	mem := memstore.New()
	t.Cleanup(func() { mem.Close() })
	if _, err := mem.CreateSession(context.Background(), store.Session{ID: sid}); err != nil {
		t.Fatal(err)
	}
	return mem
}
