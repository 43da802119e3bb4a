package runs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Lanes is this process's side of every session's FIFO: one worker per session with unsettled
// runs, started or woken by Kick (an admission here, a FIFO changed anywhere) and woken by Wake
// (a run record changed). A worker follows its FIFO's head and hands it to the surface: a
// queued head this process admitted (or whose admitter is gone) is started, a head running
// here is waited for (and its settlement written again if that write was lost), a head another
// process admitted or runs is watched, and a restart-unknown head blocks the FIFO until it is
// resolved. A worker exits when its FIFO is empty. When ctx ends, each worker settles the
// queued runs this process admitted to its session through StopQueued, then exits.
type Lanes struct {
	l   *Ledger
	ctx context.Context
	log *slog.Logger
	h   LaneFuncs
	wg  sync.WaitGroup

	relisting atomic.Bool // a relist is pending

	mu      sync.Mutex
	workers map[string]chan struct{} // session id → its worker's wake-up (buffered 1)
}

// LaneFuncs are the surface's parts of a session's lane, each called by the session's worker
// with the FIFO's head.
type LaneFuncs struct {
	// Start starts a queued head (submitting it with a claim of the run) and follows it to
	// its end, or settles it when its start fails.
	Start func(Record)
	// Watch refreshes the surface's view of a head another process admitted or runs.
	Watch func(Record)
	// Local is given a head running in this process. When the run has ended, Local writes its
	// settlement again (that write was lost) and reports whether it landed; otherwise it
	// returns a channel closed when the run ends. The head is looked at again then, or in a
	// second.
	Local func(Record) (settled bool, done <-chan struct{})
	// StopQueued settles a queued head this process admitted as interrupted (the process is
	// stopping); false leaves it and what is behind it.
	StopQueued func(Record) bool
	// Viewed is asked, when a run's record changed, about the surface's view of that run: ok
	// is false when it has none (the run's session's worker reads the record if it must);
	// otherwise sessionID is the run's session, and follow reports whether the view follows
	// the record (the run is neither settled nor executed by this process): the record is
	// then read and given to Watch.
	Viewed func(runID string) (sessionID string, follow, ok bool)
}

// NewLanes returns the lanes of this ledger's process; their workers stop when ctx ends.
func NewLanes(ctx context.Context, l *Ledger, log *slog.Logger, h LaneFuncs) *Lanes {
	return &Lanes{l: l, ctx: ctx, log: log, h: h, workers: map[string]chan struct{}{}}
}

// Follow subscribes to the ledger's change hints (the subscription is in place when it
// returns) and applies them until ctx ends; Wait waits for that too.
func (ls *Lanes) Follow() error {
	follow, err := ls.l.Follow(ls.ctx)
	if err != nil {
		return err
	}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		follow(ls.apply)
	}()
	return nil
}

// apply applies change hints: a changed FIFO wakes (or starts) its session's worker, a changed
// record refreshes the surface's view of it, and lost hints re-read every unsettled record.
func (ls *Lanes) apply(changes []Change) {
	for _, ch := range changes {
		switch {
		case ch.All:
			// Hints were lost (the store restarted, say): every record this process may have
			// missed a change of is read again, settled ones included, so that no view here
			// keeps a status the record left behind.
			recs, err := ls.l.List(ls.ctx, nil)
			if err != nil {
				ls.relist()
				continue
			}
			for _, rec := range recs {
				if !rec.Settled() {
					ls.h.Watch(rec)
					continue
				}
				if sessionID, follow, ok := ls.h.Viewed(rec.RunID); ok {
					if follow {
						ls.h.Watch(rec)
					}
					ls.Wake(sessionID)
				}
			}
		case ch.SessionID != "":
			ls.Kick(ch.SessionID)
		case ch.RunID != "":
			sessionID, follow, ok := ls.h.Viewed(ch.RunID)
			if !ok {
				continue // nobody here asked about it; its session's worker will if it must
			}
			if follow {
				if rec, err := ls.l.Get(ls.ctx, ch.RunID); err == nil {
					ls.h.Watch(rec)
				}
			}
			// A settlement moves the FIFO on without rewriting it: wake the session's worker.
			ls.Wake(sessionID)
		}
	}
}

// relist reads every record again in a second (the store did not answer the read a lost hint
// asked for); one such retry is pending at a time, and none once ctx ended.
func (ls *Lanes) relist() {
	if ls.ctx.Err() != nil || !ls.relisting.CompareAndSwap(false, true) {
		return
	}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ls.ctx.Done():
			return
		}
		ls.relisting.Store(false)
		ls.apply([]Change{{All: true}})
	}()
}

// Kick wakes the worker of a session's FIFO, starting one when it has none (not once ctx
// ended).
func (ls *Lanes) Kick(sessionID string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if w, ok := ls.workers[sessionID]; ok {
		wake(w)
		return
	}
	if ls.ctx.Err() != nil {
		return
	}
	w := make(chan struct{}, 1)
	ls.workers[sessionID] = w
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		ls.drain(sessionID, w)
	}()
}

// Wake wakes the worker of a session's FIFO, if it has one.
func (ls *Lanes) Wake(sessionID string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if w, ok := ls.workers[sessionID]; ok {
		wake(w)
	}
}

func wake(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Busy reports whether a session's FIFO has a worker here (it has unsettled runs).
func (ls *Lanes) Busy(sessionID string) bool {
	if sessionID == "" {
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	_, ok := ls.workers[sessionID]
	return ok
}

// Hold marks a session's FIFO as having a worker without starting one, until release is
// called; it is for tests of what a busy lane keeps.
func (ls *Lanes) Hold(sessionID string) (release func()) {
	w := make(chan struct{}, 1)
	ls.mu.Lock()
	ls.workers[sessionID] = w
	ls.mu.Unlock()
	return func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.workers[sessionID] == w {
			delete(ls.workers, sessionID)
		}
	}
}

// Wait waits for the workers to exit; call it after ctx ended.
func (ls *Lanes) Wait() { ls.wg.Wait() }

// drain is the worker of one session's FIFO.
func (ls *Lanes) drain(sessionID string, w chan struct{}) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	proc := ls.l.Process()
	for {
		if ls.ctx.Err() != nil {
			ls.stop(sessionID)
			ls.mu.Lock()
			delete(ls.workers, sessionID)
			ls.mu.Unlock()
			return
		}
		head, ok, err := ls.l.Head(ls.ctx, sessionID)
		if err != nil && ls.ctx.Err() == nil {
			ls.log.Warn("runs: reading a session's FIFO failed", "session_id", sessionID, "err", err)
		}
		if err == nil && !ok {
			ls.mu.Lock()
			select {
			case <-w: // an admission arrived meanwhile: look again
				ls.mu.Unlock()
				continue
			default:
			}
			delete(ls.workers, sessionID)
			ls.mu.Unlock()
			return
		}
		var recheck time.Time
		var done <-chan struct{}
		switch {
		case err != nil:
			recheck = time.Now().Add(time.Second)
		case head.Status == Queued && (head.Admitter == proc || !ls.l.Alive(ls.ctx, head.Admitter)):
			ls.h.Start(head)
			continue
		case head.Status == Queued:
			ls.h.Watch(head)
			recheck = ls.l.Recheck(ls.ctx, head.Admitter) // its admitter starts it
		case head.Process == proc:
			// Running here, or settled here without the store (or the FIFO) knowing.
			settled, d := ls.h.Local(head)
			if settled {
				continue
			}
			done, recheck = d, time.Now().Add(time.Second)
		default:
			ls.h.Watch(head)
			recheck = ls.l.Recheck(ls.ctx, head.Process)
		}
		var tc <-chan time.Time
		if !recheck.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(recheck))
			} else {
				timer.Reset(time.Until(recheck))
			}
			tc = timer.C
		}
		select {
		case <-w:
		case <-done:
		case <-tc:
		case <-ls.ctx.Done():
		}
		if timer != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// stop settles the queued runs this process admitted to a session, from the FIFO's head, as
// interrupted (the process is stopping). A head another process admitted or runs is left to
// it, and so is what is behind it.
func (ls *Lanes) stop(sessionID string) {
	ctx := context.WithoutCancel(ls.ctx)
	for {
		head, ok, err := ls.l.Head(ctx, sessionID)
		if err != nil || !ok || head.Status != Queued || head.Admitter != ls.l.Process() {
			return
		}
		if !ls.h.StopQueued(head) {
			return
		}
	}
}
