package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
)

// AppendRowsUsage appends rows and adds usage to the session's totals in one batch, one
// implicit transaction: the fences, the session's counters (returning the record as written)
// and the rows. See store.Store.
func (s *Store) AppendRowsUsage(ctx context.Context, sessionID string, f store.Fence, rows []store.Row, usage store.Usage) ([]store.Row, store.Session, error) {
	t := now()
	prepared, err := prepareRows(sessionID, rows, t)
	if err != nil {
		return nil, store.Session{}, err
	}
	done, err := s.enter(ctx)
	if err != nil {
		return nil, store.Session{}, err
	}
	defer done()
	b := &pgx.Batch{}
	if f.Generation != 0 {
		b.Queue("SELECT fence($1, $2)", sessionID, int64(f.Generation))
	}
	queueFence(ctx, b)
	u := usage
	b.Queue(`UPDATE sessions SET row_count = row_count + $2, input_tokens = input_tokens + $3,
		output_tokens = output_tokens + $4, cached_tokens = cached_tokens + $5,
		reasoning_tokens = reasoning_tokens + $6, api_calls = api_calls + $7, tool_calls = tool_calls + $8,
		version = version + 1, updated_at = $9 WHERE id = $1 RETURNING `+sessionCols,
		sessionID, len(prepared), u.InputTokens, u.OutputTokens, u.CachedTokens, u.ReasoningTokens, u.APICalls, u.ToolCalls, t)
	if len(prepared) > 0 {
		b.Queue(insertRows, insertArgs(sessionID, prepared)...)
	}
	var rec store.Session
	err = s.sendBatch(ctx, b, func(br pgx.BatchResults) error {
		if f.Generation != 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := skipFence(ctx, br); err != nil {
			return err
		}
		var err error
		if rec, err = scanSession(br.QueryRow()); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		} else if err != nil || len(prepared) == 0 {
			return err
		}
		rs, err := br.Query()
		if err != nil {
			return err
		}
		return assignIDs(rs, prepared)
	})
	if err != nil {
		return nil, store.Session{}, err
	}
	s.changed(store.Change{SessionID: sessionID})
	return prepared, rec, nil
}
