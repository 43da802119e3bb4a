package scripting

import (
	"context"
	"sync"

	"github.com/hermes-go/hermes/engine/policy"
)

// Sessions routes each hook call to the policy bound to its session (a script that opens a
// session with its own policy), else to the base policy. A delegated sub-agent follows the
// policy of the session that delegated to it, found through Parent.
type Sessions struct {
	base   policy.Set
	parent func(sessionID string) string

	mu sync.RWMutex
	by map[string]policy.Set
}

var (
	_ policy.Approver        = (*Sessions)(nil)
	_ policy.BusyInputPolicy = (*Sessions)(nil)
	_ policy.Steerer         = (*Sessions)(nil)
	_ policy.Compactor       = (*Sessions)(nil)
)

// NewSessions dispatches over base. parent (may be nil) names a session's parent session.
func NewSessions(base policy.Set, parent func(sessionID string) string) *Sessions {
	d := policy.Defaults{}
	if base.Approver == nil {
		base.Approver = d
	}
	if base.Busy == nil {
		base.Busy = d
	}
	if base.Steer == nil {
		base.Steer = d
	}
	if base.Route == nil {
		base.Route = d
	}
	if base.Compact == nil {
		base.Compact = d
	}
	return &Sessions{base: base, parent: parent, by: map[string]policy.Set{}}
}

// SetParent installs the parent lookup (once the engine that knows it exists).
func (s *Sessions) SetParent(parent func(sessionID string) string) {
	s.mu.Lock()
	s.parent = parent
	s.mu.Unlock()
}

// Bind makes set decide for the session; its nil members fall back to the base policy.
func (s *Sessions) Bind(sessionID string, set policy.Set) {
	s.mu.Lock()
	s.by[sessionID] = set
	s.mu.Unlock()
}

// Set is the dispatching policy to give the engine. Routing happens before there is a session,
// so the route hook is the base policy's.
func (s *Sessions) Set() policy.Set {
	return policy.Set{Approver: s, Busy: s, Steer: s, Route: s.base.Route, Compact: s}
}

func (s *Sessions) lookup(id string) policy.Set {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for range 32 { // sub-agents nest at most a few levels
		if set, ok := s.by[id]; ok {
			return set
		}
		if s.parent == nil {
			break
		}
		if id = s.parent(id); id == "" {
			break
		}
	}
	return s.base
}

// Approve asks the session's approver.
func (s *Sessions) Approve(ctx context.Context, in policy.ApprovalInput) (policy.ApprovalDecision, error) {
	if a := s.lookup(in.SessionID).Approver; a != nil {
		return a.Approve(ctx, in)
	}
	return s.base.Approver.Approve(ctx, in)
}

// BusyInput asks the session's busy-input policy.
func (s *Sessions) BusyInput(ctx context.Context, in policy.BusyInput) (policy.BusyDecision, error) {
	if b := s.lookup(in.SessionID).Busy; b != nil {
		return b.BusyInput(ctx, in)
	}
	return s.base.Busy.BusyInput(ctx, in)
}

// Steer asks the session's steer policy.
func (s *Sessions) Steer(ctx context.Context, in policy.SteerInput) (policy.SteerDecision, error) {
	if st := s.lookup(in.SessionID).Steer; st != nil {
		return st.Steer(ctx, in)
	}
	return s.base.Steer.Steer(ctx, in)
}

// Compact asks the session's compact policy.
func (s *Sessions) Compact(ctx context.Context, in policy.CompactInput) (policy.CompactDecision, error) {
	if c := s.lookup(in.SessionID).Compact; c != nil {
		return c.Compact(ctx, in)
	}
	return s.base.Compact.Compact(ctx, in)
}
