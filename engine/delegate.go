package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
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
	child, err := e.Create(ctx, CreateOptions{Model: rec.Model, Cwd: rec.Cwd, inherited: true, Source: "delegate", Meta: map[string]string{"goal": goal}, Principal: rec.Principal,
		parentID: s.id, parentKind: "delegate", depth: s.depth + 1, parent: s})
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	e.spawn[s.id] = append(e.spawn[s.id], child.id)
	e.mu.Unlock()
	info := SubagentInfo{ChildID: child.id, ParentID: s.id, Goal: goal, Depth: s.depth + 1, Model: rec.Model}
	s.j.append(Event{Type: EvSubagentSpawn, Data: info})
	s.j.append(Event{Type: EvSubagentStart, Data: info})
	started := time.Now()
	// The child's tool calls and usage ticks are relayed to the parent's clients as they happen;
	// what the relay has not read when the child's turn ends is relayed before
	// subagent.complete.
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	relayed := make(chan struct{})
	sub := child.j.subscribe(child.j.lastSeq())
	go func() {
		defer close(relayed)
		for {
			ev, err := sub.Next(relayCtx)
			if err != nil {
				return
			}
			s.relaySubagent(info, ev)
		}
	}()
	endRelay := func() {
		stopRelay()
		<-relayed
		rest, _ := child.j.eventsSince(sub.Cursor())
		for _, ev := range rest {
			s.relaySubagent(info, ev)
		}
		sub.Close()
	}
	adm, err := child.Submit(ctx, Prompt{Text: goal, Origin: "delegate"})
	if err != nil {
		endRelay()
		return "", err
	}
	stop := context.AfterFunc(ctx, func() { child.Interrupt("parent_interrupted") })
	out, err := child.Wait(context.WithoutCancel(ctx), adm.TurnID)
	stop()
	endRelay()
	if err != nil {
		return "", err
	}
	done := info
	done.Outcome, done.Duration = &out, time.Since(started)
	s.j.append(Event{Type: EvSubagentDone, Data: done})
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

// relaySubagent forwards one event of a child: a tool start as subagent.tool, a usage tick as
// subagent.progress; other events stay with the child.
func (s *Session) relaySubagent(info SubagentInfo, ev Event) {
	switch d := ev.Data.(type) {
	case ToolStart:
		info.ToolName, info.Preview = d.Name, toolPreview(d.Args)
		s.j.append(Event{Type: EvSubagentTool, Data: info})
	case UsageInfo:
		info.Usage = &d
		s.j.append(Event{Type: EvSubagentProgress, Data: info})
	}
}

// toolPreview is a one-line preview of a call's arguments: its command, path, pattern or
// similar, clipped.
func toolPreview(args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, k := range []string{"command", "path", "pattern", "goal", "query", "url", "action"} {
		if v, ok := m[k].(string); ok {
			return clip(strings.Join(strings.Fields(v), " "), 120)
		}
	}
	return ""
}
