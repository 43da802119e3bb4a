package runsapi

import (
	"context"
	"errors"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// A run's event log is derived from durable data only, so it is the same in every process
// sharing the store — same events, same ids, same order — and a client that reconnects with
// Last-Event-ID to another process resumes exactly after the last event it saw:
//
//   - run.queued (when runs were ahead of it at admission) and run.started, from the run's
//     ledger record;
//   - the events of the run's turn, from the session's durable event log, translated by
//     translate: what the process executing the run reads from its turn, every other process
//     reads from the store;
//   - run.unknown and the terminal event, from the record.
//
// An answer, a steer or a stop that a handler accepts adds no event of its own: the session
// events they cause (request.resolved, steer.delivered, the interrupted outcome) are what the
// log shows.

// turnView picks, from a session's events in seq order, those of one turn as engine.Follow
// passes them for a turn it started: the turn's own, and once it has started the session's
// turn-less events and every request.open (a delegated sub-agent's). It ends at the turn's
// message.complete, or at a takeover of the session once the turn started or naming the turn
// (the process running it is gone), unless the takeover adopted the turn.
type turnView struct {
	turn string // "": the first turn event names it (a turn started by the lease holder)
	live bool
	done bool
}

func (v *turnView) accept(ev engine.Event) bool {
	if v.done {
		return false
	}
	if ev.Type == engine.EvTakeover {
		// A takeover carries the turn it is about (the newest row's): this one when its
		// process went away mid-turn. Only an adopted turn goes on (adopt.go).
		mine := v.turn != "" && ev.TurnID == v.turn
		if tk, ok := ev.Data.(engine.Takeover); ok && tk.Adopted && mine {
			v.live = true
			return false
		}
		v.done = v.live || mine
		return false
	}
	if v.turn == "" && ev.TurnID != "" && ev.Type == engine.EvMessageStart {
		v.turn = ev.TurnID
	}
	if v.turn != "" && ev.TurnID == v.turn {
		v.live = true
		v.done = ev.Type == engine.EvMessageComplete
		return true
	}
	return v.live && (ev.TurnID == "" || ev.Type == engine.EvRequestOpen)
}

// statusOnly is what translate returns as the name of an event that changes the run's status
// but adds nothing to its log.
const statusOnly = ""

// translate is the one mapping of a turn's session events to run events, used by the process
// executing a run and by every other one. ok is false for an event the log leaves out; a
// statusOnly name with a status changes only the status.
func (rs *Runs) translate(ev engine.Event, sess *engine.Session) (name, status string, fields map[string]any, ok bool) {
	switch ev.Type {
	case engine.EvMessageDelta:
		if ev.Text != "" {
			return "message.delta", "", map[string]any{"delta": ev.Text}, true
		}
	case engine.EvToolStart:
		if ts, ok := ev.Data.(engine.ToolStart); ok {
			return "tool.started", "", map[string]any{"tool": ts.Name, "preview": rs.host.ToolLabel(ts.Args), "call_id": ts.CallID}, true
		}
	case engine.EvToolComplete:
		if tc, ok := ev.Data.(engine.ToolComplete); ok {
			return "tool.completed", "", map[string]any{"tool": tc.Name, "call_id": tc.CallID, "duration": float64(tc.Duration.Milliseconds()) / 1000, "error": tc.Result.IsError || tc.Blocked}, true
		}
	case engine.EvRequestOpen:
		if q, ok := ev.Data.(engine.Request); ok && q.Kind == engine.KindApproval {
			return "approval.request", runWaiting, approvalFields(q), true
		}
	case engine.EvRequestResolved:
		if d, ok := ev.Data.(engine.RequestResolved); ok && d.Kind == engine.KindApproval {
			choice, _ := d.Answer["choice"].(string)
			return "approval.responded", runRunning, map[string]any{"choice": choice, "request_id": d.ID, "resolved": 1}, true
		}
		return statusOnly, runRunning, nil, true
	case engine.EvRequestCancel:
		return statusOnly, runRunning, nil, true
	case engine.EvSteerDelivered:
		return "run.steered", "", map[string]any{"accepted": true}, true
	case engine.EvStatus:
		if name, fields, ok := wire.CompactionEvent(ev, sess); ok {
			return name, "", fields, true
		}
	}
	return "", "", nil, false
}

// take hands one session event to the run's log. Events are taken in seq order by one
// goroutine at a time (the run's worker here, or its deriving goroutine); one already taken is
// skipped.
func (rs *Runs) take(r *run, sess *engine.Session, ev engine.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Seq != 0 {
		if ev.Seq <= r.cursor {
			return
		}
		r.cursor = ev.Seq
	}
	if !r.view.accept(ev) {
		return
	}
	name, status, fields, ok := rs.translate(ev, sess)
	if ok && status == runWaiting {
		r.approval = approvalFields(ev.Data.(engine.Request)) // what GET shows while it waits
	}
	switch {
	case !ok:
	case name == statusOnly:
		if status == runRunning && r.status == runWaiting {
			r.status = runRunning
		}
	default:
		if status == runRunning && r.status != runWaiting {
			status = "" // an answer does not undo a stop
		}
		r.emitLocked(name, status, fields, ev.Time)
	}
}

// prefixLocked adds the events the record says come before the turn's: run.queued, and
// run.started once the run was claimed. Each is added once. Called with mu held.
func (r *run) prefixLocked() {
	if !r.queuedSent {
		r.queuedSent = true
		if r.rec.Ahead > 0 {
			r.emitLocked("run.queued", "", map[string]any{"session_id": r.sessionID, "ahead": r.rec.Ahead}, r.rec.CreatedAt)
		}
	}
	if !r.startedSent && r.rec.Generation > 0 {
		r.startedSent = true
		r.emitLocked("run.started", "", map[string]any{"session_id": r.sessionID}, r.rec.StartedAt)
	}
}

// executedHere reports whether this process's worker writes the run's log. Called with mu held.
func (rs *Runs) executedHereLocked(r *run) bool {
	return r.here || (r.rec.Process == rs.ledger.Process() && !r.rec.Settled())
}

// derive starts, once, the goroutine that writes the log of a run this process does not
// execute (see the top of this file).
func (rs *Runs) derive(r *run) {
	r.mu.Lock()
	if r.deriving || r.final || rs.executedHereLocked(r) {
		r.mu.Unlock()
		return
	}
	r.deriving = true
	r.mu.Unlock()
	rs.streams.Add(1)
	go func() {
		defer rs.streams.Done()
		rs.deriveLog(r)
		r.mu.Lock()
		r.deriving, r.wake = false, nil
		r.mu.Unlock()
	}()
}

// deriveLog writes the log of a run another process executes, as its record and its session's
// stored events go, until the run settles or this process executes it.
func (rs *Runs) deriveLog(r *run) {
	var sess *engine.Session
	var sub *engine.Subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	var buf []engine.Event
	warned := false
	for rs.ctx.Err() == nil {
		ctx, cancel := context.WithCancel(rs.ctx)
		r.mu.Lock()
		r.wake = cancel // refresh wakes this loop when the record changes
		if r.final || rs.executedHereLocked(r) {
			r.mu.Unlock()
			cancel()
			return
		}
		r.prefixLocked()
		rec, unknown := r.rec, r.status == runUnknown
		if sess == nil && rec.TurnID != "" && r.view.turn == "" {
			r.view.turn = rec.TurnID
		}
		r.mu.Unlock()
		if sess == nil && rec.TurnID != "" {
			// Not ctx: a wake-up (the record changed) must not cut the opening short, or a
			// settled run's log would end without its turn.
			s, err := rs.eng.Open(rs.ctx, r.sessionID)
			switch {
			case err == nil:
				sess, sub = s, s.Subscribe(rec.EventFloor)
			case rs.ctx.Err() != nil:
				cancel()
				return
			case errors.Is(err, engine.ErrSessionNotFound):
				// Deleted: there is no turn to read, the record's events are the log.
			default:
				if !warned {
					warned = true
					rs.log.Warn("runs: opening the session of a run another process executes failed; trying again", "run_id", r.id, "err", err)
				}
				select { // the log needs the turn's events: try again in a while
				case <-time.After(time.Second):
				case <-rs.ctx.Done():
				}
				cancel()
				continue
			}
		}
		if rec.Settled() || unknown {
			if sess != nil {
				rs.catchUp(rs.ctx, r, sess)
			}
			r.mu.Lock()
			if unknown || wasUnknown(rec) {
				r.unknownLocked(rec)
			}
			n, cur, v := len(r.events), r.cursor, r.view
			r.mu.Unlock()
			if rec.Settled() {
				cancel()
				rs.log.Debug("runs: derived the log of a settled run", "run_id", r.id, "events", n, "cursor", cur,
					"floor", rec.EventFloor, "turn", v.turn, "live", v.live, "turn_done", v.done, "session_open", sess != nil)
				r.finish(rec, true, rec.Status, rec.Result)
				return
			}
		}
		if sub != nil && !unknown {
			var err error
			buf, err = sub.NextBatch(ctx, buf[:0])
			for _, ev := range buf {
				rs.take(r, sess, ev)
			}
			if errors.Is(err, engine.ErrLagged) || errors.Is(err, engine.ErrJournalClosed) {
				sub.Close()
				r.mu.Lock()
				cur := r.cursor
				r.mu.Unlock()
				sub = sess.Subscribe(max(cur, rec.EventFloor))
				if errors.Is(err, engine.ErrJournalClosed) {
					<-ctx.Done() // the session was released: wait for the record
				}
			}
		} else {
			<-ctx.Done()
		}
		cancel()
	}
}

// catchUp takes the turn's events the store holds. The run settled (or went restart-unknown)
// after its turn's last event was stored, so what the store holds now is all of the turn there
// will ever be, and reading it from the store to its end makes this log the one every process
// derives, whatever this process's copy of the session holds: a read that fails (a store
// outage, this process stopped for a while) is tried again until it succeeds; only ctx's end
// (the server's shutdown, or the bound of a settlement's wait) ends the wait.
func (rs *Runs) catchUp(ctx context.Context, r *run, sess *engine.Session) {
	wait := 50 * time.Millisecond
	for {
		r.mu.Lock()
		cur, done := max(r.cursor, r.rec.EventFloor), r.view.done
		r.mu.Unlock()
		if done {
			return
		}
		evs, err := sess.StoredEvents(ctx, cur)
		for _, ev := range evs {
			rs.take(r, sess, ev)
		}
		switch {
		case err == nil && len(evs) == 0:
			return // the stored log ends here
		case err == nil:
			continue
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		wait = min(2*wait, 2*time.Second)
	}
}
