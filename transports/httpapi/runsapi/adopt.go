package runsapi

import (
	"context"

	"github.com/hermes-go/hermes/engine"
)

// Runs is the engine's Adopter (engine/adopt.go): when this process takes a session over from
// a process that went away while the session's run waited for an approval, the run moves here
// with its turn — the same approval open again, answerable through any process — and this
// process follows the turn and settles the run. The ledger's lapse check asks for it first
// (adoptRun), so a parked run is adopted, not declared restart-unknown.

// Adopt moves the run of turn tk.TurnID to this process and lease generation (a
// compare-and-set on its record); false leaves the turn restart-unknown.
func (rs *Runs) Adopt(ctx context.Context, tk engine.Takeover) bool {
	head, ok, err := rs.ledger.Head(ctx, tk.SessionID)
	if err != nil || !ok || head.TurnID != tk.TurnID {
		return false
	}
	// Not mirror: reading the record's liveness would ask the ledger to adopt it, from inside
	// the takeover that is adopting it.
	rs.mu.Lock()
	r, known := rs.m[head.RunID]
	if !known {
		r = newRun(head, runRunning)
		rs.addLocked(r)
	}
	rs.mu.Unlock()
	r.mu.Lock()
	r.adopting = true // the lane finds it started here, not a claim that never started
	r.mu.Unlock()
	rec, err := rs.ledger.Adopt(ctx, tk.SessionID, tk.TurnID, tk.PreviousGeneration, tk.Generation)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.adopting = false
		return false
	}
	r.rec, r.here = rec, true
	rs.mu.Lock()
	if rs.adopted == nil {
		rs.adopted = map[string]*run{}
	}
	rs.adopted[tk.SessionID] = r
	rs.mu.Unlock()
	return true
}

// Adopted follows the adopted turn to its end and settles the run, as for a run started here.
// The run is the one Adopt moved here, not read again from the ledger: a read that failed
// now would leave a run this process executes with nobody following it.
func (rs *Runs) Adopted(sess *engine.Session, f *engine.Follow) {
	rs.mu.Lock()
	r := rs.adopted[sess.ID()]
	delete(rs.adopted, sess.ID())
	rs.mu.Unlock()
	if r == nil {
		f.Close() // not a run of ours: the turn goes on, nobody settles a run for it
		return
	}
	r.mu.Lock()
	tr := rs.host.AdoptedTurn(sess, f, r.rec.TurnID)
	r.sess, r.turn = sess, tr
	if r.view.turn == "" {
		r.view.turn = r.rec.TurnID
	}
	r.adoptedLocked()
	if r.wake != nil {
		r.wake() // the goroutine deriving the log leaves it to the follower
	}
	r.mu.Unlock()
	rs.log.Warn("runs: adopted a run waiting for an approval from a process that went away", "run_id", r.id, "session_id", sess.ID(), "turn_id", tr.ID())
	rs.streams.Add(1)
	go func() {
		defer rs.streams.Done()
		// The log goes on from what the previous holder stored, as every other process
		// derives it: the record's events, then the turn's stored ones (the request it waited
		// at among them), then what the turn does here, those already taken skipped.
		r.mu.Lock()
		r.prefixLocked()
		r.mu.Unlock()
		rs.catchUp(rs.ctx, r, sess)
		if rs.slots != nil {
			select {
			case rs.slots <- struct{}{}:
			case <-rs.ctx.Done():
				tr.Close("shutdown")
				return
			}
		}
		rs.follow(r, sess, tr)
	}()
}

// adoptedLocked marks a run this process executes from now on, its turn adopted: running,
// unless its log already shows it waiting. This process may have been deriving the run's log
// until now, and have taken the turn's request, opened again by the adoption, before the
// follower started: the follower skips events already taken, so only that status says it
// waits. Called with r.mu held.
func (r *run) adoptedLocked() {
	if !terminal(r.status) && r.status != runWaiting {
		r.status = runRunning
	}
}

// adoptRun is the ledger's way to adopt a run whose lease is gone (runs.AdoptFunc): it takes
// the run's session over through the engine, which adopts the turn when it is parked at an
// approval (Adopt above). It reports whether the run runs under a live lease again, and
// whether another process holds the session instead.
func (rs *Runs) adoptRun(ctx context.Context, rec runRecord) (adopted, elsewhere bool) {
	sess, err := rs.eng.Open(ctx, rec.SessionID)
	if err != nil {
		return false, false
	}
	held, err := sess.Adopt(ctx)
	if err != nil || !held {
		return false, err == nil
	}
	cur, err := rs.ledger.Get(ctx, rec.RunID)
	return err == nil && cur.Status == recRunning && !cur.Lapsed && cur.LeaseGeneration != rec.LeaseGeneration, false
}
