package engine

import (
	"context"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Enqueue puts text in the session's follow-up queue when a turn is running, whatever the
// busy-input policy says (a client's explicit "/queue"): it is merged into the one-slot queue
// exactly as a busy submit the policy queues — appended to what is queued, announced by
// queue.updated — and, when it is the first text in the slot, the trace context of ctx becomes
// the parent of the turn it starts. ok is false when no turn runs; the caller then submits it
// as a prompt.
func (s *Session) Enqueue(ctx context.Context, text, origin string) (adm Admission, ok bool) {
	text = strings.TrimSpace(text)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn == nil || s.closed || text == "" {
		return Admission{}, false
	}
	s.enqueueLocked(text, origin)
	if !s.queued.parent.IsValid() {
		s.queued.parent = trace.SpanContextFromContext(ctx)
	}
	return Admission{Status: AdmitQueued, QueuedCount: s.queued.count}, true
}

// ToolNames lists the tools the session's model is offered now, in the order it sees them.
func (s *Session) ToolNames() []string {
	specs := s.toolSpecs()
	out := make([]string, len(specs))
	for i, t := range specs {
		out[i] = t.Name
	}
	return out
}

// HideTools keeps the named tools out of the tool list this session (and its sub-agents) send
// to the model, for as long as the session is live: a surface whose client cannot answer
// clarify questions hides clarify so the model stops asking. Calls the model still makes run
// as usual.
func (s *Session) HideTools(names ...string) {
	a := &s.attached
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(a.hidden, n) {
			a.hidden = append(a.hidden, n)
		}
	}
}
