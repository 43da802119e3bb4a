package postgres

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
)

// prepareRows validates rows and returns stored-form copies with ids still unassigned.
func prepareRows(sid string, rows []store.Row, t time.Time) ([]store.Row, error) {
	out := make([]store.Row, len(rows))
	for i, r := range rows {
		if r.Role == "" {
			return nil, fmt.Errorf("%w: row %d has no role", store.ErrInvalidRecord, i)
		}
		if len(r.ToolCalls) > 0 {
			// Stored compacted, as the other stores' JSON encoding leaves it.
			var buf bytes.Buffer
			if err := json.Compact(&buf, r.ToolCalls); err != nil {
				return nil, fmt.Errorf("%w: row %d tool_calls is not valid JSON: %v", store.ErrInvalidRecord, i, err)
			}
			r.ToolCalls = buf.Bytes()
		} else {
			r.ToolCalls = nil
		}
		for _, f := range []struct{ what, v string }{
			{"turn_id", r.TurnID}, {"role", r.Role}, {"tool_call_id", r.ToolCallID}, {"tool_name", r.ToolName},
			{"display_kind", r.DisplayKind}, {"tool_calls", string(r.ToolCalls)},
		} {
			if err := checkText(fmt.Sprintf("row %d %s", i, f.what), f.v); err != nil {
				return nil, err
			}
		}
		for _, a := range r.Attachments {
			if err := checkText(fmt.Sprintf("row %d attachment", i), a); err != nil {
				return nil, err
			}
		}
		r.ID, r.SessionID, r.Active = 0, sid, true
		r.Time = orNow(r.Time, t)
		out[i] = r
	}
	return out, nil
}

// insertRows is one statement that inserts rows of a session with fresh ids from row_ids, in the
// order given: the ids drawn are sorted and handed out by position, whatever order the sequence
// was called in.
const insertRows = `INSERT INTO transcript (id, session_id, active, turn_id, role, content, reasoning,
	tool_calls, tool_call_id, tool_name, display_kind, attachments, time)
SELECT i.id, $1, true, r.turn_id, r.role, r.content, r.reasoning, nullif(r.tool_calls, '')::json,
	r.tool_call_id, r.tool_name, r.display_kind, nullif(r.attachments, '')::json, r.time
FROM unnest($2::text[], $3::text[], $4::bytea[], $5::bytea[], $6::text[], $7::text[], $8::text[],
	$9::text[], $10::text[], $11::timestamptz[]) WITH ORDINALITY
	AS r(turn_id, role, content, reasoning, tool_calls, tool_call_id, tool_name, display_kind, attachments, time, n)
JOIN (SELECT id, row_number() OVER (ORDER BY id) AS n
	FROM (SELECT nextval('row_ids') AS id FROM generate_series(1, cardinality($2::text[]))) g) i USING (n)
RETURNING id`

func insertArgs(sid string, rows []store.Row) []any {
	n := len(rows)
	turn, role, callID, tool, kind := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	calls, att := make([]string, n), make([]string, n)
	content, reasoning := make([][]byte, n), make([][]byte, n)
	times := make([]time.Time, n)
	for i, r := range rows {
		turn[i], role[i], callID[i], tool[i], kind[i] = r.TurnID, r.Role, r.ToolCallID, r.ToolName, r.DisplayKind
		calls[i] = string(r.ToolCalls)
		if len(r.Attachments) > 0 {
			b, _ := json.Marshal(r.Attachments) // []string always encodes
			att[i] = string(b)
		}
		content[i], reasoning[i] = append([]byte{}, r.Content...), append([]byte{}, r.Reasoning...)
		times[i] = r.Time
	}
	return []any{sid, turn, role, content, reasoning, calls, callID, tool, kind, att, times}
}

// assignIDs gives rows the ids an insertRows returned, in ascending order.
func assignIDs(rs pgx.Rows, rows []store.Row) error {
	got, err := pgx.CollectRows(rs, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	if len(got) != len(rows) {
		return fmt.Errorf("inserted %d rows, want %d", len(got), len(rows))
	}
	slices.Sort(got)
	for i := range rows {
		rows[i].ID = uint64(got[i])
	}
	return nil
}

// AppendRows appends rows through the group commit (group.go): appends of many sessions made at
// once share one transaction and one WAL flush.
func (s *Store) AppendRows(ctx context.Context, sessionID string, f store.Fence, rows []store.Row) ([]store.Row, error) {
	t := now()
	prepared, err := prepareRows(sessionID, rows, t)
	if err != nil {
		return nil, err
	}
	done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if len(prepared) == 0 {
		if err := s.appendAlone(ctx, sessionID, f, nil); err != nil {
			return nil, err
		}
		return prepared, nil
	}
	r := &appendReq{ctx: ctx, sid: sessionID, f: f, rows: prepared, done: make(chan error, 1)}
	r.cf, _ = store.FenceOf(ctx)
	s.appends <- r // committers run until Close, which waits for this call
	if err := <-r.done; err != nil {
		return nil, err
	}
	return prepared, nil
}

// appendAlone is an append in a transaction of its own, in one round trip: the fences (raising),
// the session's counters (which locks its record, so concurrent appends to one session take
// their ids in commit order) and the rows. prepared get their ids.
func (s *Store) appendAlone(ctx context.Context, sessionID string, f store.Fence, prepared []store.Row) error {
	t := now()
	b := &pgx.Batch{}
	if f.Generation != 0 {
		b.Queue("SELECT fence($1, $2)", sessionID, int64(f.Generation))
	}
	queueFence(ctx, b)
	if len(prepared) == 0 {
		b.Queue("SELECT 1 FROM sessions WHERE id = $1", sessionID)
	} else {
		b.Queue("UPDATE sessions SET row_count = row_count + $2, version = version + 1, updated_at = $3 WHERE id = $1",
			sessionID, len(prepared), t)
		b.Queue(insertRows, insertArgs(sessionID, prepared)...)
	}
	err := s.sendBatch(ctx, b, func(br pgx.BatchResults) error {
		if f.Generation != 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := skipFence(ctx, br); err != nil {
			return err
		}
		tag, err := br.Exec()
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		}
		if err != nil || len(prepared) == 0 {
			return err
		}
		rs, err := br.Query()
		if err != nil {
			return err
		}
		return assignIDs(rs, prepared)
	})
	if err != nil {
		return err
	}
	if len(prepared) > 0 {
		s.changed(store.Change{SessionID: sessionID})
	}
	return nil
}

const rowCols = `id, session_id, active, turn_id, role, content, reasoning, tool_calls, tool_call_id,
	tool_name, display_kind, attachments, time`

func scanRow(row pgx.CollectableRow) (store.Row, error) {
	var (
		r                  store.Row
		id                 int64
		content, reasoning []byte
		calls, att         []byte
	)
	if err := row.Scan(&id, &r.SessionID, &r.Active, &r.TurnID, &r.Role, &content, &reasoning, &calls,
		&r.ToolCallID, &r.ToolName, &r.DisplayKind, &att, &r.Time); err != nil {
		return store.Row{}, err
	}
	r.ID, r.Content, r.Reasoning, r.Time = uint64(id), string(content), string(reasoning), r.Time.UTC()
	if len(calls) > 0 {
		r.ToolCalls = json.RawMessage(calls)
	}
	if len(att) > 0 {
		if err := json.Unmarshal(att, &r.Attachments); err != nil {
			return store.Row{}, fmt.Errorf("%w: row %d attachments: %v", store.ErrCorrupt, id, err)
		}
	}
	return r, nil
}

// Rows returns rows of a session in row-id order.
func (s *Store) Rows(ctx context.Context, sessionID string, q store.RowQuery) ([]store.Row, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if q.AfterID > math.MaxInt64 {
		q.AfterID = math.MaxInt64 // no id is above it
	}
	var limit any
	if q.Limit > 0 {
		limit = q.Limit
	}
	order := "ASC"
	if q.Tail {
		order = "DESC"
	}
	sql := "SELECT " + rowCols + " FROM transcript WHERE session_id = $1 AND id > $2"
	if !q.IncludeArchived {
		sql += " AND active"
	}
	sql += " ORDER BY id " + order + " LIMIT $3"
	rs, err := s.pool.Query(ctx, sql, sessionID, int64(q.AfterID), limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rs, scanRow)
	if err != nil {
		return nil, mapErr(err)
	}
	if len(out) == 0 {
		// No rows, or no session: only the second is an error.
		var one int
		err := s.pool.QueryRow(ctx, "SELECT 1 FROM sessions WHERE id = $1", sessionID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		}
		return out, mapErr(err)
	}
	if q.Tail {
		slices.Reverse(out)
	}
	return out, nil
}

// lockSession takes the session's record for update in tx (every write to its rows does so
// first), reporting ErrNotFound.
func lockSession(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	err := tx.QueryRow(ctx, "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return err
}

// checkActive reports ErrStaleRow unless rowID is an active row of the session.
func checkActive(ctx context.Context, tx pgx.Tx, sessionID string, rowID uint64) error {
	var ok bool
	if rowID <= math.MaxInt64 {
		err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM transcript WHERE id = $1 AND session_id = $2 AND active)",
			int64(rowID), sessionID).Scan(&ok)
		if err != nil {
			return err
		}
	}
	if !ok {
		return fmt.Errorf("session %q row %d: %w", sessionID, rowID, store.ErrStaleRow)
	}
	return nil
}

// Rewind archives rows from beforeRowID on, re-inserts the survivors under fresh ids and appends
// extra, in one transaction.
func (s *Store) Rewind(ctx context.Context, sessionID string, f store.Fence, beforeRowID uint64, extra []store.Row) (store.RewindResult, error) {
	t := now()
	prepared, err := prepareRows(sessionID, extra, t)
	if err != nil {
		return store.RewindResult{}, err
	}
	done, err := s.enter(ctx)
	if err != nil {
		return store.RewindResult{}, err
	}
	defer done()
	var res store.RewindResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = store.RewindResult{}
		if err := execFence(ctx, tx, sessionID, f); err != nil {
			return err
		}
		if err := lockSession(ctx, tx, sessionID); err != nil {
			return err
		}
		if beforeRowID != 0 {
			if err := checkActive(ctx, tx, sessionID, beforeRowID); err != nil {
				return err
			}
		}
		// Archived rows keep their ids; survivors move to fresh ids after every archived one.
		tag, err := tx.Exec(ctx, "UPDATE transcript SET active = false WHERE session_id = $1 AND active AND id >= $2",
			sessionID, int64(beforeRowID))
		if err != nil {
			return err
		}
		res.Archived = int(tag.RowsAffected())
		rs, err := tx.Query(ctx, "DELETE FROM transcript WHERE session_id = $1 AND active RETURNING "+rowCols, sessionID)
		if err != nil {
			return err
		}
		survivors, err := pgx.CollectRows(rs, scanRow)
		if err != nil {
			return err
		}
		slices.SortFunc(survivors, func(a, b store.Row) int { return cmp.Compare(a.ID, b.ID) })
		all := append(survivors, prepared...)
		if len(all) > 0 {
			rs, err := tx.Query(ctx, insertRows, insertArgs(sessionID, all)...)
			if err != nil {
				return err
			}
			if err := assignIDs(rs, all); err != nil {
				return err
			}
		}
		for i := range all {
			all[i].Active = true
		}
		res.Survivors, res.Appended = all[:len(survivors):len(survivors)], all[len(survivors):]
		_, err = tx.Exec(ctx, `UPDATE sessions SET row_count = $2, rewinds = rewinds + 1, version = version + 1,
			updated_at = $3 WHERE id = $1`, sessionID, len(all), t)
		return err
	})
	if err != nil {
		return store.RewindResult{}, mapErr(err)
	}
	if len(res.Appended) == 0 {
		res.Appended = nil
	}
	s.changed(store.Change{SessionID: sessionID})
	return res, nil
}

// CopyRows copies src's active rows up to uptoRowID into dst under fresh ids, in one
// transaction that locks both records (in id order, so two copies never deadlock).
func (s *Store) CopyRows(ctx context.Context, src, dst string, uptoRowID uint64) (int, error) {
	if src == dst {
		return 0, fmt.Errorf("%w: cannot copy session %q into itself", store.ErrInvalidRecord, src)
	}
	done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	n := 0
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := execFence(ctx, tx, "", store.Fence{}); err != nil {
			return err
		}
		rs, err := tx.Query(ctx, `SELECT id FROM sessions WHERE id = ANY($1) ORDER BY id COLLATE "C" FOR UPDATE`, []string{src, dst})
		if err != nil {
			return err
		}
		found, err := pgx.CollectRows(rs, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range []string{src, dst} {
			if !slices.Contains(found, id) {
				return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
			}
		}
		if uptoRowID != 0 {
			if err := checkActive(ctx, tx, src, uptoRowID); err != nil {
				return err
			}
		}
		upto := int64(math.MaxInt64)
		if uptoRowID != 0 {
			upto = int64(uptoRowID)
		}
		var last *int64
		if err := tx.QueryRow(ctx, "SELECT count(*), max(id) FROM transcript WHERE session_id = $1 AND active AND id <= $2",
			src, upto).Scan(&n, &last); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO transcript (id, session_id, active, turn_id, role, content, reasoning,
			tool_calls, tool_call_id, tool_name, display_kind, attachments, time)
		SELECT i.id, $2, true, s.turn_id, s.role, s.content, s.reasoning, s.tool_calls, s.tool_call_id,
			s.tool_name, s.display_kind, s.attachments, s.time
		FROM (SELECT *, row_number() OVER (ORDER BY id) AS n FROM transcript
			WHERE session_id = $1 AND active AND id <= $3) s
		JOIN (SELECT id, row_number() OVER (ORDER BY id) AS n
			FROM (SELECT nextval('row_ids') AS id FROM generate_series(1, $4::bigint)) g) i USING (n)`,
			src, dst, upto, n); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET row_count = row_count + $2, fork_row_id = $3, version = version + 1,
			updated_at = $4 WHERE id = $1`, dst, n, *last, now())
		return err
	})
	if err != nil {
		return 0, mapErr(err)
	}
	if n > 0 {
		s.changed(store.Change{SessionID: dst})
	}
	return n, nil
}
