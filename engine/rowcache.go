package engine

import (
	"context"
	"sync"

	"github.com/hermes-go/hermes/engine/store"
)

// rowCache is the session's active transcript as this engine last read it, so that a turn
// reads from the store only the rows stored since (over the home's store process the whole
// transcript is otherwise sent and decoded again every turn).
type rowCache struct {
	mu   sync.Mutex
	rows []store.Row // the active rows in id order, as of one read; never modified in place
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
			rows := known
			if len(fresh) > 1 {
				rows = append(known[:n:n], fresh[1:]...) // a new array: readers of known keep theirs
			}
			s.keepRows(rows)
			return rows, nil
		}
	}
	rows, err := st.Rows(ctx, s.id, store.RowQuery{})
	if err != nil {
		return nil, err
	}
	s.keepRows(rows)
	return rows, nil
}

// keepRows caches rows, the whole active transcript as of one read. Two reads racing may
// leave the older one cached: it is checked like any other before it is used.
func (s *Session) keepRows(rows []store.Row) {
	s.rows.mu.Lock()
	s.rows.rows = rows
	s.rows.mu.Unlock()
}

// forgetRows drops the cached transcript (a released session keeps no copy of it in memory).
func (s *Session) forgetRows() { s.keepRows(nil) }
