package engine

import (
	"context"
	"fmt"
)

// delegate runs a sub-agent: a child session (lineage kind "delegate") with its own turn loop
// and iteration budget, linked into the spawn tree. Interrupting the parent interrupts it; its
// approvals are asked through the parent's clients.
func (s *Session) delegate(ctx context.Context, goal string) (string, error) {
	e := s.e
	if s.depth+1 > e.cfg.MaxDelegateDepth {
		return "", fmt.Errorf("%w: depth %d is the maximum", ErrDelegateLimit, e.cfg.MaxDelegateDepth)
	}
	s.mu.Lock()
	if s.children >= e.cfg.MaxDelegates {
		s.mu.Unlock()
		return "", fmt.Errorf("%w: %d sub-agents already running", ErrDelegateLimit, e.cfg.MaxDelegates)
	}
	s.children++
	rec := s.rec
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.children--
		s.mu.Unlock()
	}()
	child, err := e.Create(ctx, CreateOptions{Model: rec.Model, Cwd: rec.Cwd, Source: "delegate", Meta: map[string]string{"goal": goal}, Principal: rec.Principal,
		parentID: s.id, parentKind: "delegate", depth: s.depth + 1, parent: s})
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	e.spawn[s.id] = append(e.spawn[s.id], child.id)
	e.mu.Unlock()
	s.j.append(Event{Type: EvSubagentStart, Data: SubagentInfo{ChildID: child.id, Goal: goal}})
	adm, err := child.Submit(ctx, Prompt{Text: goal, Origin: "delegate"})
	if err != nil {
		return "", err
	}
	stop := context.AfterFunc(ctx, func() { child.Interrupt("parent_interrupted") })
	out, err := child.Wait(context.WithoutCancel(ctx), adm.TurnID)
	stop()
	if err != nil {
		return "", err
	}
	s.j.append(Event{Type: EvSubagentDone, Data: SubagentInfo{ChildID: child.id, Goal: goal, Outcome: &out}})
	switch out.Status {
	case StatusCompleted:
		return out.Text, nil
	case StatusCancelled:
		return "", fmt.Errorf("sub-agent %s was interrupted (%s)", child.id, out.ExitReason)
	}
	msg := out.Error
	if out.Text != "" {
		msg += "; partial answer: " + out.Text
	}
	return "", fmt.Errorf("sub-agent %s failed (%s): %s", child.id, out.ExitReason, msg)
}
