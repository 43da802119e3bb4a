package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
)

// Adoption. A turn waiting for a person's approval is at a durable checkpoint: before asking,
// it stored the assistant's tool calls and the results of the calls before the one it asks
// about (turnState.checkpoint), and the request is in the session's event log. When its
// process goes away (killed, or cut off past its lease) the process that takes the session
// over can go on from there instead of declaring the turn restart-unknown: it opens the same
// request again (same id, same deadline), answerable from any process, and when it is
// answered runs the call (or not) and continues the turn. Nothing is granted on its own and
// no tool runs twice: a call that was answered, or had started, is not at a checkpoint.

// Adopter decides whether this engine adopts a turn it found at a checkpoint when it took a
// session over (Config.Adopter). The runs ledger uses it: a run's record moves to the adopting
// process in the same step, so exactly one process runs the turn and settles the run.
type Adopter interface {
	// Adopt is asked once the lease is this engine's (tk.Generation) and before anything else
	// uses the session; true adopts the turn tk.TurnID.
	Adopt(ctx context.Context, tk Takeover) bool
	// Adopted receives the session and a Follow of the adopted turn: its events from the
	// takeover on, its message.complete last. It must not block.
	Adopted(s *Session, f *Follow)
}

type adopterBox struct{ a Adopter }

// SetAdopter sets the Adopter after the engine was built (the runs ledger is opened on the
// engine's store, so it comes later); nil goes back to Config.Adopter.
func (e *Engine) SetAdopter(a Adopter) {
	if a == nil {
		e.adopter.Store(nil)
		return
	}
	e.adopter.Store(&adopterBox{a})
}

func (e *Engine) currentAdopter() Adopter {
	if b := e.adopter.Load(); b != nil {
		return b.a
	}
	return e.cfg.Adopter
}

// resumePoint is where an adopted turn goes on.
type resumePoint struct {
	calls []model.ToolCall // the batch's calls without a result, the one asked about first
	req   Request          // the approval request open on calls[0]
	p     *pendingRequest  // req, open again here; taken by the turn's approve
	used  bool             // approve took p (turn goroutine only)
}

// adoptedRequest returns the request an adopted turn opened again for call id, once.
func (t *turnState) adoptedRequest(callID string) *pendingRequest {
	r := t.resume
	if r == nil || r.used || r.p == nil || len(r.calls) == 0 || r.calls[0].ID != callID {
		return nil
	}
	r.used = true
	return r.p
}

// adoptedAt reports whether call id is the one an adopted turn was parked at.
func (t *turnState) adoptedAt(callID string) bool {
	return t.resume != nil && len(t.resume.calls) > 0 && t.resume.calls[0].ID == callID
}

// dropAdopted closes the request an adopted turn opened again when the turn ended before it
// reached it (interrupted first).
func (t *turnState) dropAdopted() {
	r := t.resume
	if r == nil || r.used || r.p == nil {
		return
	}
	r.used = true
	if t.s.takeRequest(r.req.ID) != nil {
		t.s.j.append(Event{Type: EvRequestCancel, TurnID: t.id, Data: RequestCancel{ID: r.req.ID, Kind: r.req.Kind, Reason: "interrupted"}})
	}
}

// checkpointOf reads, from the store, whether turn turnID is parked at a checkpoint: the
// transcript ends with the turn's assistant row and results for a prefix of its calls, and
// the session's event log has an approval open (not answered, withdrawn or expired) on the
// first call without a result. It also returns the turn's prompt and user row id.
func (s *Session) checkpointOf(ctx context.Context, turnID string) (cp resumePoint, prompt string, userRow uint64, ok bool) {
	if turnID == "" {
		return cp, "", 0, false
	}
	rows, err := s.e.cfg.Store.Rows(ctx, s.id, store.RowQuery{})
	if err != nil {
		return cp, "", 0, false
	}
	i := len(rows) - 1
	var done []string // results at the end, newest first
	for ; i >= 0 && rows[i].Role == "tool" && rows[i].TurnID == turnID; i-- {
		done = append(done, rows[i].ToolCallID)
	}
	if i < 0 || rows[i].Role != "assistant" || rows[i].TurnID != turnID || len(rows[i].ToolCalls) == 0 {
		return cp, "", 0, false
	}
	var calls []model.ToolCall
	if json.Unmarshal(rows[i].ToolCalls, &calls) != nil || len(done) >= len(calls) {
		return cp, "", 0, false
	}
	slices.Reverse(done)
	for k, id := range done {
		if calls[k].ID != id {
			return cp, "", 0, false
		}
	}
	for j := i - 1; j >= 0 && prompt == ""; j-- {
		if rows[j].TurnID == turnID && rows[j].Role == "user" {
			prompt, userRow = rows[j].Content, rows[j].ID
		}
	}
	if prompt == "" {
		return cp, "", 0, false
	}
	evs, evOK := s.EventsSince(0)
	if !evOK {
		return cp, "", 0, false
	}
	next := calls[len(done)].ID
	var open *Request
	asked := false // the approval policy said ask for the call: a request was (being) opened
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case PolicyDecision:
			if ev.TurnID == turnID && d.Hook == "approval" && d.CallID == next && d.Decision == policy.Ask {
				asked = true
			}
		case Request:
			if ev.Type == EvRequestOpen && d.TurnID == turnID && d.Kind == KindApproval && d.Payload["call_id"] == next {
				open = &d
			}
		case RequestResolved:
			if open != nil && d.ID == open.ID {
				return cp, "", 0, false // answered: the call may have started
			}
		case RequestCancel:
			if open != nil && d.ID == open.ID {
				open = nil
			}
		case ToolStart:
			if ev.TurnID == turnID && d.CallID != next && slices.ContainsFunc(calls[len(done):], func(c model.ToolCall) bool { return c.ID == d.CallID }) {
				return cp, "", 0, false // a later call of the batch started
			}
		}
	}
	switch {
	case open != nil:
		return resumePoint{calls: calls[len(done):], req: *open}, prompt, userRow, true
	case asked:
		// The request's open event did not reach the store before its process went away
		// (its answer would have: approve stores it before the call runs), so nothing was
		// answered and the call did not run: the call is asked about again, afresh.
		return resumePoint{calls: calls[len(done):]}, prompt, userRow, true
	}
	return cp, "", 0, false
}

// adopt goes on with a turn its previous holder left at a checkpoint, once the Adopter agreed:
// the takeover event says it was adopted, the request is open again, and the turn runs here
// from the call it was parked at. It reports whether the turn runs here.
func (h *heldLease) adopt(ctx context.Context, s *Session, tk Takeover) bool {
	a := h.e.currentAdopter()
	if a == nil || tk.TurnID == "" {
		return false
	}
	cp, prompt, userRow, ok := s.checkpointOf(ctx, tk.TurnID)
	if !ok {
		return false
	}
	s.mu.Lock()
	busy := s.closed || s.turn != nil // neither happens to a session whose lease was just taken
	s.mu.Unlock()
	if busy || !a.Adopt(ctx, tk) {
		return false
	}
	// From here the run is this process's: the turn starts whatever else happens.
	sub := s.Subscribe(s.LastSeq())
	s.mu.Lock()
	t := s.newTurnWithIDLocked(tk.TurnID, prompt, "", trace.SpanContext{})
	t.userRowID = userRow
	t.resume = &cp
	s.mu.Unlock()
	tk.Outcome, tk.Adopted = "", true
	h.e.log.WarnContext(ctx, "took a session over from a holder that did not release it; its turn was waiting for an approval and goes on here",
		"session_id", h.sid, "turn_id", tk.TurnID, "request_id", cp.req.ID, "call_id", cp.calls[0].ID, "previous_owner", tk.PreviousOwner, "generation", tk.Generation)
	s.j.append(Event{Type: EvTakeover, TurnID: tk.TurnID, Data: tk})
	if q := cp.req; q.ID != "" {
		q.Origin = ""
		p, err := s.openRequest(q)
		if err != nil {
			p = &pendingRequest{req: q, answer: make(chan map[string]any, 1), cancel: make(chan string, 1)}
			p.cancel <- err.Error()
		}
		cp.p = p
	}
	f := &Follow{s: s, sub: sub, t: t, live: true}
	s.startTurn(t)
	a.Adopted(s, f)
	return true
}

// Adopt takes the session's lease when no live process holds it, as any use of the session
// would: a turn its previous holder left parked at an approval is adopted here when the
// Adopter agrees (Config.Adopter), and is restart-unknown otherwise. held is false when
// another process holds the lease.
func (s *Session) Adopt(ctx context.Context) (held bool, err error) {
	if err := s.revive(ctx); err != nil {
		return false, err
	}
	h, err := s.hold(ctx)
	if elsewhere := (*heldElsewhere)(nil); errors.As(err, &elsewhere) {
		return false, nil
	}
	if err != nil || h == nil {
		return false, err
	}
	h.unpin()
	return true, nil
}
