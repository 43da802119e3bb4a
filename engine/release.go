package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
	"weak"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/tool"
)

// ReleaseIdle lets go of live sessions nobody is using, so a long-running server's memory
// follows the conversations in progress rather than every conversation it ever served. It
// returns how many sessions it released.
//
// A session is released when all of these hold:
//   - it is idle: no turn runs, no follow-up is queued, no request (approval, clarify, ...)
//     is open, no sub-agent runs, no background process runs;
//   - nobody watches it: no subscriber is attached;
//   - it was last used (created, opened, Live, prompted, a turn ended, a subscriber came or
//     went) at least idleFor ago (idleFor <= 0: any time);
//   - it holds nothing that lives only in memory and would be lost: it is stored (a lazy
//     session that never got a prompt is kept), it has no session-scoped approvals ("allow
//     for this session" answers are not persisted; "always" ones are, in the store), no tool
//     state (the todo list), no steer held for its next turn, and no tools or file system
//     lent by a surface;
//   - keep (nil keeps nothing) returns false. keep runs without engine locks held and may call
//     the session's methods (Engine.Open and Live count as activity: the session is then not
//     released); a surface uses it to release only the sessions it owns.
//
// Releasing drops the session from the live set and closes its event journal, without
// ending it: nothing is written to the store and nothing is emitted (there is no subscriber
// to tell). Engine.Open loads it again with its transcript, title, model and usage. What is
// lost is what only the live object held and nobody can still need: its journal (a new one
// starts, with a new Generation) and the records of background processes that exited. The
// outcomes Wait remembers for its last finished turns stay with the object (a few small
// records, kept only while something holds the handle), so a Wait that follows its Submit
// finds the outcome even when a release slipped in between.
//
// The checks and the removal happen under the engine lock and the session lock together, so
// a Submit, Subscribe, Open or Live either lands before the release (and prevents it) or finds
// the session gone. A released object stays a valid handle: Submit and Run on it, or Open of
// its id while something still holds it, make that same object live again (loaded again from
// the store, with a new journal), so no surface has to open a session again after a release.
// Until then, a Subscribe on it ends at once and Released reports true.
func (e *Engine) ReleaseIdle(idleFor time.Duration, keep func(*Session) bool) int {
	cutoff := monoNow() - int64(idleFor)
	n := 0
	e.mu.Lock()
	for id, w := range e.dormant {
		if w.Value() == nil { // nobody holds the released object any more
			delete(e.dormant, id)
		}
	}
	e.mu.Unlock()
	for _, s := range e.LiveSessions() {
		// Cheap pre-check first so keep is asked only about candidates; release checks again
		// under the locks.
		s.mu.Lock()
		ok := s.releasableLocked(cutoff)
		s.mu.Unlock()
		if !ok || (keep != nil && keep(s)) {
			continue
		}
		if e.release(s, cutoff) {
			n++
		}
	}
	return n
}

// Peek returns the live session with id without loading it and, unlike Live and Open,
// without counting as activity: it is for reading a session's state (its status, its record)
// in listings and reports, which a client may poll and which must not keep an idle session
// from being released. Use Open or Live for an object you are about to use.
func (e *Engine) Peek(id string) (*Session, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.live[id]
	return s, ok
}

// release drops s from the live set when it is still releasable.
func (e *Engine) release(s *Session, cutoff int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.live[s.id] != s {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.releasableLocked(cutoff) || !s.j.closeUnwatched(cutoff) {
		return false
	}
	s.closed, s.released, s.status = true, true, StatusClosed
	// What the transcript gives back is dropped with the journal: a held handle keeps its
	// record and its finished turns' outcomes until it is used again.
	s.toolState, s.restored = tool.State{}, nil
	s.forgetRows()
	delete(e.live, s.id)
	e.dormant[s.id] = weak.Make(s)
	return true
}

// revive makes a released object live again: its record is read again from the store (it
// may have changed while nobody held it live) and it gets a new journal. It does nothing on a
// live object, and fails when the session was deleted or another object of it is live.
func (s *Session) revive(ctx context.Context) error {
	if !s.Released() {
		return nil
	}
	rec, err := s.e.cfg.Store.GetSession(ctx, s.id)
	if errors.Is(err, store.ErrNotFound) || err == nil && deleted(rec) {
		return fmt.Errorf("%w: %q", ErrSessionNotFound, s.id)
	}
	if err != nil {
		return err
	}
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrEngineClosed
	}
	if cur, ok := e.live[s.id]; ok {
		if cur == s {
			return nil // revived meanwhile
		}
		return ErrSessionReleased
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		return s.closedErrLocked() // closed for good, not released
	}
	s.rec, s.closed, s.released, s.status = rec, false, false, StatusIdle
	s.j.reopen()
	e.live[s.id] = s
	delete(e.dormant, s.id)
	return nil
}

// lockLive makes a released handle live again and returns with s.mu held. The session is idle
// between the revival and the lock, so a release can slip in there: it is revived again.
func (s *Session) lockLive(ctx context.Context) error {
	for {
		if err := s.revive(ctx); err != nil {
			return err
		}
		s.j.touch()
		s.mu.Lock()
		if !s.closed || !s.released {
			return nil
		}
		s.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// releasableLocked reports whether the session is idle and holds no memory-only state (tool
// state a Restorer tool rebuilds from the transcript does not count), and
// was last active at or before cutoff (monoNow). Called with s.mu held.
func (s *Session) releasableLocked(cutoff int64) bool {
	return !s.closed && s.stored && s.turn == nil && s.queued == nil && len(s.requests) == 0 &&
		s.children == 0 && len(s.steers) == 0 && len(s.approved) == 0 && s.toolStateRestorable() &&
		s.j.active.Load() <= cutoff && !s.attached.lent() && !processRunning(s)
}

// lent reports whether a surface lent the session tools or a file system.
func (a *attachments) lent() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.tools) > 0 || a.fs != nil
}

// processRunning reports whether a background process of s has not exited.
func processRunning(s *Session) bool {
	for _, p := range s.procs.List() {
		select {
		case <-p.Done:
		default:
			return true
		}
	}
	return false
}

// closeUnwatched closes the journal and drops its events when no subscriber is attached and
// it was not touched after cutoff; it reports whether it did. Doing both under j.mu is what
// keeps a concurrent Subscribe from attaching to a journal that is about to close unseen.
func (j *journal) closeUnwatched(cutoff int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || len(j.subs) > 0 || j.active.Load() > cutoff {
		return false
	}
	j.closed = true
	// A stale holder of the session object must not keep the event window alive.
	j.events = nil
	return true
}
