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

// AppendEvents appends to the session's event log in one transaction: the fences, a
// per-session advisory lock (so two appenders to one log are ordered and the contiguity check
// sees the other's events), the check against the stored last seq, and one insert.
func (s *Store) AppendEvents(ctx context.Context, sessionID string, f store.Fence, evs []store.StoredEvent) error {
	if len(evs) > store.MaxEventBatch {
		return store.CheckEvents(sessionID, 0, 0, evs)
	}
	done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
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
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := execFence(ctx, tx, sessionID, f); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)", sessionID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('hermes events'), hashtext($1))", sessionID); err != nil {
			return err
		}
		var last int64
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = $1", sessionID).Scan(&last); err != nil {
			return err
		}
		if err := store.CheckEvents(sessionID, uint64(last), gen, evs); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO events (session_id, seq, type, at, turn_id, body, data, generation)
			SELECT $1, u.seq, u.type, u.at, u.turn_id, u.body, u.data, $8
			FROM unnest($2::bigint[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::bytea[])
				AS u(seq, type, at, turn_id, body, data)`,
			sessionID, seqs, types, ats, turns, bodies, data, int64(gen))
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrEventSeq) {
			return err
		}
		return mapErr(err)
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
