package engine

import (
	"context"
	"sync"

	"github.com/hermes-go/hermes/engine/store"
)

// rowCache is the session's active transcript as this engine last read it, so that a turn
// reads from the store only the rows stored since (over the home's store process the whole
// transcript is otherwise sent and decoded again every turn).
//
// rows moves only forward, from the slice a read started with to its successor (keep), so the
// elements a slice handed out holds are never written again: a read that finds the cache
// unchanged appends the new rows past its end, in place when the array has room, and a read
// that lost a race to another one neither appends in place nor caches what it read.
type rowCache struct {
	mu   sync.Mutex
	rows []store.Row // the active rows in id order, as of one read
}

// same reports whether a and b are the same slice of the same array.
func same(a, b []store.Row) bool {
	return len(a) == len(b) && cap(a) == cap(b) && (cap(a) == 0 || &a[:1][0] == &b[:1][0])
}

// extend returns known followed by more, and caches it when known is still the cached slice.
func (c *rowCache) extend(known, more []store.Row) []store.Row {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !same(c.rows, known) {
		return append(known[:len(known):len(known)], more...) // a new array
	}
	c.rows = append(known, more...)
	return c.rows
}

// keep caches rows (a new array: a whole read) when known is still the cached slice.
func (c *rowCache) keep(known, rows []store.Row) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if same(c.rows, known) {
		c.rows = rows
	}
}

// activeRows returns the session's active transcript rows, in id order, as the store has them
// now.
//
// Knowing the transcript as of an earlier read, it asks only for the rows from the last one it
// knows on, and keeps what it knew when that row is still active. That is safe because of how
// a store writes a session's rows (store.Store): an append gives its rows ids above every row
// of the session stored before it; a rewind (also what compaction writes) archives every
// active row of the session, re-inserting the survivors under fresh ids; and an archived row
// never becomes active again. So while the last row known is active, no row before it
// changed, whoever wrote in between (this engine, or another process that held the session's
// lease meanwhile), and the rows after it are exactly what was appended since. When it is no
// longer active the transcript was rewritten, and the whole of it is read again.
func (s *Session) activeRows(ctx context.Context) ([]store.Row, error) {
	s.rows.mu.Lock()
	known := s.rows.rows
	s.rows.mu.Unlock()
	st := s.e.cfg.Store
	if n := len(known); n > 0 && known[n-1].ID > 0 {
		last := known[n-1].ID
		fresh, err := st.Rows(ctx, s.id, store.RowQuery{AfterID: last - 1})
		if err != nil {
			return nil, err
		}
		if len(fresh) > 0 && fresh[0].ID == last {
			if len(fresh) == 1 {
				return known, nil
			}
			return s.rows.extend(known, fresh[1:]), nil
		}
	}
	rows, err := st.Rows(ctx, s.id, store.RowQuery{})
	if err != nil {
		return nil, err
	}
	s.rows.keep(known, rows)
	return rows, nil
}

// forgetRows drops the cached transcript (a released session keeps no copy of it in memory).
func (s *Session) forgetRows() {
	s.rows.mu.Lock()
	s.rows.rows = nil
	s.rows.mu.Unlock()
}
