package engine

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLagged ends a subscription whose cursor fell out of the journal window: the subscriber was
// too slow (or asked for a cursor too old). It should re-read the snapshot and history, then
// resubscribe from the current seq.
var ErrLagged = errors.New("subscriber lagged behind the event journal")

// ErrJournalClosed ends a subscription after the session closed and every event was read.
var ErrJournalClosed = errors.New("session journal closed")

// journalWindow is how many recent events a session keeps for replay. Memory stays bounded:
// the window is trimmed by halves, and an idle fresh session holds none.
const journalWindow = 8192

// journal is a session's event log: monotonic seq, bounded replay window, any number of
// pull-based subscribers. Appending never blocks on a subscriber.
type journal struct {
	mu     sync.Mutex
	sid    string
	events []Event // events[i].Seq == first+i
	first  uint64  // seq of events[0] (valid when len(events) > 0)
	last   uint64  // last assigned seq
	subs   map[*Subscription]struct{}
	closed bool
	window int
	gen    string // identifies this journal: seq restarts at 1 in a new one (guarded by mu)
	// active is when the session was last used (monoNow): opened, prompted, a turn ended, a
	// subscriber came or went. Engine.ReleaseIdle compares it with its cutoff.
	active atomic.Int64
	tap    func(Event) // Config.OnEvent; nil when unset
}

func newJournal(sid string, tap func(Event)) *journal {
	j := &journal{sid: sid, window: journalWindow, gen: newID("")[:12], tap: tap}
	j.touch()
	return j
}

// touch records activity now.
func (j *journal) touch() { j.active.Store(monoNow()) }

// clockBase anchors monoNow: durations since it are read from the monotonic clock, so a wall
// clock step (NTP, a suspended VM) neither releases sessions early nor pins them.
var clockBase = time.Now()

// monoNow is the monotonic time since clockBase, in nanoseconds.
func monoNow() int64 { return int64(time.Since(clockBase)) }

// append assigns the next seq and publishes the event.
func (j *journal) append(e Event) uint64 {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return 0
	}
	j.last++
	e.Seq = j.last
	e.SessionID = j.sid
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if len(j.events) == 0 {
		j.first = e.Seq
	}
	if len(j.events) >= j.window {
		half := len(j.events) / 2
		n := copy(j.events, j.events[half:])
		clear(j.events[n:])
		j.events = j.events[:n]
		j.first += uint64(half)
	}
	j.events = append(j.events, e)
	if j.tap != nil {
		j.tap(e) // before any subscriber wakes: whoever saw the event sees it counted
	}
	for s := range j.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	j.mu.Unlock()
	return e.Seq
}

// reopen starts the journal of a released session made live again (Session.revive): a new
// generation whose seq restarts at 1. Nobody is subscribed (release requires it).
func (j *journal) reopen() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed, j.events, j.first, j.last = false, nil, 0, 0
	j.gen = newID("")[:12]
	j.touch()
}

// generation identifies the journal (see Session.Generation).
func (j *journal) generation() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.gen
}

func (j *journal) lastSeq() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

func (j *journal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	j.closed = true
	for s := range j.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Subscription reads a session journal from a cursor. It is owned by one goroutine.
type Subscription struct {
	j      *journal
	cursor uint64 // last seq delivered
	wake   chan struct{}
	err    error
}

func (j *journal) subscribe(since uint64) *Subscription {
	s := &Subscription{j: j, cursor: since, wake: make(chan struct{}, 1)}
	j.mu.Lock()
	if j.subs == nil {
		j.subs = map[*Subscription]struct{}{}
	}
	j.subs[s] = struct{}{}
	j.touch()
	j.mu.Unlock()
	return s
}

// Cursor is the seq of the last event returned.
func (s *Subscription) Cursor() uint64 { return s.cursor }

// Close detaches the subscription.
func (s *Subscription) Close() {
	s.j.mu.Lock()
	delete(s.j.subs, s)
	s.j.touch() // a session stays live for the idle period after its last watcher leaves
	s.j.mu.Unlock()
}

// Next returns the next event after the cursor, waiting for one. It fails with ErrLagged when
// the cursor fell out of the window, ErrJournalClosed after the session closed, or ctx's error.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	out, err := s.read(ctx, nil, 1)
	if err != nil {
		return Event{}, err
	}
	return out[0], nil
}

// NextBatch appends to buf every event available after the cursor (at least one, waiting if
// none) and returns it.
func (s *Subscription) NextBatch(ctx context.Context, buf []Event) ([]Event, error) {
	return s.read(ctx, buf, 0)
}

// read appends up to max events (0 = all available) after the cursor, waiting for at least one.
func (s *Subscription) read(ctx context.Context, buf []Event, max int) ([]Event, error) {
	if s.err != nil {
		return buf, s.err
	}
	for {
		j := s.j
		j.mu.Lock()
		if s.cursor < j.last {
			if len(j.events) == 0 || s.cursor+1 < j.first {
				j.mu.Unlock()
				s.err = ErrLagged
				return buf, s.err
			}
			i := int(s.cursor + 1 - j.first)
			avail := j.events[i:]
			if max > 0 && len(avail) > max {
				avail = avail[:max]
			}
			buf = append(buf, avail...)
			s.cursor = avail[len(avail)-1].Seq
			j.mu.Unlock()
			return buf, nil
		}
		closed := j.closed
		j.mu.Unlock()
		if closed {
			s.err = ErrJournalClosed
			return buf, s.err
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return buf, ctx.Err()
		}
	}
}

// eventsSince returns a copy of the retained events after since (for snapshots and polling
// surfaces); ok is false when since is older than the window.
func (j *journal) eventsSince(since uint64) (out []Event, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if since >= j.last {
		return nil, true
	}
	if len(j.events) == 0 || since+1 < j.first {
		return nil, false
	}
	return append([]Event(nil), j.events[since+1-j.first:]...), true
}

// Events is the iterator form of a subscription: replay after since, then live events, until
// ctx ends, the session closes or the reader lags (the error says which).
func events(ctx context.Context, j *journal, since uint64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		sub := j.subscribe(since)
		defer sub.Close()
		var buf []Event
		for {
			var err error
			buf, err = sub.NextBatch(ctx, buf[:0])
			for _, e := range buf {
				if !yield(e, nil) {
					return
				}
			}
			if err != nil {
				if !errors.Is(err, ErrJournalClosed) {
					yield(Event{}, err)
				}
				return
			}
		}
	}
}
