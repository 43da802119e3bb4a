package engine

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// ErrLagged ends a subscription whose cursor fell out of the journal window: the subscriber was
// too slow (or asked for a cursor too old). It should re-read the snapshot and history, then
// resubscribe from the current seq.
var ErrLagged = errors.New("subscriber lagged behind the event journal")

// ErrJournalClosed ends a subscription after the session closed and every event was read.
var ErrJournalClosed = errors.New("session journal closed")

// storeRetry is how often a subscriber reading stored events tries again while the store is
// unavailable.
const storeRetry = 500 * time.Millisecond

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
	// warn logs what the journal gives up on (events the store refused); nil: nothing. debug
	// logs the refusals that are the log's ordinary hand-over (see flushOnce).
	warn, debug func(msg string, args ...any)
	// active is when the session was last used (monoNow): opened, prompted, a turn ended, a
	// subscriber came or went. Engine.ReleaseIdle compares it with its cutoff.
	active atomic.Int64
	tap    func(Event) // Config.OnEvent; nil when unset
	log    logState    // the durable log (eventlog.go)
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
	e.SessionID = j.sid
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if j.log.aligned && !j.log.owner {
		// Another process numbers this session's events (eventlog.go): this one stays local.
		if j.tap != nil {
			j.tap(e)
		}
		j.mu.Unlock()
		return 0
	}
	e.Seq = j.last + 1
	j.pushLocked(e)
	if j.log.owner {
		j.log.pending = append(j.log.pending, e)
		if len(j.log.pending) == flushBatch || j.log.leased && (j.log.fence == 0 || e.Seq+seqBlock/2 > j.log.reserved) {
			// A batch is full, the reservation runs low, or no lease is held (between leases an
			// event is published once stored; before the first, the log is caught up at once).
			signal(j.log.urge)
		}
		j.startFlushLocked()
	}
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
	if j.log.st != nil && j.log.aligned {
		// The seqs go on where the stored log, or this journal as its writer, left them (what
		// the owner still had pending is being stored).
		j.closed = false
		j.log.needSync = !j.log.owner
		j.touch()
		return
	}
	j.closed, j.events, j.first, j.last = false, nil, 0, 0
	j.gen = newID("")[:12]
	j.log.needSync = j.log.st != nil // mirrors the stored log from its next use
	j.touch()
}

// generation identifies the journal (see Session.Generation).
func (j *journal) generation() string {
	j.sync(context.Background())
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.gen
}

func (j *journal) lastSeq() uint64 {
	j.sync(context.Background())
	return j.lastSeqNoSync()
}

// lastSeqNoSync is lastSeq without catching up with the stored log first.
func (j *journal) lastSeqNoSync() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.visibleLocked()
}

func (j *journal) close() {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	j.wakeLocked()
	j.stopFollowLocked()
	flushing := j.log.flushing
	j.mu.Unlock()
	if flushing {
		signal(j.log.urge)
		j.drain() // the session's last events are stored before Close returns
	}
	j.dropBirth()
}

// Subscription reads a session journal from a cursor. It is owned by one goroutine.
type Subscription struct {
	j      *journal
	cursor uint64 // last seq delivered
	epoch  uint64 // the journal's log epoch when subscribed (eventlog.go)
	wake   chan struct{}
	err    error
	stored bool // deliver only events the store holds (SubscribeStored)
}

func (j *journal) subscribe(since uint64) *Subscription {
	return j.subscribeTo(since, false)
}

func (j *journal) subscribeTo(since uint64, stored bool) *Subscription {
	j.sync(context.Background())
	s := &Subscription{j: j, cursor: since, wake: make(chan struct{}, 1), stored: stored}
	j.mu.Lock()
	if j.subs == nil {
		j.subs = map[*Subscription]struct{}{}
	}
	j.subs[s] = struct{}{}
	s.epoch = j.log.epoch
	j.startFollowLocked()
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
	if len(s.j.subs) == 0 {
		s.j.stopFollowLocked()
	}
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
		if s.epoch != j.log.epoch {
			// Events this journal numbered were forgotten (eventlog.go): the cursor may name one.
			j.mu.Unlock()
			s.err = ErrLagged
			return buf, s.err
		}
		vis := j.visibleLocked()
		if s.stored && j.log.st != nil && j.log.aligned && j.log.owner {
			vis = min(vis, j.log.durable) // the lease holder's own events, once stored
		}
		if s.cursor < vis {
			if len(j.events) == 0 || s.cursor+1 < j.first {
				if st := j.log.st; j.log.aligned && st != nil && s.cursor < j.log.durable {
					// Out of the window but stored: read it back.
					durable := j.log.durable
					j.mu.Unlock()
					evs, err := j.fromStore(ctx, st, s.cursor, max)
					if err == nil && len(evs) > 0 {
						// The first may be past cursor+1: the log has a gap there (eventlog.go).
						buf = append(buf, evs...)
						s.cursor = evs[len(evs)-1].Seq
						return buf, nil
					}
					if err == nil {
						// Nothing stored after the cursor up to the durable seq: a gap.
						if durable > s.cursor {
							s.cursor = durable
						}
						continue
					}
					if ctx.Err() != nil {
						return buf, ctx.Err()
					}
					if errors.Is(err, store.ErrUnavailable) {
						// The store is out (a database restart): the events are stored and
						// will be readable again; nothing was lost, so the reader waits.
						select {
						case <-time.After(storeRetry):
							continue
						case <-ctx.Done():
							return buf, ctx.Err()
						}
					}
					s.err = ErrLagged
					return buf, s.err
				}
				if j.log.owner && j.log.flushing {
					// Out of the window and not stored yet: it will be in a moment.
					j.mu.Unlock()
					if err := j.flushWait(ctx); err != nil {
						return buf, err
					}
					continue
				}
				j.mu.Unlock()
				s.err = ErrLagged
				return buf, s.err
			}
			i := int(s.cursor + 1 - j.first)
			avail := j.events[i : vis+1-j.first]
			if max > 0 && len(avail) > max {
				avail = avail[:max]
			}
			buf = append(buf, avail...)
			s.cursor = avail[len(avail)-1].Seq
			j.mu.Unlock()
			return buf, nil
		}
		closed := j.closed
		unstored := closed && s.cursor < j.last && j.log.owner && j.log.flushing
		j.mu.Unlock()
		if unstored {
			// Closed with its last events published once stored (eventlog.go), the closing
			// session.closed among them: they are readable when the flusher has them.
			if err := j.flushWait(ctx); err != nil {
				return buf, err
			}
			j.mu.Lock()
			moved := s.cursor < j.visibleLocked()
			j.mu.Unlock()
			if moved {
				continue
			}
		}
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
	ctx := context.Background()
	j.sync(ctx)
	j.mu.Lock()
	st, follower := j.log.st, j.log.aligned && !j.log.owner
	j.mu.Unlock()
	if st != nil && follower {
		j.refresh(ctx, st) // catch up with the owner's log now, not at the next hint
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	vis := j.visibleLocked()
	if since >= vis {
		return nil, true
	}
	if len(j.events) == 0 || since+1 < j.first {
		if st := j.log.st; j.log.aligned && st != nil && since < j.log.durable {
			// Older than the window but stored: read it back, then the window after it. The
			// log may have a gap (eventlog.go): what is stored after since is what there is.
			first, last := j.first, j.last
			j.mu.Unlock()
			stored, err := j.fromStore(ctx, st, since, 0)
			j.mu.Lock()
			if err != nil {
				return nil, false
			}
			vis = j.visibleLocked()
			end := since
			if len(stored) > 0 {
				end = stored[len(stored)-1].Seq
			}
			if j.first != first || j.last < last {
				return stored, false // the window moved meanwhile
			}
			// Complete when the stored events reach the window, or when all of them were read
			// (fewer than asked for) and every seq before the window is settled in the store (a
			// seq between is then a gap, not an event still on its way).
			reached := len(j.events) > 0 && end+1 >= j.first
			settled := len(stored) < j.window && (len(j.events) == 0 || j.first <= j.log.durable+1)
			complete := reached || settled
			for _, e := range j.events {
				if e.Seq > end && e.Seq <= vis {
					stored = append(stored, e)
				}
			}
			return stored, complete
		}
		return nil, false
	}
	return append([]Event(nil), j.events[since+1-j.first:vis+1-j.first]...), true
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
