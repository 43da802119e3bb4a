package httpapi

// SweepIdle runs one idle-session sweep now, as the sweeper does on its tick, and returns how
// many sessions it released: tests trigger it instead of waiting for the tick.
func (s *Server) SweepIdle() int { return s.sweep() }
