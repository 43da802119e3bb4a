package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// The durable event log. A session's journal is mirrored in the store (Store.AppendEvents), so
// a client attached through any process sees the events of a turn another process runs, with
// the same seqs, and a restarted process continues the seqs instead of reusing them.
//
// One process writes a session's log at a time: its owner. The owner appends to the journal
// as before (in memory, subscribers woken at once) and a flusher goroutine writes what was
// appended to the store in group commits, every flushEvery or flushBatch events, so a turn
// never waits for the store per event. Every event is stored, token deltas included: a
// follower must see under each seq the event the owner's own clients saw, and a delta
// coalesced afterwards would have to change seqs. A turn waits for its events to be stored
// when it ends, and closing a session waits for the rest.
//
// Every other process follows the log: its journal holds the stored events (read by cursor
// after a Store.Watch hint, and again after a Lost one: a hint only says where to look) and
// events raised locally while it does not own the session are not journaled (they reach
// Config.OnEvent only): only the owner numbers events. A journal that ran out of the window
// reads older events back from the store.
//
// Who owns: the process holding the session's lease calls own when it acquires it and disown
// when it gives it back. Without leases, the process that runs a turn takes the log over when
// the turn starts (own with generation 0) and keeps it until another process writes the log;
// the store's contiguity check (ErrEventSeq) is then the arbiter, and a journal that lost it
// forgets the events it numbered that the log does not have (its subscribers lag, and resume
// from the store).
//
// A seq is never reused, not even after kill -9 of a lease holder whose clients already had
// events it had not stored yet. A lease holder publishes only seqs it reserved in the store
// first: its lease's held marker (lease.go) records the highest seq it may publish, reserved
// seqBlock ahead and extended by the flusher before the block runs low, so a turn never waits
// for it. A holder that takes a session over from one that did not release it (its marker is
// still there) numbers its events past that reservation: the log then has a gap, never two
// events under one seq. A clean release stores everything first and deletes the marker, so the
// next holder continues at the stored last seq. Between leases, a journal that still numbers
// the session's events publishes them once they are stored. Before the first lease, the
// process that made the session writes its log the same way, within seqs it reserved in the
// session's held marker when it made it (a birth reservation, generation 0): a process that
// takes the lease first numbers past them (bornStored).

const (
	// storedGeneration is the journal generation (Session.Generation) of a journal that mirrors
	// the stored log: the same in every process and across restarts, since the seqs are.
	storedGeneration = "stored"
	flushEvery       = 20 * time.Millisecond
	flushBatch       = 256
	followBatch      = 512
	// seqBlock is how many seqs a lease holder reserves at once (seqs it may publish before
	// they are stored); it extends the reservation when fewer than half are left.
	seqBlock     = 4096
	storeTimeout = 10 * time.Second
)

// logState is a journal's side of the durable log; guarded by journal.mu.
type logState struct {
	st       store.Store // nil: memory only
	needSync bool        // opened from the store: mirror its log at first use
	aligned  bool        // the journal's seqs are the stored log's
	owner    bool
	fence    uint64  // the owner's lease generation (0: unfenced)
	leased   bool    // the log is written under leases: publish only reserved or stored seqs
	reserved uint64  // the owner reserved the seqs up to here (reserve != nil)
	dropped  bool    // since own, events numbered here were forgotten unstored
	durable  uint64  // seqs up to here are stored
	pending  []Event // appended by the owner, not yet handed to the store
	inflight int     // events being written now
	// failures counts this journal's writes that failed: one may have landed all the same,
	// so a last seq read before it ended is not trusted (own).
	failures  uint64
	flushing  bool   // the flusher goroutine runs (whenever something is pending)
	resets    uint64 // bumped whenever pending is replaced under a flush in flight
	epoch     uint64 // bumped when numbered events were forgotten: older subscriptions lag
	following bool   // the follower goroutine runs
	stop      context.CancelFunc
	urge      chan struct{} // flush now: a batch is full, a turn ended, the journal closes
	flushed   chan struct{} // closed (and replaced) whenever a flush settled

	// reserve records a bigger reservation, fenced with the lease, or unfenced for a session
	// made here before its first lease (nil: no reservation).
	reserve func(ctx context.Context, upto uint64) error
	// unbirth deletes a birth reservation (bornStored); nil once a lease, or another process,
	// took the log over.
	unbirth func(ctx context.Context) error
}

func (l *logState) init(st store.Store) {
	l.st, l.needSync = st, st != nil
	l.urge, l.flushed = make(chan struct{}, 1), make(chan struct{})
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// newStoredJournal is a journal of a session opened from st: it mirrors the stored log from
// its first use on (born marks a session made by this process instead).
func newStoredJournal(sid string, tap func(Event), st store.Store) *journal {
	j := newJournal(sid, tap)
	j.log.init(st)
	return j
}

// born marks the journal of a session this process just made: nothing is stored for it yet,
// so it numbers its events itself until it owns the log (own continues them there).
func (j *journal) born() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.log.needSync = false
}

// bornStored makes the journal of a session this process made, whose record is now stored,
// the writer of the session's log before any lease: what it numbers is stored unfenced, and
// published as a lease holder's events are, within seqs reserved in the store first (sl; the
// session's held marker, written with no generation). Another process may take the session's
// lease before this one does; it numbers its events past that reservation, and this journal's
// next append is then refused: what it had not stored is forgotten, and it follows the log.
// So a seq a client here saw is never numbered again there. With sl nil (the reservation
// could not be written) the events are published once stored instead. Without leases (a
// single engine) it is not called.
func (j *journal) bornStored(sl *seqLease) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.log.st == nil || j.log.aligned || j.closed {
		return
	}
	j.log.pending = append(j.log.pending[:0], j.events...)
	j.log.durable = 0
	j.log.aligned, j.log.needSync = true, false
	j.log.owner, j.log.leased, j.log.fence = true, true, 0
	if sl != nil {
		j.log.reserved, j.log.reserve, j.log.unbirth = sl.reserved, sl.reserve, sl.drop
	}
	j.gen = storedGeneration
	if len(j.log.pending) > 0 {
		signal(j.log.urge)
	}
	j.startFlushLocked()
}

// seqLease is what a lease holder's journal publishes under: the seq its numbering starts past
// (the stored last seq, or a previous holder's reservation when that one did not release the
// lease), the seqs reserved in the store so far, and how to reserve more.
type seqLease struct {
	floor, reserved uint64
	// stored is the log's last seq as the lease's holder read it on acquiring (known: it was
	// read); own starts from it instead of reading it again when nothing this journal wrote
	// can have moved the log since.
	stored      uint64
	storedKnown bool
	reserve     func(ctx context.Context, upto uint64) error
	drop        func(ctx context.Context) error // a birth reservation's delete
}

// own makes this process the writer of the session's stored log, fenced with generation gen
// of the session's lease (0 and sl nil: unfenced). The journal continues from the stored last
// seq, or past sl.floor: a new session's events so far are stored, and a log that moved on
// without this journal is taken as it is (the window restarts there; events this journal
// numbered that the log does not have are forgotten and its subscribers lag). Calling it again
// while owning changes the fence.
func (j *journal) own(ctx context.Context, st store.Store, gen uint64, sl *seqLease) error {
	preread := sl != nil && sl.storedKnown
	for {
		var last uint64
		j.mu.Lock()
		failures := j.log.failures
		j.mu.Unlock()
		if preread {
			last = sl.stored
		} else {
			var err error
			if last, err = st.LastEventSeq(ctx, j.sid); err != nil {
				return fmt.Errorf("event log of %s: %w", j.sid, err)
			}
		}
		j.mu.Lock()
		if preread && (last < j.log.durable || j.log.inflight > 0 || failures > 0) || j.log.failures != failures {
			// Read before a flush of this journal stored more, or while one may, or before one
			// failed (it may have landed all the same): read again.
			preread = false
			j.mu.Unlock()
			continue
		}
		preread = false
		if j.closed {
			j.mu.Unlock()
			return ErrJournalClosed
		}
		if j.log.owner && (j.log.inflight > 0 || last > j.log.durable && len(j.log.pending) > 0) {
			// A flush of ours may be what moved the log: let it settle and look again (with a
			// flusher running: waiting on none would spin here).
			j.startFlushLocked()
			j.mu.Unlock()
			if err := j.flushWait(ctx); err != nil {
				return err
			}
			continue
		}
		if j.log.urge == nil {
			j.log.init(st)
		}
		j.log.st = st
		start := last
		if sl != nil {
			start = max(last, sl.floor)
		}
		switch {
		case !j.log.aligned && start == 0:
			// Nothing stored yet: what this journal numbered so far becomes the log's start.
			j.log.pending = append(j.log.pending[:0], j.events...)
			j.log.durable = 0
		case !j.log.aligned:
			j.resetLocked(start, j.last > 0)
		case start != j.log.durable || j.last != j.log.durable && !j.log.owner:
			j.resetLocked(start, j.last > last)
		}
		j.log.aligned, j.log.needSync = true, false
		j.gen = storedGeneration
		j.log.owner, j.log.fence, j.log.dropped = true, gen, false
		j.log.reserve, j.log.unbirth = nil, nil
		if sl != nil {
			j.log.leased = true
			j.log.reserved, j.log.reserve = sl.reserved, sl.reserve
			if j.last+seqBlock/2 > j.log.reserved {
				signal(j.log.urge) // numbered past what is reserved: reserve more at once
			}
			j.wakeLocked()
		}
		j.startFlushLocked()
		j.mu.Unlock()
		return nil
	}
}

// disown gives the log's fence back (the lease is given back or lost): what is pending is
// stored first, under the old fence (a fenced-off writer's events are refused by the store and
// forgotten here, and it follows the log from then on). A journal that gave its lease back in
// good order goes on numbering the events raised here between leases (background output, a
// title), unfenced, as the last writer of the log: the next process that writes the log takes
// it over, and this journal then follows it (refresh, or its next write refused). It reports
// whether everything numbered under the fence was stored: when not, some of it may have been
// published, and the lease's reservation must stay recorded (its held marker kept).
func (j *journal) disown() (clean bool) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for {
		_ = j.flushWait(ctx)
		j.mu.Lock()
		if !j.log.owner {
			j.mu.Unlock()
			return !j.log.dropped
		}
		if ctx.Err() != nil || len(j.log.pending) == 0 && j.log.inflight == 0 {
			break // held: nothing more is numbered under the fence
		}
		// Events raised since the flush settled (a turn's closing session.info races the
		// release): store them under the fence too.
		j.startFlushLocked()
		j.mu.Unlock()
	}
	defer j.mu.Unlock()
	clean = j.last == j.log.durable && j.log.inflight == 0 && !j.log.dropped
	j.log.fence, j.log.reserve, j.log.unbirth = 0, nil, nil
	if j.last > j.log.durable { // not stored in time: not in the log
		j.log.owner = false
		j.forgetLocked()
	}
	j.startFollowLocked()
	return clean
}

// ownForTurn takes the log over for a turn when no lease did (see the package comment).
func (j *journal) ownForTurn(ctx context.Context) {
	j.mu.Lock()
	st, owner := j.log.st, j.log.owner
	j.mu.Unlock()
	if st == nil || owner {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	_ = j.own(ctx, st, 0, nil) // the turn runs either way; its events then stay in this process
}

// resetLocked makes the journal mirror a stored log ending at last: the window empties (older
// events are read back from the store) and, with forget, subscriptions made before lag.
func (j *journal) resetLocked(last uint64, forget bool) {
	j.events, j.first, j.last = nil, 0, last
	j.log.durable = last
	j.log.pending = nil
	j.log.resets++
	if forget {
		j.log.epoch++
	}
	j.wakeLocked()
}

// forgetLocked drops the events after the stored ones (numbered here, never stored).
func (j *journal) forgetLocked() {
	if j.last > j.log.durable {
		j.log.dropped = true
	}
	for len(j.events) > 0 && j.events[len(j.events)-1].Seq > j.log.durable {
		j.events = j.events[:len(j.events)-1]
	}
	j.last = j.log.durable
	j.log.pending = nil
	j.log.resets++
	j.log.epoch++
	j.wakeLocked()
}

func (j *journal) wakeLocked() {
	for s := range j.subs {
		signal(s.wake)
	}
}

// startFlushLocked starts the flusher when the owner has something pending. The flusher lives
// only while events are pending, so an idle session costs no goroutine.
func (j *journal) startFlushLocked() {
	if j.log.flushing || len(j.log.pending) == 0 || j.log.st == nil {
		return
	}
	j.log.flushing = true
	go j.flusher(j.log.st)
}

// flusher writes the owner's pending events in group commits: it gathers for flushEvery (or
// until urged), stores everything pending, and ends when nothing is.
func (j *journal) flusher(st store.Store) {
	timer := time.NewTimer(flushEvery)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-j.log.urge:
		}
		for {
			more, exit := j.flushOnce(st)
			if exit {
				return
			}
			if !more {
				break
			}
		}
		timer.Reset(flushEvery)
	}
}

// flushOnce stores one batch of pending events. more: events remain; exit: the flusher ended.
func (j *journal) flushOnce(st store.Store) (more, exit bool) {
	j.mu.Lock()
	if len(j.log.pending) == 0 || !j.log.owner {
		j.log.pending = nil
		j.log.flushing = false
		j.settledLocked()
		j.mu.Unlock()
		return false, true
	}
	batch := append([]Event(nil), j.log.pending[:min(len(j.log.pending), store.MaxEventBatch)]...)
	j.log.inflight = len(batch)
	fence, resets := j.log.fence, j.log.resets
	var upto uint64
	reserve := j.log.reserve
	if reserve != nil && j.last+seqBlock/2 > j.log.reserved {
		upto = j.last + seqBlock
	}
	j.mu.Unlock()

	var err error
	if upto > 0 {
		// More seqs are reserved before they are published (the events past the reservation
		// wait for it), and before anything is stored past it.
		if err = retryUnavailable(func(ctx context.Context) error { return reserve(ctx, upto) }); err == nil {
			j.mu.Lock()
			if j.log.fence == fence && j.log.owner && j.log.reserve != nil {
				j.log.reserved = max(j.log.reserved, upto)
				j.wakeLocked()
			}
			j.mu.Unlock()
		}
	}
	evs := make([]store.StoredEvent, len(batch))
	for i, e := range batch {
		evs[i] = storedEvent(e)
	}
	if err == nil {
		err = j.write(st, fence, evs)
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	j.log.inflight = 0
	if j.log.resets != resets {
		// The journal was reset (reopened, or it took a moved log as it is) meanwhile: what it
		// holds now is not what this batch continued.
		j.settledLocked()
		return len(j.log.pending) > 0, false
	}
	if err != nil {
		// Refused (fenced, or the log moved on without us) or unreachable for too long: these
		// events are not in the log, and this journal no longer writes it.
		logf := j.warn
		if fence == 0 && j.log.leased && errors.Is(err, store.ErrEventSeq) {
			// Numbered between leases, as the log's last writer, while another process took
			// the log on: the designed hand-over, not a loss worth a warning.
			logf = j.debug
		}
		if logf != nil {
			logf("session event log: the store refused events; this process follows the log from now on", "session_id", j.sid,
				"first_seq", batch[0].Seq, "events", len(batch), "fence", fence, "err", err)
		}
		j.log.owner, j.log.fence, j.log.reserve, j.log.unbirth = false, 0, nil, nil
		j.log.failures++
		j.forgetLocked()
		j.log.flushing = false
		j.settledLocked()
		j.startFollowLocked()
		return false, true
	}
	j.log.durable = batch[len(batch)-1].Seq
	j.log.pending = j.log.pending[len(batch):]
	if j.log.leased && j.log.fence == 0 {
		j.wakeLocked() // between leases an event is published once stored
	} else {
		for s := range j.subs {
			if s.stored {
				signal(s.wake)
			}
		}
	}
	j.settledLocked()
	return len(j.log.pending) > 0, false
}

// retryUnavailable runs an idempotent store write, retrying while the store is unreachable or
// its answer does not come in time (see writeRetry).
func retryUnavailable(write func(context.Context) error) error {
	for r := newWriteRetry(); ; {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := write(ctx)
		cancel()
		if !outcomeUnknown(err) || !r.again() {
			return err
		}
	}
}

// writeRetry is the budget of a store write tried again while its outcome is unknown:
// storeTimeout of wall time and at least minStoreAttempts attempts. The count is what lets a
// process that was stopped (SIGSTOP, a paused machine) with a write in flight try again once it
// runs: its wall-clock budget was spent while it was stopped, not on the store.
type writeRetry struct {
	deadline time.Time
	tries    int
	wait     time.Duration
}

const minStoreAttempts = 4

func newWriteRetry() *writeRetry {
	return &writeRetry{deadline: time.Now().Add(storeTimeout), wait: 50 * time.Millisecond}
}

// again counts the attempt just made and reports whether to make another; it waits first
// (50 ms, doubling up to 1 s).
func (r *writeRetry) again() bool {
	r.tries++
	if r.tries >= minStoreAttempts && time.Now().After(r.deadline) {
		return false
	}
	time.Sleep(r.wait)
	r.wait = min(2*r.wait, time.Second)
	return true
}

// outcomeUnknown reports whether a store write's error leaves open whether it was applied: the
// store was unreachable, or its answer did not come in time (a slow store, or this process
// stopped for a while with the write in flight).
func outcomeUnknown(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// visibleLocked is the last seq subscribers may see. A lease holder publishes the seqs its
// lease reserved, and between leases the seqs stored: a seq a client saw is then either stored
// or past what the next holder numbers from (see the package comment).
func (j *journal) visibleLocked() uint64 {
	if !j.log.leased || !j.log.owner {
		return j.last
	}
	if j.log.reserve != nil {
		return min(j.last, j.log.reserved)
	}
	return min(j.last, j.log.durable)
}

// write appends evs, retrying while the store is unreachable or slow to answer. An append
// whose answer was lost may have landed: sent again, it is refused as seqs already taken. So
// after such an attempt the stored events at evs' seqs are looked up (landed), and the append
// counts as stored only when they are these events, written under this fence: the stored last
// seq alone does not tell, since a new lease holder numbers its events past ours. Each attempt
// has its own deadline and the budget counts attempts (writeRetry), so a process that was
// stopped with an append in flight looks again once it runs.
//
// Seqs already taken are this journal's own when the stored events there are the ones it
// wrote: a write whose answer was lost, this flush's or an earlier one's (its birth events,
// stored unfenced, may still be pending when it takes a lease). Those count as stored and the
// rest of the batch is sent again; seqs another writer took end the write.
func (j *journal) write(st store.Store, fence uint64, evs []store.StoredEvent) error {
	for r := newWriteRetry(); ; {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := st.AppendEvents(ctx, j.sid, store.Fence{Generation: fence}, evs)
		cancel()
		taken := errors.Is(err, store.ErrEventSeq)
		if !taken && !outcomeUnknown(err) {
			return err
		}
		k, lerr := landed(st, j.sid, fence, evs)
		switch {
		case lerr == nil && k == len(evs):
			return nil
		case lerr == nil && k > 0:
			evs = evs[k:] // stored up to there: the rest goes again
			continue
		case lerr == nil && taken:
			return err // another writer's
		case taken:
			err = lerr // not known yet
		}
		if !r.again() {
			return err
		}
	}
}

// landed counts the events at the start of evs that the session's stored log holds as an
// append under fence wrote them, or as this journal wrote them before any fence (its birth
// reservation's events).
func landed(st store.Store, sid string, fence uint64, evs []store.StoredEvent) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	got, err := st.EventsSince(ctx, sid, evs[0].Seq-1, len(evs))
	if err != nil {
		return 0, err
	}
	k := 0
	for k < len(got) && k < len(evs) && writtenAs(got[k], evs[k], fence) {
		k++
	}
	return k, nil
}

// writtenAs reports whether the stored event g is e as this journal wrote it: under fence, or
// before any (a birth reservation's events are stored unfenced).
func writtenAs(g, e store.StoredEvent, fence uint64) bool {
	return (g.Generation == fence || g.Generation == 0) && g.Seq == e.Seq && g.Type == e.Type &&
		g.TurnID == e.TurnID && g.Text == e.Text && sameJSON(g.Data, e.Data)
}

// sameJSON compares two payloads byte for byte once compacted (a store may compact what it
// keeps).
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

func (j *journal) settledLocked() {
	close(j.log.flushed)
	j.log.flushed = make(chan struct{})
}

// flushWait waits until every event appended so far is stored (or the journal stopped writing
// the log). A turn calls it as it ends, Close before it returns.
func (j *journal) flushWait(ctx context.Context) error {
	for {
		j.mu.Lock()
		if !j.log.flushing || len(j.log.pending) == 0 && j.log.inflight == 0 {
			j.mu.Unlock()
			return nil
		}
		ch := j.log.flushed
		j.mu.Unlock()
		signal(j.log.urge)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stored waits until the events up to seq are stored, and reports an error when they were not
// (the store refused them, or ctx ended first). A journal with no stored log (an engine alone
// without leases) has nothing to wait for.
// writesLog reports whether what this journal publishes goes to the stored log: it is the
// log's writer, or the session has no stored log.
func (j *journal) writesLog() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.log.st == nil || !j.log.aligned || j.log.owner
}

func (j *journal) stored(ctx context.Context, seq uint64) error {
	if err := j.flushWait(ctx); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.log.st == nil || !j.log.aligned || j.log.durable >= seq {
		return nil
	}
	return fmt.Errorf("event %d of session %s is not stored", seq, j.sid)
}

// drain waits, bounded, for the flusher to store the rest after the journal closed.
func (j *journal) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_ = j.flushWait(ctx)
}

// dropBirth deletes the birth reservation of a journal that closes before any lease with
// everything it numbered stored: the session's next holder then continues at the stored last
// seq instead of past the reservation, and a session never prompted leaves no marker behind.
// Its events from here on (a journal made live again) are published once stored.
func (j *journal) dropBirth() {
	j.mu.Lock()
	drop := j.log.unbirth
	clean := drop != nil && j.log.owner && j.last == j.log.durable && j.log.inflight == 0 && len(j.log.pending) == 0
	if clean {
		j.log.reserve, j.log.unbirth = nil, nil
	}
	j.mu.Unlock()
	if clean {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		_ = drop(ctx) // refused when a lease holder's marker replaced it: then it is not ours
		cancel()
	}
}

// sync makes a journal opened from the store mirror the stored log, once.
func (j *journal) sync(ctx context.Context) {
	j.mu.Lock()
	st, need := j.log.st, j.log.needSync
	j.mu.Unlock()
	if !need || st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	last, err := st.LastEventSeq(ctx, j.sid)
	if err != nil {
		return // tried again at the next use
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.log.needSync || j.closed {
		return
	}
	j.log.needSync, j.log.aligned = false, true
	j.gen = storedGeneration
	j.resetLocked(last, j.last > 0)
}

// startFollowLocked runs the follower while a journal with a store has subscribers.
func (j *journal) startFollowLocked() {
	if j.log.st == nil || j.log.following || j.closed || len(j.subs) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.log.following, j.log.stop = true, cancel
	go j.follow(ctx, j.log.st)
}

func (j *journal) stopFollowLocked() {
	if j.log.stop != nil {
		j.log.stop()
		j.log.stop = nil
	}
}

// follow reads the stored log after each change hint until stopped.
func (j *journal) follow(ctx context.Context, st store.Store) {
	defer func() {
		j.mu.Lock()
		j.log.following = false
		j.mu.Unlock()
	}()
	var sub *store.Subscription
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		var err error
		if sub, err = st.Watch(ctx, store.Interest{Sessions: []string{j.sid}}); err == nil {
			break
		}
		if errors.Is(err, store.ErrClosed) {
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
	defer sub.Close()
	for {
		j.refresh(ctx, st) // first for what was stored before the watch began
		select {
		case _, ok := <-sub.C():
			if !ok {
				return
			}
			sub.Take() // a hint, or Lost: either way, read on from the cursor
		case <-ctx.Done():
			return
		}
	}
}

// refresh reads what the stored log has after this journal's stored cursor into the journal.
// Events that arrive while this journal owns the log were written by another process: it lost
// the log, and follows it from then on.
func (j *journal) refresh(ctx context.Context, st store.Store) {
	j.sync(ctx)
	for {
		j.mu.Lock()
		if !j.log.aligned || j.closed || j.log.inflight > 0 {
			j.mu.Unlock()
			return
		}
		after := j.log.durable
		j.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, storeTimeout)
		evs, err := st.EventsSince(rctx, j.sid, after, followBatch)
		cancel()
		if err != nil || len(evs) == 0 {
			return
		}
		j.mu.Lock()
		if j.closed || !j.log.aligned || j.log.durable != after || j.log.inflight > 0 {
			j.mu.Unlock()
			continue // our own flush (or a reset) moved the cursor: look again from there
		}
		if j.log.owner {
			// Our own events, stored by a write whose answer was lost (a database restart)
			// and not written again yet, are stored: the log is still ours.
			if k := j.oursLocked(evs); k > 0 {
				j.log.durable = evs[k-1].Seq
				j.log.pending = slices.DeleteFunc(j.log.pending, func(e Event) bool { return e.Seq <= j.log.durable })
				j.wakeLocked()
				j.mu.Unlock()
				continue
			}
			// Another process wrote the log while this one owned it: a holder that took the
			// session over, or the last writer between leases. Events numbered here and not
			// stored are forgotten (what a client saw of them is past the seqs it resumes at).
			logf, lost := j.debug, j.last-j.log.durable
			if lost > 0 && j.log.fence != 0 {
				logf = j.warn // a lease holder's events, not a between-leases hand-over
			}
			if logf != nil {
				logf("session event log: another process wrote the log; this process follows it from now on", "session_id", j.sid,
					"stored_seq", after, "their_first_seq", evs[0].Seq, "their_generation", evs[0].Generation, "fence", j.log.fence, "forgotten", lost)
			}
			j.log.owner, j.log.fence, j.log.reserve, j.log.unbirth = false, 0, nil, nil
			if j.last > j.log.durable {
				j.forgetLocked()
			}
		}
		for _, se := range evs {
			j.pushLocked(loadedEvent(j.sid, se))
		}
		j.log.durable = j.last
		j.wakeLocked()
		j.mu.Unlock()
		if len(evs) < followBatch {
			return
		}
	}
}

// oursLocked counts the stored events at the start of evs that are this owner's own pending
// events, as it numbered them: same seq, type, turn, text and payload, written under its fence
// or before any (the birth reservation's). Called with mu held.
func (j *journal) oursLocked(evs []store.StoredEvent) int {
	k := 0
	for _, se := range evs {
		i := slices.IndexFunc(j.log.pending, func(e Event) bool { return e.Seq == se.Seq })
		if i < 0 || !writtenAs(se, storedEvent(j.log.pending[i]), j.log.fence) {
			break
		}
		k++
	}
	return k
}

// pushLocked adds an event that already has its seq to the window.
func (j *journal) pushLocked(e Event) {
	if len(j.events) > 0 && e.Seq != j.last+1 {
		// A gap in the stored log (a holder took over past a dead one's reserved seqs): the
		// window holds contiguous seqs, so it restarts here; older ones are read from the store.
		clear(j.events)
		j.events = j.events[:0]
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
	j.last = e.Seq
}

// fromStore reads up to max (0: a window) stored events after since.
func (j *journal) fromStore(ctx context.Context, st store.Store, since uint64, max int) ([]Event, error) {
	if max <= 0 || max > j.window {
		max = j.window
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	evs, err := st.EventsSince(ctx, j.sid, since, max)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(evs))
	for i, se := range evs {
		out[i] = loadedEvent(j.sid, se)
	}
	return out, nil
}

// storedEvent is e as the log stores it.
func storedEvent(e Event) store.StoredEvent {
	se := store.StoredEvent{Seq: e.Seq, Type: string(e.Type), Time: e.Time, TurnID: e.TurnID, Text: e.Text}
	if e.Data != nil {
		if b, err := json.Marshal(e.Data); err == nil && string(b) != "null" {
			se.Data = b
		} else if err != nil {
			b, _ = json.Marshal(ErrorInfo{Message: "payload not stored: " + err.Error()})
			se.Data = b
		}
	}
	return se
}

// loadedEvent is a stored event as the journal publishes it: its payload decoded into the
// type its event type carries (payloadTypes), or a SurfaceEvent for a type raised by a surface.
func loadedEvent(sid string, se store.StoredEvent) Event {
	e := Event{Seq: se.Seq, Type: EventType(se.Type), SessionID: sid, TurnID: se.TurnID, Time: se.Time, Text: se.Text}
	if len(se.Data) == 0 {
		return e
	}
	if dec, ok := payloadTypes[e.Type]; ok {
		if d, err := dec(se.Data); err == nil {
			e.Data = d
			return e
		}
	}
	var m SurfaceEvent
	if err := json.Unmarshal(se.Data, &m); err == nil {
		e.Data = m
	}
	return e
}

func decodeAs[T EventData](b []byte) (EventData, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// payloadTypes maps each event type the engine raises to its payload type. An event type
// added to the engine adds its line here, or followers see its payload as a SurfaceEvent.
var payloadTypes = map[EventType]func([]byte) (EventData, error){
	EvSessionInfo:      decodeAs[Info],
	EvSessionTitle:     decodeAs[Info],
	EvModelChanged:     decodeAs[Info],
	EvSessionClosed:    decodeAs[SessionClosed],
	EvStatus:           decodeAs[StatusInfo],
	EvMessageStart:     decodeAs[TurnStart],
	EvMessageComplete:  decodeAs[Outcome],
	EvToolGenerating:   decodeAs[ToolGenerating],
	EvToolStart:        decodeAs[ToolStart],
	EvToolProgress:     decodeAs[ToolProgress],
	EvToolComplete:     decodeAs[ToolComplete],
	EvRequestOpen:      decodeAs[Request],
	EvRequestCancel:    decodeAs[RequestCancel],
	EvRequestResolved:  decodeAs[RequestResolved],
	EvSteerDelivered:   decodeAs[SteerDelivered],
	EvQueueUpdated:     decodeAs[QueueInfo],
	EvPolicyDecision:   decodeAs[PolicyDecision],
	EvSubagentStart:    decodeAs[SubagentInfo],
	EvSubagentDone:     decodeAs[SubagentInfo],
	EvSubagentSpawn:    decodeAs[SubagentInfo],
	EvSubagentProgress: decodeAs[SubagentInfo],
	EvSubagentTool:     decodeAs[SubagentInfo],
	EvUsage:            decodeAs[UsageInfo],
	EvError:            decodeAs[ErrorInfo],
	EvTerminalOutput:   decodeAs[TerminalOutput],
	EvTerminalClose:    decodeAs[TerminalOutput],
}
