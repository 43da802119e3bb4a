package runsapi

import (
	"context"
	"slices"

	"github.com/hermes-go/hermes/engine"
)

// remoteApprovals finds what a run another process runs waits on: the approvals its session's
// durable events show opened and not yet resolved, withdrawn or ended with their turn. It
// returns the session they are answered through (Session.Answer sends an answer to the process
// holding the session's lease) and their ids, oldest first: only requestID when it is set,
// every one with all, else the first.
func (rs *Runs) remoteApprovals(ctx context.Context, r *run, requestID string, all bool) (*engine.Session, []string) {
	r.mu.Lock()
	final := r.final
	r.mu.Unlock()
	if final {
		return nil, nil
	}
	if rec, err := rs.ledger.Get(ctx, r.id); err != nil || rec.Status != recRunning || rs.ledger.Unknown(ctx, rec) {
		return nil, nil
	}
	sess, err := rs.eng.Open(ctx, r.sessionID)
	if err != nil {
		return nil, nil
	}
	evs, ok := sess.EventsSince(0)
	if !ok {
		return nil, nil
	}
	var open []engine.Request
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case engine.Request:
			if d.Kind == engine.KindApproval {
				open = append(open, d)
			}
		case engine.RequestResolved:
			open = slices.DeleteFunc(open, func(q engine.Request) bool { return q.ID == d.ID })
		case engine.RequestCancel:
			open = slices.DeleteFunc(open, func(q engine.Request) bool { return q.ID == d.ID })
		case engine.Outcome, engine.Takeover:
			open = slices.DeleteFunc(open, func(q engine.Request) bool { return q.TurnID == ev.TurnID })
		}
	}
	var ids []string
	for _, q := range open {
		if requestID != "" && q.ID != requestID {
			continue
		}
		ids = append(ids, q.ID)
		if !all {
			break
		}
	}
	return sess, ids
}

// remoteSession opens the session of a run another process executes, while it runs there (nil
// otherwise): a steer or an interrupt through it reaches the process holding the session's
// lease.
func (rs *Runs) remoteSession(ctx context.Context, r *run) *engine.Session {
	rec, err := rs.ledger.Get(ctx, r.id)
	if err != nil || rec.Status != recRunning || rs.ledger.Unknown(ctx, rec) {
		return nil
	}
	sess, err := rs.eng.Open(ctx, r.sessionID)
	if err != nil {
		return nil
	}
	return sess
}
