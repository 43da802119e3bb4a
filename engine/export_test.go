package engine

// SetJournalWindow shrinks a session's replay window, so a test can make a reader lag.
func SetJournalWindow(s *Session, n int) {
	s.j.mu.Lock()
	s.j.window = n
	s.j.mu.Unlock()
}

// DisownLog makes the session's engine stop writing its stored event log, as giving its lease
// back does.
func DisownLog(s *Session) { s.j.disown() }
