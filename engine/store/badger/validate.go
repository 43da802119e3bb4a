package badgerstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Size limits keep keys far below badger's 64 KB key limit and make abuse fail early with a
// clear error instead of deep inside a transaction.
const (
	maxIDLen    = 256
	maxTitleLen = 4096
	maxKVKeyLen = 4096
)

func validateSessionID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%w: session id must be 1..%d bytes, got %d", store.ErrInvalidRecord, maxIDLen, len(id))
	}
	// '/' separates the session id from the row id in row keys; control characters have no
	// business in an identifier and make logs ambiguous.
	if i := strings.IndexFunc(id, func(r rune) bool { return r == '/' || r < 0x20 || r == 0x7f }); i >= 0 {
		return fmt.Errorf("%w: session id %q contains a '/' or control character", store.ErrInvalidRecord, id)
	}
	return nil
}

func validateTitle(title string) error {
	if len(title) > maxTitleLen {
		return fmt.Errorf("%w: title is %d bytes, limit %d", store.ErrInvalidRecord, len(title), maxTitleLen)
	}
	return nil
}

func validateKVKey(key string) error {
	if key == "" || len(key) > maxKVKeyLen {
		return fmt.Errorf("%w: kv key must be 1..%d bytes, got %d", store.ErrInvalidRecord, maxKVKeyLen, len(key))
	}
	return nil
}

// prepareRows validates rows and returns copies in stored form (ids still unassigned).
func prepareRows(sid string, rows []store.Row, now time.Time) ([]store.Row, error) {
	out := make([]store.Row, len(rows))
	for i, r := range rows {
		if r.Role == "" {
			return nil, fmt.Errorf("%w: row %d has no role", store.ErrInvalidRecord, i)
		}
		if len(r.ToolCalls) > 0 && !json.Valid(r.ToolCalls) {
			return nil, fmt.Errorf("%w: row %d tool_calls is not valid JSON", store.ErrInvalidRecord, i)
		}
		r.ID, r.SessionID, r.Active = 0, sid, true
		if r.Time.IsZero() {
			r.Time = now
		} else {
			r.Time = r.Time.UTC()
		}
		out[i] = r
	}
	return out, nil
}

// checkFence refuses a write whose lease generation is not the current one. A zero fence is an
// unfenced (single-process) write. A fence from an expired lease that nobody took over still
// matches: no other owner can have written in between.
func checkFence(sid string, f store.Fence, current uint64) error {
	if f.Generation == 0 || f.Generation == current {
		return nil
	}
	return fmt.Errorf("%w: session %s: write carries generation %d, current is %d",
		store.ErrFenced, sid, f.Generation, current)
}
