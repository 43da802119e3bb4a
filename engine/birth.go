package engine

// Sessions are durable at birth: every id a surface hands out names a stored session before
// any prompt, so another process can resume it at once. A session that was opened and
// abandoned without a word (a terminal UI opened and closed) is therefore stored too; the
// listings meant for people leave it out (Untouched), and it stays resumable by id.

// Untouched reports whether a stored session was never used: it has no transcript row and no
// title. Human-facing listings (hermes sessions, the gateway's session.list) leave such
// sessions out unless asked for every session.
func Untouched(r Record) bool { return r.RowCount == 0 && r.Title == "" }

// Unprompted reports whether no turn has started in the session since it was made live here
// and its stored record has no transcript row: the state in which the gateway reports a new
// session as lazy.
func (s *Session) Unprompted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn == nil && len(s.order) == 0 && s.rec.RowCount == 0
}
