package engine

// SetJournalWindow shrinks a session's replay window, so a test can make a reader lag.
func SetJournalWindow(s *Session, n int) {
	s.j.mu.Lock()
	s.j.window = n
	s.j.mu.Unlock()
}
