package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Group commit of appends. Each append is a durable commit, and a commit costs a WAL flush; when
// many sessions append at once, committers gather the appends waiting and write them all with
// one statement (groupAppend), in one transaction that shares one commit. The statement checks
// every append's fences without raising and writes nothing for an append refused, so one stale
// holder does not fail the others. Anything else that fails a group (a value the database
// refuses, a lost connection) sends its appends again one by one, so each gets its own answer.

// maxGroup bounds the appends sharing one commit; committers is how many groups may be in
// flight at once; groupTimeout bounds one group.
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

// groupAppend writes the appends of a group in one statement. $1–$4 describe the appends (k is
// an append's position, from 1): its session, its fence and the context's fence; $5 is the
// time; $6 gives each row its append, $7–$16 the rows' columns, the appends' rows in order.
//
// Locks are taken in one order by every group, so two groups never wait on each other in a
// cycle: first the lease rows of every fence checked (sorted; the lock a takeover's update
// waits for, as fence takes it), then the session records of the appends that pass (sorted).
// Row ids are drawn only after both: the count that sizes the draw reads the locked records, so
// one session's rows get ascending ids in commit order. It answers one row per append: k, its
// two fence checks, whether its session exists, and the ids of its rows, ascending.
const groupAppend = `WITH a AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[]) WITH ORDINALITY AS a(sid, gen, csid, cgen, k)),
lk AS MATERIALIZED (
	SELECT session_id, generation FROM leases
	WHERE session_id IN (SELECT sid FROM a WHERE gen <> 0 UNION SELECT csid FROM a WHERE cgen <> 0)
	ORDER BY session_id COLLATE "C" FOR NO KEY UPDATE),
f AS MATERIALIZED (
	SELECT a.k, a.sid,
		a.gen = 0 OR EXISTS (SELECT 1 FROM lk WHERE lk.session_id = a.sid AND lk.generation = a.gen) AS okf,
		a.cgen = 0 OR EXISTS (SELECT 1 FROM lk WHERE lk.session_id = a.csid AND lk.generation = a.cgen) AS okc
	FROM a),
sl AS MATERIALIZED (
	SELECT id FROM sessions WHERE id IN (SELECT sid FROM f WHERE okf AND okc)
	ORDER BY id COLLATE "C" FOR NO KEY UPDATE),
w AS MATERIALIZED (SELECT k, sid FROM f WHERE okf AND okc AND sid IN (SELECT id FROM sl)),
r AS MATERIALIZED (
	SELECT w.sid, r.*, row_number() OVER (ORDER BY r.n) AS m
	FROM unnest($6::bigint[], $7::text[], $8::text[], $9::bytea[], $10::bytea[], $11::text[], $12::text[],
		$13::text[], $14::text[], $15::text[], $16::timestamptz[]) WITH ORDINALITY
		AS r(k, turn_id, role, content, reasoning, tool_calls, tool_call_id, tool_name, display_kind, attachments, time, n)
	JOIN w USING (k)),
ids AS MATERIALIZED (
	SELECT id, row_number() OVER (ORDER BY id) AS m
	FROM (SELECT nextval('row_ids') AS id FROM generate_series(1, (SELECT count(*) FROM r))) g),
u AS (UPDATE sessions s SET row_count = s.row_count + c.n, version = s.version + 1, updated_at = $5
	FROM (SELECT sid, count(*) AS n FROM r GROUP BY sid) c WHERE s.id = c.sid),
ins AS (INSERT INTO transcript (id, session_id, active, turn_id, role, content, reasoning,
		tool_calls, tool_call_id, tool_name, display_kind, attachments, time)
	SELECT i.id, r.sid, true, r.turn_id, r.role, r.content, r.reasoning, nullif(r.tool_calls, '')::json,
		r.tool_call_id, r.tool_name, r.display_kind, nullif(r.attachments, '')::json, r.time
	FROM r JOIN ids i USING (m))
SELECT f.k, f.okf, f.okc, f.sid IN (SELECT id FROM sl),
	coalesce((SELECT array_agg(i.id ORDER BY i.id) FROM r JOIN ids i USING (m) WHERE r.k = f.k), '{}')
FROM f ORDER BY f.k`

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
	// Not any one caller's context: cancelling one append must not cancel the others.
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	n := len(live)
	sids, gens, csids, cgens := make([]string, n), make([]int64, n), make([]string, n), make([]int64, n)
	var all []store.Row
	var rk []int64
	for i, r := range live {
		sids[i], gens[i], csids[i], cgens[i] = r.sid, int64(r.f.Generation), r.cf.SessionID, int64(r.cf.Generation)
		for range r.rows {
			rk = append(rk, int64(i+1))
		}
		all = append(all, r.rows...)
	}
	args := append([]any{sids, gens, csids, cgens, now(), rk}, insertArgs("", all)[1:]...)
	errs := make([]error, n)
	err := func() error {
		rs, err := s.pool.Query(ctx, groupAppend, args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		seen := 0
		for rs.Next() {
			var (
				k             int64
				okF, okC, hit bool
				ids           []int64
			)
			if err := rs.Scan(&k, &okF, &okC, &hit, &ids); err != nil {
				return err
			}
			if k < 1 || k > int64(n) {
				return fmt.Errorf("group append answered for append %d of %d", k, n)
			}
			r := live[k-1]
			seen++
			switch {
			case !okF:
				errs[k-1] = fmt.Errorf("%w: session %s: write carries generation %d, no longer current",
					store.ErrFenced, r.sid, r.f.Generation)
			case !okC:
				errs[k-1] = fmt.Errorf("%w: session %s: write carries generation %d, no longer current",
					store.ErrFenced, r.cf.SessionID, r.cf.Generation)
			case !hit:
				errs[k-1] = fmt.Errorf("session %q: %w", r.sid, store.ErrNotFound)
			case len(ids) != len(r.rows):
				errs[k-1] = fmt.Errorf("inserted %d rows, want %d", len(ids), len(r.rows))
			default:
				for j := range r.rows {
					r.rows[j].ID = uint64(ids[j])
				}
			}
		}
		if err := rs.Err(); err != nil {
			return err
		}
		if seen != n {
			return fmt.Errorf("group append answered for %d appends of %d", seen, n)
		}
		return nil
	}()
	err = mapErr(err)
	if err != nil && n > 1 && !errors.Is(err, store.ErrUnavailable) {
		for _, r := range live {
			r.done <- s.appendAlone(r.ctx, r.sid, r.f, r.rows)
		}
		return
	}
	for i, r := range live {
		if err == nil && errs[i] == nil {
			s.changed(store.Change{SessionID: r.sid})
		}
		if err != nil {
			r.done <- err
		} else {
			r.done <- errs[i]
		}
	}
}
