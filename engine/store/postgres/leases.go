package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
)

// micros is a ttl in whole microseconds (PostgreSQL's resolution), rounded up so that no lease
// is shorter than asked.
func micros(ttl time.Duration) int64 {
	return int64((ttl + time.Microsecond - 1) / time.Microsecond)
}

const leaseExpiry = "clock_timestamp() + $3 * interval '1 microsecond'"

// AcquireLease grants the lease when it is free, expired (by the database's clock) or already
// owner's, in one statement: an insert for a session never leased, else an update that bumps
// the generation when the holder changes. Concurrent acquires serialise on the lease row; one
// wins.
func (s *Store) AcquireLease(ctx context.Context, sessionID, owner string, ttl time.Duration) (store.Lease, error) {
	if owner == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("%w: lease needs an owner and a positive ttl", store.ErrInvalidRecord)
	}
	if err := checkText("lease owner", owner); err != nil {
		return store.Lease{}, err
	}
	done, err := s.enter(ctx)
	if err != nil {
		return store.Lease{}, err
	}
	defer done()
	l := store.Lease{SessionID: sessionID}
	var gen int64
	for try := 0; ; try++ {
		err = s.pool.QueryRow(ctx, `INSERT INTO leases AS l (session_id, owner, generation, expires_at)
			VALUES ($1, $2, 1, `+leaseExpiry+`)
			ON CONFLICT (session_id) DO UPDATE SET
				generation = CASE WHEN l.owner = excluded.owner THEN l.generation ELSE l.generation + 1 END,
				owner = excluded.owner, expires_at = excluded.expires_at
			WHERE l.owner = excluded.owner OR l.owner = '' OR l.expires_at <= clock_timestamp()
			RETURNING owner, generation, expires_at`, sessionID, owner, micros(ttl)).Scan(&l.Owner, &gen, &l.Expires)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
		// Held by someone else (or the session is missing, which the insert reports instead).
		var holder string
		var until *time.Time // NULL once released
		if err := s.pool.QueryRow(ctx, "SELECT owner, expires_at FROM leases WHERE session_id = $1", sessionID).Scan(&holder, &until); err != nil {
			return store.Lease{}, mapErr(err)
		}
		if holder != "" && until != nil || try == 2 {
			var at string
			if until != nil {
				at = until.UTC().Format(time.RFC3339Nano)
			}
			return store.Lease{}, fmt.Errorf("session %q held by %q until %s: %w", sessionID, holder, at, store.ErrLeaseHeld)
		}
		// Released (or expired) between the two statements: try again.
	}
	if err != nil {
		return store.Lease{}, mapErr(err)
	}
	l.Generation, l.Expires = uint64(gen), l.Expires.UTC()
	s.changed(store.Change{SessionID: sessionID})
	return l, nil
}

// RenewLease extends a lease its holder still has: same owner, same generation, not expired.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if ttl <= 0 {
		return store.Lease{}, fmt.Errorf("%w: lease renewal needs a positive ttl", store.ErrInvalidRecord)
	}
	done, err := s.enter(ctx)
	if err != nil {
		return store.Lease{}, err
	}
	defer done()
	out := l
	err = s.pool.QueryRow(ctx, `UPDATE leases SET expires_at = `+leaseExpiry+`
		WHERE session_id = $1 AND generation = $2 AND owner = $4 AND owner <> '' AND expires_at > clock_timestamp()
		RETURNING expires_at`, l.SessionID, int64(l.Generation), micros(ttl), l.Owner).Scan(&out.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		var (
			owner   string
			gen     int64
			expires *time.Time
		)
		err := s.pool.QueryRow(ctx, "SELECT owner, generation, expires_at FROM leases WHERE session_id = $1", l.SessionID).
			Scan(&owner, &gen, &expires)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return store.Lease{}, fmt.Errorf("session %q has no lease: %w", l.SessionID, store.ErrLeaseLost)
		case err != nil:
			return store.Lease{}, mapErr(err)
		case uint64(gen) != l.Generation || owner != l.Owner || owner == "":
			return store.Lease{}, fmt.Errorf("session %q lease generation %d of %q: now generation %d of %q: %w",
				l.SessionID, l.Generation, l.Owner, gen, owner, store.ErrLeaseLost)
		}
		return store.Lease{}, fmt.Errorf("session %q lease generation %d expired: %w", l.SessionID, gen, store.ErrLeaseLost)
	}
	if err != nil {
		return store.Lease{}, mapErr(err)
	}
	out.Expires = out.Expires.UTC()
	s.changed(store.Change{SessionID: l.SessionID})
	return out, nil
}

// ReleaseLease gives up a lease: its owner is cleared and its generation kept, so the next
// holder gets a newer one. Releasing a lease already released or expired is not an error;
// releasing one that passed to a newer generation is ErrFenced.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	var (
		gen      int64
		released bool
	)
	err = s.pool.QueryRow(ctx, `WITH released AS (
			UPDATE leases SET owner = '', expires_at = NULL
			WHERE session_id = $1 AND generation = $2 AND owner = $3 AND owner <> '' RETURNING generation)
		SELECT generation, true FROM released
		UNION ALL SELECT generation, false FROM leases WHERE session_id = $1 AND NOT EXISTS (SELECT 1 FROM released)`,
		l.SessionID, int64(l.Generation), l.Owner).Scan(&gen, &released)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // never leased
	case err != nil:
		return mapErr(err)
	case uint64(gen) > l.Generation:
		return fmt.Errorf("session %q lease is at generation %d, release carries %d: %w",
			l.SessionID, gen, l.Generation, store.ErrFenced)
	case released:
		s.changed(store.Change{SessionID: l.SessionID})
	}
	return nil
}

// GetLease returns the session's lease held now (by the database's clock).
func (s *Store) GetLease(ctx context.Context, sessionID string) (store.Lease, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return store.Lease{}, err
	}
	defer done()
	l := store.Lease{SessionID: sessionID}
	var gen int64
	err = s.pool.QueryRow(ctx, `SELECT owner, generation, expires_at FROM leases
		WHERE session_id = $1 AND owner <> '' AND expires_at > clock_timestamp()`, sessionID).Scan(&l.Owner, &gen, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, fmt.Errorf("lease of session %q: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return store.Lease{}, mapErr(err)
	}
	l.Generation, l.Expires = uint64(gen), l.Expires.UTC()
	return l, nil
}

// ListLeases returns the leases held now (by the database's clock), by session id.
func (s *Store) ListLeases(ctx context.Context) ([]store.Lease, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rs, err := s.pool.Query(ctx, `SELECT session_id, owner, generation, expires_at FROM leases
		WHERE owner <> '' AND expires_at > clock_timestamp() ORDER BY session_id COLLATE "C"`)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (store.Lease, error) {
		var l store.Lease
		var gen int64
		err := r.Scan(&l.SessionID, &l.Owner, &gen, &l.Expires)
		l.Generation, l.Expires = uint64(gen), l.Expires.UTC()
		return l, err
	})
	return out, mapErr(err)
}
