package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
)

// Group commit of appends. Each append is a durable commit, and a commit costs a WAL flush; when
// many sessions append at once, committers gather the appends waiting and send them as one
// pipelined batch in one implicit transaction, so they share one commit. Each append in a batch
// is one statement that checks its fences without raising (fence_ok) and writes nothing when
// refused, so one stale holder does not abort the others. Anything else that fails a batch (a
// value the database refuses, a lost connection) sends its appends again one by one, so each
// gets its own answer.

// maxGroup bounds the appends sharing one commit; committers is how many batches may be in
// flight at once; groupTimeout bounds one batch.
const (
	maxGroup     = 64
	committers   = 4
	groupTimeout = 60 * time.Second
)

type appendReq struct {
	ctx  context.Context
	sid  string
	f    store.Fence
	cf   store.SessionFence // the context's fence; zero generation for none
	rows []store.Row        // prepared; ids assigned on success
	done chan error
}

const groupAppend = `WITH fx AS (SELECT fence_ok($1, $2) AS ok),
	fc AS (SELECT fence_ok($3, $4) AS ok),
	u AS (UPDATE sessions SET row_count = row_count + cardinality($6::text[]), version = version + 1, updated_at = $5
		WHERE id = $1 AND (SELECT ok FROM fx) AND (SELECT ok FROM fc) RETURNING id),
	ids AS (SELECT id, row_number() OVER (ORDER BY id) AS n
		FROM (SELECT nextval('row_ids') AS id
			FROM generate_series(1, (SELECT count(*) FROM u) * cardinality($6::text[]))) g),
	ins AS (INSERT INTO transcript (id, session_id, active, turn_id, role, content, reasoning,
			tool_calls, tool_call_id, tool_name, display_kind, attachments, time)
		SELECT i.id, $1, true, r.turn_id, r.role, r.content, r.reasoning, nullif(r.tool_calls, '')::json,
			r.tool_call_id, r.tool_name, r.display_kind, nullif(r.attachments, '')::json, r.time
		FROM unnest($6::text[], $7::text[], $8::bytea[], $9::bytea[], $10::text[], $11::text[], $12::text[],
			$13::text[], $14::text[], $15::timestamptz[]) WITH ORDINALITY
			AS r(turn_id, role, content, reasoning, tool_calls, tool_call_id, tool_name, display_kind, attachments, time, n)
		JOIN ids i USING (n)
		RETURNING id)
SELECT (SELECT ok FROM fx), (SELECT ok FROM fc), (SELECT count(*) FROM u), array(SELECT id FROM ins)`

// committer is one of the Store's goroutines that run grouped appends; stop ends them.
func (s *Store) committer() {
	defer s.groupWG.Done()
	for {
		var first *appendReq
		select {
		case first = <-s.appends:
		case <-s.groupStop:
			return
		}
		batch := []*appendReq{first}
	gather:
		for len(batch) < maxGroup {
			select {
			case r := <-s.appends:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		s.runGroup(batch)
	}
}

// runGroup commits batch as one transaction, or, when that fails as a whole, each append alone.
func (s *Store) runGroup(batch []*appendReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// Every batch takes its sessions' locks in id order, so two batches never wait on each
	// other in a cycle; the sort is stable, so one session's appends keep their order.
	slices.SortStableFunc(live, func(a, b *appendReq) int { return strings.Compare(a.sid, b.sid) })
	// Not any one caller's context: cancelling one append must not cancel the others.
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	b := &pgx.Batch{}
	t := now()
	for _, r := range live {
		args := append([]any{r.sid, int64(r.f.Generation), r.cf.SessionID, int64(r.cf.Generation), t},
			insertArgs(r.sid, r.rows)[1:]...)
		b.Queue(groupAppend, args...)
	}
	errs := make([]error, len(live))
	ids := make([][]int64, len(live))
	err := s.sendBatch(ctx, b, func(br pgx.BatchResults) error {
		for i, r := range live {
			var okF, okC bool
			var n int64
			if err := br.QueryRow().Scan(&okF, &okC, &n, &ids[i]); err != nil {
				return err
			}
			switch {
			case !okF:
				errs[i] = fmt.Errorf("%w: session %s: write carries generation %d, no longer current",
					store.ErrFenced, r.sid, r.f.Generation)
			case !okC:
				errs[i] = fmt.Errorf("%w: session %s: write carries generation %d, no longer current",
					store.ErrFenced, r.cf.SessionID, r.cf.Generation)
			case n == 0:
				errs[i] = fmt.Errorf("session %q: %w", r.sid, store.ErrNotFound)
			case len(ids[i]) != len(r.rows):
				errs[i] = fmt.Errorf("inserted %d rows, want %d", len(ids[i]), len(r.rows))
			}
		}
		return nil
	})
	if err != nil && len(live) > 1 && !errors.Is(err, store.ErrUnavailable) {
		for _, r := range live {
			r.done <- s.appendAlone(r.ctx, r.sid, r.f, r.rows)
		}
		return
	}
	for i, r := range live {
		if err == nil && errs[i] == nil {
			slices.Sort(ids[i])
			for j := range r.rows {
				r.rows[j].ID = uint64(ids[i][j])
			}
			s.changed(store.Change{SessionID: r.sid})
		}
		if err != nil {
			r.done <- err
		} else {
			r.done <- errs[i]
		}
	}
}
