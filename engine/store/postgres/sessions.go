package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/ids"
	"github.com/hermes-go/hermes/engine/store"
)

// Limits mirror the badger store so that both accept and refuse the same input.
const (
	maxTitleLen = 4096
	maxKVKeyLen = 4096
)

// now is the store's timestamp: PostgreSQL keeps microseconds, so every time the store writes
// is cut to them and what a write returns is what a read gives back.
func now() time.Time { return stamp(time.Now()) }

func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return stamp(t)
}

// checkText refuses a string a text column cannot hold: PostgreSQL text is UTF-8 without NUL.
func checkText(what, v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s is not valid UTF-8", store.ErrInvalidRecord, what)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: %s contains a NUL byte", store.ErrInvalidRecord, what)
	}
	return nil
}

func validateSession(s *store.Session) error {
	if err := ids.Check(s.ID); err != nil {
		return fmt.Errorf("%w: session id: %v", store.ErrInvalidRecord, err)
	}
	if len(s.Title) > maxTitleLen {
		return fmt.Errorf("%w: title is %d bytes, limit %d", store.ErrInvalidRecord, len(s.Title), maxTitleLen)
	}
	for _, f := range []struct{ what, v string }{
		{"title", s.Title}, {"source", s.Source}, {"model", s.Model}, {"cwd", s.Cwd}, {"parent_id", s.ParentID},
		{"parent_kind", s.ParentKind}, {"end_reason", s.EndReason}, {"principal", s.Principal},
	} {
		if err := checkText(f.what, f.v); err != nil {
			return err
		}
	}
	for k, v := range s.Meta {
		if checkText("meta key", k) != nil || checkText("meta value", v) != nil {
			return fmt.Errorf("%w: meta %q holds text that is not UTF-8 or has a NUL byte", store.ErrInvalidRecord, k)
		}
	}
	return nil
}

const sessionCols = `id, coalesce(title, ''), source, model, cwd, parent_id, parent_kind, fork_row_id,
	created_at, updated_at, ended_at, end_reason, input_tokens, output_tokens, cached_tokens,
	reasoning_tokens, api_calls, tool_calls, row_count, rewinds, meta, principal, version`

func scanSession(row pgx.Row) (store.Session, error) {
	var (
		s     store.Session
		ended *time.Time
		meta  []byte
		fork  int64
		ver   int64
	)
	u := &s.Usage
	err := row.Scan(&s.ID, &s.Title, &s.Source, &s.Model, &s.Cwd, &s.ParentID, &s.ParentKind, &fork,
		&s.CreatedAt, &s.UpdatedAt, &ended, &s.EndReason, &u.InputTokens, &u.OutputTokens, &u.CachedTokens,
		&u.ReasoningTokens, &u.APICalls, &u.ToolCalls, &s.RowCount, &s.Rewinds, &meta, &s.Principal, &ver)
	if err != nil {
		return store.Session{}, err
	}
	s.ForkRowID, s.Version = uint64(fork), uint64(ver)
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	if ended != nil {
		s.EndedAt = ended.UTC()
	}
	if len(meta) > 0 && string(meta) != "null" {
		if err := json.Unmarshal(meta, &s.Meta); err != nil {
			return store.Session{}, fmt.Errorf("%w: session %s meta: %v", store.ErrCorrupt, s.ID, err)
		}
		if len(s.Meta) == 0 {
			s.Meta = nil
		}
	}
	return s, nil
}

// sessionArgs are the columns a create or an update writes, $2… after the id.
func sessionArgs(s store.Session) []any {
	var title, meta, ended any
	if s.Title != "" {
		title = s.Title
	}
	if len(s.Meta) > 0 {
		b, _ := json.Marshal(s.Meta) // map[string]string always encodes
		meta = string(b)
	}
	if !s.EndedAt.IsZero() {
		ended = stamp(s.EndedAt)
	}
	u := s.Usage
	return []any{s.ID, title, s.Source, s.Model, s.Cwd, s.ParentID, s.ParentKind, int64(s.ForkRowID),
		ended, s.EndReason, u.InputTokens, u.OutputTokens, u.CachedTokens, u.ReasoningTokens, u.APICalls,
		u.ToolCalls, meta, s.Principal}
}

// queueFence adds the check of the fence a write's context carries to b, ahead of the write.
func queueFence(ctx context.Context, b *pgx.Batch) {
	if f, ok := store.FenceOf(ctx); ok {
		b.Queue("SELECT fence($1, $2)", f.SessionID, int64(f.Generation))
	}
}

// execFence is queueFence for a write in an explicit transaction.
func execFence(ctx context.Context, tx pgx.Tx, sessionID string, f store.Fence) error {
	if f.Generation != 0 {
		if _, err := tx.Exec(ctx, "SELECT fence($1, $2)", sessionID, int64(f.Generation)); err != nil {
			return err
		}
	}
	if cf, ok := store.FenceOf(ctx); ok {
		if _, err := tx.Exec(ctx, "SELECT fence($1, $2)", cf.SessionID, int64(cf.Generation)); err != nil {
			return err
		}
	}
	return nil
}

// sendBatch runs b's statements in one round trip and one implicit transaction: an error in any
// of them (a fence refused, a constraint) rolls back all of them. read is given the results of
// the statements in order; any error ends the batch.
func (s *Store) sendBatch(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	br := s.pool.SendBatch(ctx, b)
	err := read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return mapErr(err)
}

// skipFence reads the results of the fence checks queueFence added.
func skipFence(ctx context.Context, br pgx.BatchResults) error {
	if _, ok := store.FenceOf(ctx); ok {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// CreateSession stores a new session.
func (s *Store) CreateSession(ctx context.Context, sess store.Session) (store.Session, error) {
	if err := validateSession(&sess); err != nil {
		return store.Session{}, err
	}
	done, err := s.enter(ctx)
	if err != nil {
		return store.Session{}, err
	}
	defer done()
	rec := sess
	rec.Meta = maps.Clone(sess.Meta)
	if len(rec.Meta) == 0 {
		rec.Meta = nil
	}
	rec.CreatedAt = orNow(rec.CreatedAt, now())
	rec.UpdatedAt = orNow(rec.UpdatedAt, rec.CreatedAt)
	if !rec.EndedAt.IsZero() {
		rec.EndedAt = stamp(rec.EndedAt)
	}
	rec.RowCount, rec.Rewinds, rec.Version = 0, 0, 1

	b := &pgx.Batch{}
	queueFence(ctx, b)
	// ON CONFLICT on the id only: a taken id is ErrExists even when the title is taken too.
	b.Queue(`INSERT INTO sessions (id, title, source, model, cwd, parent_id, parent_kind, fork_row_id,
		ended_at, end_reason, input_tokens, output_tokens, cached_tokens, reasoning_tokens, api_calls,
		tool_calls, meta, principal, created_at, updated_at, version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, 1)
		ON CONFLICT (id) DO NOTHING`, append(sessionArgs(rec), rec.CreatedAt, rec.UpdatedAt)...)
	err = s.sendBatch(ctx, b, func(br pgx.BatchResults) error {
		if err := skipFence(ctx, br); err != nil {
			return err
		}
		tag, err := br.Exec()
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("session %q: %w", sess.ID, store.ErrExists)
		}
		return err
	})
	if err != nil {
		return store.Session{}, err
	}
	s.changed(store.Change{SessionID: rec.ID})
	return rec, nil
}

// GetSession returns the session with id.
func (s *Store) GetSession(ctx context.Context, id string) (store.Session, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return store.Session{}, err
	}
	defer done()
	return s.getSession(ctx, id)
}

func (s *Store) getSession(ctx context.Context, id string) (store.Session, error) {
	out, err := scanSession(s.pool.QueryRow(ctx, "SELECT "+sessionCols+" FROM sessions WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return out, mapErr(err)
}

// UpdateSession applies fn under compare-and-set on the version. fn runs with no lock or
// transaction held, so a slow fn holds up nobody; a concurrent change makes the write miss and,
// with expectVersion 0, fn runs again on the newer record.
func (s *Store) UpdateSession(ctx context.Context, id string, expectVersion uint64, fn func(*store.Session) error) (store.Session, error) {
	// Each step enters the store on its own: fn may call the store, and must not do so while
	// this call holds it (Close waiting in between would deadlock them).
	return store.Update(ctx, id, expectVersion, s.GetSession, fn, validateSession, func(cur, next store.Session) (store.Session, bool, error) {
		return s.casSession(ctx, cur, next)
	})
}

func (s *Store) casSession(ctx context.Context, cur, next store.Session) (store.Session, bool, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return store.Session{}, false, err
	}
	defer done()
	t := now()
	next.CreatedAt, next.RowCount, next.Rewinds = cur.CreatedAt, cur.RowCount, cur.Rewinds
	next.UpdatedAt, next.Version = t, cur.Version+1
	if len(next.Meta) == 0 {
		next.Meta = nil
	}
	if !next.EndedAt.IsZero() {
		next.EndedAt = stamp(next.EndedAt)
	}
	b := &pgx.Batch{}
	queueFence(ctx, b)
	b.Queue(`UPDATE sessions SET title = $2, source = $3, model = $4, cwd = $5, parent_id = $6,
		parent_kind = $7, fork_row_id = $8, ended_at = $9, end_reason = $10, input_tokens = $11,
		output_tokens = $12, cached_tokens = $13, reasoning_tokens = $14, api_calls = $15,
		tool_calls = $16, meta = $17, principal = $18, updated_at = $19, version = version + 1
		WHERE id = $1 AND version = $20`, append(sessionArgs(next), t, int64(cur.Version))...)
	moved := false
	err = s.sendBatch(ctx, b, func(br pgx.BatchResults) error {
		if err := skipFence(ctx, br); err != nil {
			return err
		}
		tag, err := br.Exec()
		moved = err == nil && tag.RowsAffected() == 0
		return err
	})
	if err != nil || moved {
		return store.Session{}, moved, err
	}
	s.changed(store.Change{SessionID: next.ID})
	return next, false, nil
}

// ListSessions returns sessions newest first (by UpdatedAt, ties by id).
func (s *Store) ListSessions(ctx context.Context, o store.ListOptions) ([]store.Session, error) {
	done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var limit any
	if o.Limit > 0 {
		limit = o.Limit
	}
	// Only the filters asked for are in the statement: plans are generic (postgres.go), and a
	// generic plan keeps an "$1 = '' OR" test as a filter, which rules out the parent index.
	args, where := []any{limit}, ""
	if o.Source != "" {
		args = append(args, o.Source)
		where += fmt.Sprintf(" AND source = $%d", len(args))
	}
	if o.ParentID != "" {
		args = append(args, o.ParentID)
		where += fmt.Sprintf(" AND parent_id = $%d AND parent_id <> ''", len(args))
	}
	rows, err := s.pool.Query(ctx, "SELECT "+sessionCols+" FROM sessions WHERE true"+where+
		` ORDER BY updated_at DESC, id COLLATE "C" LIMIT $1`, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Session, error) { return scanSession(r) })
	return out, mapErr(err)
}
