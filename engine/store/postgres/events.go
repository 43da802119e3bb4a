package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
)

// appendEvents inserts an append's events when its first seq may follow the stored last one
// (the rule of store.CheckEvents: last+1, or anything past last for a fenced writer or an empty
// log; the seqs within the append are checked before it is sent). It answers the stored last
// seq it saw and how many events it inserted: none when the first seq was refused.
const appendEvents = `WITH last AS (SELECT coalesce(max(seq), 0) AS m FROM events WHERE session_id = $1::text),
ins AS (INSERT INTO events (session_id, seq, type, at, turn_id, body, data, generation)
	SELECT $1::text, u.seq, u.type, u.at, u.turn_id, u.body, u.data, $8::bigint
	FROM unnest($2::bigint[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::bytea[])
		AS u(seq, type, at, turn_id, body, data), last
	WHERE $2[1] = last.m + 1 OR ($2[1] > last.m AND (last.m = 0 OR $8::bigint <> 0))
	RETURNING 1)
SELECT m, (SELECT count(*) FROM ins) FROM last`

// AppendEvents appends to the session's event log in one round trip and one transaction (a
// pipelined batch): the fences, a per-session advisory lock (so two appenders to one log are
// ordered and the contiguity check sees the other's events) with the session's existence,
// then one statement that checks the first seq against the stored last seq and inserts.
func (s *Store) AppendEvents(ctx context.Context, sessionID string, f store.Fence, evs []store.StoredEvent) error {
	if len(evs) > store.MaxEventBatch {
		return store.CheckEvents(sessionID, 0, 0, evs)
	}
	gen := store.WriterGeneration(ctx, sessionID, f)
	n := len(evs)
	seqs, types, turns, bodies := make([]int64, n), make([]string, n), make([]string, n), make([]string, n)
	ats, data := make([]time.Time, n), make([][]byte, n)
	for i, e := range evs {
		if e.Seq > math.MaxInt64 {
			return fmt.Errorf("%w: event seq %d out of range", store.ErrInvalidRecord, e.Seq)
		}
		seqs[i], types[i], turns[i], bodies[i] = int64(e.Seq), e.Type, e.TurnID, e.Text
		ats[i] = orNow(e.Time, now())
		if len(e.Data) > 0 {
			data[i] = e.Data
		}
	}
	// What can be checked without the stored last seq (types, JSON, seqs within the append) is
	// checked here; an append failing it inserts nothing, and reads the last seq instead so that
	// the error is the one CheckEvents gives with it.
	var bad error
	if n > 0 {
		bad = fmt.Errorf("%w: session %q: append starts at seq 0", store.ErrEventSeq, sessionID)
		if evs[0].Seq > 0 {
			bad = store.CheckEvents(sessionID, evs[0].Seq-1, 0, evs)
		}
	}
	done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	b := &pgx.Batch{}
	if f.Generation != 0 {
		b.Queue("SELECT fence($1, $2)", sessionID, int64(f.Generation))
	}
	queueFence(ctx, b)
	b.Queue(`SELECT pg_advisory_xact_lock(hashtext('hermes events'), hashtext($1))::text,
		EXISTS (SELECT 1 FROM sessions WHERE id = $1)`, sessionID)
	switch {
	case bad != nil:
		b.Queue("SELECT coalesce(max(seq), 0), 0::bigint FROM events WHERE session_id = $1", sessionID)
	case n > 0:
		b.Queue(appendEvents, sessionID, seqs, types, ats, turns, bodies, data, int64(gen))
	}
	err = s.sendBatch(ctx, b, func(br pgx.BatchResults) error {
		if f.Generation != 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := skipFence(ctx, br); err != nil {
			return err
		}
		var (
			void   string
			exists bool
		)
		if err := br.QueryRow().Scan(&void, &exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		}
		if n == 0 {
			return nil
		}
		var last, inserted int64
		if err := br.QueryRow().Scan(&last, &inserted); err != nil {
			return err
		}
		if err := store.CheckEvents(sessionID, uint64(last), gen, evs); err != nil {
			return err // nothing was inserted: the first seq was refused
		}
		if bad != nil {
			return bad
		}
		if inserted != int64(n) {
			return fmt.Errorf("%w: session %q has events up to %d, append of %d events from seq %d inserted %d",
				store.ErrEventSeq, sessionID, last, n, evs[0].Seq, inserted)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		s.changed(store.Change{SessionID: sessionID})
	}
	return nil
}

// EventsSince returns the session's events after afterSeq; see store.Store.
func (s *Store) EventsSince(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]store.StoredEvent, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if afterSeq > math.MaxInt64 {
		afterSeq = math.MaxInt64
	}
	lim := int64(math.MaxInt64)
	if limit > 0 {
		lim = int64(limit)
	}
	rs, err := s.pool.Query(ctx, `SELECT seq, type, at, turn_id, body, data, generation,
			EXISTS (SELECT 1 FROM sessions WHERE id = $1)
		FROM (SELECT 1) one LEFT JOIN LATERAL (
			SELECT * FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3) e ON true`,
		sessionID, int64(afterSeq), lim)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rs.Close()
	out := []store.StoredEvent{}
	for rs.Next() {
		var (
			seq, gen        *int64
			typ, turn, body *string
			at              *time.Time
			data            []byte
			exists          bool
		)
		if err := rs.Scan(&seq, &typ, &at, &turn, &body, &data, &gen, &exists); err != nil {
			return nil, mapErr(err)
		}
		if !exists {
			return nil, fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		}
		if seq == nil {
			continue // the session has no events after afterSeq
		}
		out = append(out, store.StoredEvent{Seq: uint64(*seq), Type: *typ, Time: *at, TurnID: *turn, Text: *body,
			Data: data, Generation: uint64(*gen)})
	}
	return out, mapErr(rs.Err())
}

// LastEventSeq returns the seq of the session's last event; see store.Store.
func (s *Store) LastEventSeq(ctx context.Context, sessionID string) (uint64, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var last *int64
	err = s.pool.QueryRow(ctx, `SELECT (SELECT coalesce(max(seq), 0) FROM events WHERE session_id = $1)
		FROM sessions WHERE id = $1`, sessionID).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return 0, mapErr(err)
	}
	return uint64(*last), nil
}
