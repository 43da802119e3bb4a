package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// Request kinds (server-to-client questions).
const (
	KindApproval = "approval"
	KindClarify  = "clarify"
	KindSudo     = "sudo"
	KindSecret   = "secret"
)

// Approval choices.
const (
	ChoiceOnce    = "once"
	ChoiceSession = "session"
	ChoiceAlways  = "always"
	ChoiceDeny    = "deny"
)

// Request is an open server-to-client question. Any subscriber of the session may answer it.
type Request struct {
	ID        string `json:"id"`
	Kind      string `json:"method"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id,omitempty"`
	// Origin is the surface that started the turn (Prompt.Origin), known in the process that
	// runs it; not part of the event's wire form, so a follower in another process sees "".
	Origin   string         `json:"-"`
	Payload  map[string]any `json:"params"`
	Created  time.Time      `json:"created"`
	Deadline time.Time      `json:"deadline"`
}

type pendingRequest struct {
	req    Request
	answer chan map[string]any // buffered 1; receives the answer
	cancel chan string         // buffered 1; receives a withdraw reason
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// validateAnswer checks an answer's shape for the request kind.
func validateAnswer(kind string, a map[string]any) error {
	switch kind {
	case KindApproval:
		c, _ := a["choice"].(string)
		if !slices.Contains([]string{ChoiceOnce, ChoiceSession, ChoiceAlways, ChoiceDeny}, c) {
			return fmt.Errorf("%w: approval needs choice once|session|always|deny", ErrInvalidAnswer)
		}
	case KindClarify:
		_, ok1 := a["answer"].(string)
		ok2 := false
		switch a["answers"].(type) {
		case []any, []string, map[string]any: // a list, or a batch keyed by question id
			ok2 = true
		}
		if !ok1 && !ok2 {
			return fmt.Errorf("%w: clarify needs answer (string) or answers (list or object)", ErrInvalidAnswer)
		}
	default:
		if _, ok := a["value"].(string); !ok {
			return fmt.Errorf("%w: %s needs value (string)", ErrInvalidAnswer, kind)
		}
	}
	return nil
}

// ask opens a request on the session and waits for the answer, the deadline, a withdraw, or
// ctx. Every way out other than an answer emits request.cancel so clients close their prompt.
func (s *Session) ask(ctx context.Context, turnID, kind string, payload map[string]any, timeout time.Duration) (map[string]any, error) {
	now := time.Now()
	p, err := s.openRequest(Request{
		ID: "srq-" + newID("")[:12], Kind: kind, SessionID: s.id, TurnID: turnID,
		Payload: payload, Created: now, Deadline: now.Add(timeout),
	})
	if err != nil {
		return nil, err
	}
	return s.await(ctx, p)
}

// openRequest registers q as open and publishes it (request.open). An adopted turn opens the
// request its first holder had open again, with the same id and deadline (adopt.go).
func (s *Session) openRequest(q Request) (*pendingRequest, error) {
	p := &pendingRequest{req: q, answer: make(chan map[string]any, 1), cancel: make(chan string, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrSessionClosed
	}
	if t := s.turns[q.TurnID]; t != nil {
		p.req.Origin = t.origin
	}
	s.requests[p.req.ID] = p
	s.setStatusLocked(StatusWaiting)
	s.mu.Unlock()
	seq := s.j.append(Event{Type: EvRequestOpen, TurnID: q.TurnID, Data: p.req})
	if q.Kind == KindApproval {
		// Stored before it is waited on: a process that takes the session over finds the
		// turn at its checkpoint (adopt.go). Failing that, the turn is restart-unknown there.
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		_ = s.j.stored(ctx, seq)
		cancel()
	}
	return p, nil
}

// await waits for an open request's answer, its deadline, a withdraw, or ctx.
func (s *Session) await(ctx context.Context, p *pendingRequest) (map[string]any, error) {
	timer := time.NewTimer(time.Until(p.req.Deadline))
	defer timer.Stop()
	var reason string
	select {
	case a := <-p.answer:
		if ctx.Err() == nil {
			return a, nil
		}
		// The turn was interrupted as the answer came (a client that cancels also answers
		// what it had open): the interrupt wins, and nothing runs on that answer.
		reason = "interrupted"
	case reason = <-p.cancel:
	case <-timer.C:
		reason = "timeout"
	case <-ctx.Done():
		reason = "interrupted"
	}
	if s.takeRequest(p.req.ID) != nil {
		s.j.append(Event{Type: EvRequestCancel, TurnID: p.req.TurnID, Data: RequestCancel{ID: p.req.ID, Kind: p.req.Kind, Reason: reason}})
	}
	if reason == "timeout" {
		return nil, ErrRequestTimeout
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return nil, fmt.Errorf("%w: %s", ErrRequestWithdrawn, reason)
}

// takeRequest removes an open request; nil when it is no longer open.
func (s *Session) takeRequest(id string) *pendingRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requests[id]
	if !ok {
		return nil
	}
	delete(s.requests, id)
	if len(s.requests) == 0 && s.status == StatusWaiting {
		s.setStatusLocked(StatusWorking)
	}
	return p
}

// Answer resolves an open request. The first valid answer wins; later ones get
// ErrUnknownRequest. A request open in another process (the one running the session's turn)
// is answered there.
func (s *Session) Answer(id string, a map[string]any) error {
	s.mu.Lock()
	_, here := s.requests[id]
	s.mu.Unlock()
	if !here && s.remoteOwner(context.Background()) {
		_, err := s.remoteCall(inboxCommand{Kind: "answer", Req: id, Answer: a})
		return err
	}
	return s.answer(id, a)
}

// answer is Answer on this process's open requests.
func (s *Session) answer(id string, a map[string]any) error {
	s.mu.Lock()
	p, ok := s.requests[id]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	if err := validateAnswer(p.req.Kind, a); err != nil {
		return err
	}
	if s.takeRequest(id) == nil {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	// The answer is in the log before the waiting turn acts on it (approve makes sure it is
	// stored before the call runs).
	s.j.append(Event{Type: EvRequestResolved, TurnID: p.req.TurnID, Data: RequestResolved{ID: id, Kind: p.req.Kind, Answer: a}})
	p.answer <- a
	return nil
}

// Withdraw cancels an open request with a reason (a client that cannot answer it, a surface
// that left). The waiting tool sees a withdraw, which for approvals is a deny. A request open
// in another process (the one running the session's turn) is withdrawn there.
func (s *Session) Withdraw(id, reason string) error {
	s.mu.Lock()
	_, here := s.requests[id]
	s.mu.Unlock()
	if !here && s.remoteOwner(context.Background()) {
		_, err := s.remoteCall(inboxCommand{Kind: "withdraw", Req: id, Text: reason})
		return err
	}
	return s.withdrawRequest(id, reason)
}

// withdrawRequest is Withdraw on this process's open requests.
func (s *Session) withdrawRequest(id, reason string) error {
	s.mu.Lock()
	p, ok := s.requests[id]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	select {
	case p.cancel <- reason:
	default:
	}
	return nil
}

// OpenRequests lists the open requests, oldest first.
func (s *Session) OpenRequests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openRequestsLocked()
}

func (s *Session) openRequestsLocked() []Request {
	out := make([]Request, 0, len(s.requests))
	for _, p := range s.requests {
		out = append(out, p.req)
	}
	slices.SortFunc(out, func(a, b Request) int { return a.Created.Compare(b.Created) })
	return out
}
