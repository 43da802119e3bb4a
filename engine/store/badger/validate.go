package badgerstore

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/ids"
	"github.com/hermes-go/hermes/engine/store"
)

// Size limits keep keys far below badger's 64 KB key limit and make abuse fail early with a
// clear error instead of deep inside a transaction.
const (
	maxTitleLen = 4096
	maxKVKeyLen = 4096
)

func validateSessionID(id string) error {
	// The one identifier rule of every edge (ids.Check): an id a transport accepts is one the
	// store keeps under exactly that key, and JSON carries it unchanged.
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("%w: session id: %v", store.ErrInvalidRecord, err)
	}
	return nil
}

func validateTitle(title string) error {
	if len(title) > maxTitleLen {
		return fmt.Errorf("%w: title is %d bytes, limit %d", store.ErrInvalidRecord, len(title), maxTitleLen)
	}
	// The title index is keyed by the title's bytes; JSON would store a different string in
	// the record, and the two would disagree like a poisoned id.
	if !utf8.ValidString(title) {
		return fmt.Errorf("%w: title is not valid UTF-8", store.ErrInvalidRecord)
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
