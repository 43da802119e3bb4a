package httpapi

// SweepIdle runs one idle-session sweep now, as the sweeper does on its tick, and returns how
// many sessions it released: tests trigger it instead of waiting for the tick.
func (s *Server) SweepIdle() int { return s.sweep() }

// KeepsSession reports whether the sweep's keep filter keeps the live session id.
func (s *Server) KeepsSession(id string) bool {
	sess, ok := s.eng.Live(id)
	return ok && s.keepSession(sess)
}
