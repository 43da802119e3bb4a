package engine

// Enqueue puts text in the session's follow-up queue when a turn is running, whatever the
// busy-input policy says (a client's explicit "/queue"): it runs as the next turn, merged with
// whatever else is queued. ok is false when no turn runs; the caller then submits it as a
// prompt.
func (s *Session) Enqueue(text, origin string) (adm Admission, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn == nil || s.closed {
		return Admission{}, false
	}
	s.enqueueLocked(text, origin)
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
