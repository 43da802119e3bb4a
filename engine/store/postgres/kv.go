package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
)

func validateKVKey(key string) error {
	if key == "" || len(key) > maxKVKeyLen {
		return fmt.Errorf("%w: kv key must be 1..%d bytes, got %d", store.ErrInvalidRecord, maxKVKeyLen, len(key))
	}
	return nil
}

// PutKV stores value under key (keys are bytea: any bytes, ordered bytewise).
func (s *Store) PutKV(ctx context.Context, key string, value []byte) error {
	if err := validateKVKey(key); err != nil {
		return err
	}
	return s.kvWrite(ctx, key, "INSERT INTO kv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
		[]byte(key), append([]byte{}, value...))
}

// DeleteKV removes key; a missing key is not an error.
func (s *Store) DeleteKV(ctx context.Context, key string) error {
	if err := validateKVKey(key); err != nil {
		return err
	}
	return s.kvWrite(ctx, key, "DELETE FROM kv WHERE key = $1", []byte(key))
}

func (s *Store) kvWrite(ctx context.Context, key, sql string, args ...any) error {
	done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	b := &pgx.Batch{}
	queueFence(ctx, b)
	b.Queue(sql, args...)
	err = s.sendBatch(ctx, b, func(br pgx.BatchResults) error {
		if err := skipFence(ctx, br); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	})
	if err != nil {
		return err
	}
	s.changed(store.Change{Key: key})
	return nil
}

// GetKV returns the value under key.
func (s *Store) GetKV(ctx context.Context, key string) ([]byte, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var v []byte
	err = s.pool.QueryRow(ctx, "SELECT value FROM kv WHERE key = $1", []byte(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("kv %q: %w", key, store.ErrNotFound)
	}
	if v == nil && err == nil {
		v = []byte{}
	}
	return v, mapErr(err)
}

// ListKV returns every key with prefix and its value: a range scan of the key index from the
// prefix to the first key past it.
func (s *Store) ListKV(ctx context.Context, prefix string) (map[string][]byte, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var end []byte // nil: no upper bound
	if p := []byte(prefix); len(p) > 0 {
		end = successor(p)
	}
	// Two statements, not one with an optional bound: the plans are generic (postgres.go), and
	// a generic plan cannot drop an "IS NULL OR" test, so the upper bound would be a filter on a
	// scan to the end of the index instead of its end.
	var rs pgx.Rows
	if end == nil {
		rs, err = s.pool.Query(ctx, "SELECT key, value FROM kv WHERE key >= $1::bytea", append([]byte{}, prefix...))
	} else {
		rs, err = s.pool.Query(ctx, "SELECT key, value FROM kv WHERE key >= $1::bytea AND key < $2::bytea", []byte(prefix), end)
	}
	if err != nil {
		return nil, mapErr(err)
	}
	defer rs.Close()
	out := map[string][]byte{}
	for rs.Next() {
		var k, v []byte
		if err := rs.Scan(&k, &v); err != nil {
			return nil, mapErr(err)
		}
		if v == nil {
			v = []byte{}
		}
		out[string(k)] = v
	}
	return out, mapErr(rs.Err())
}

// successor returns the smallest byte string above every string with prefix p, or nil when
// there is none (p is all 0xff).
func successor(p []byte) []byte {
	end := append([]byte{}, p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// CompareAndSwapKV sets key to new (nil deletes it) when its value equals old (nil: absent),
// in one statement whose row lock decides between concurrent swaps.
func (s *Store) CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error) {
	if err := validateKVKey(key); err != nil {
		return false, err
	}
	done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	k := []byte(key)
	if new != nil && len(new) == 0 {
		new = []byte{} // never NULL
	}
	b := &pgx.Batch{}
	queueFence(ctx, b)
	switch {
	case old == nil && new == nil:
		b.Queue("SELECT NOT EXISTS (SELECT 1 FROM kv WHERE key = $1)", k)
	case old == nil:
		b.Queue("INSERT INTO kv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", k, new)
	case new == nil:
		b.Queue("DELETE FROM kv WHERE key = $1 AND value = $2", k, old)
	default:
		b.Queue("UPDATE kv SET value = $3 WHERE key = $1 AND value = $2", k, old, new)
	}
	var swapped bool
	err = s.sendBatch(ctx, b, func(br pgx.BatchResults) error {
		if err := skipFence(ctx, br); err != nil {
			return err
		}
		if old == nil && new == nil { // nothing to write: is it absent?
			return br.QueryRow().Scan(&swapped)
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		swapped = tag.RowsAffected() == 1
		return nil
	})
	if err != nil {
		return false, err
	}
	if swapped && (old != nil || new != nil) {
		s.changed(store.Change{Key: key})
	}
	return swapped, nil
}
