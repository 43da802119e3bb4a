package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermes-go/hermes/engine/store"
)

// checkRewind validates a truncating submit against the stored transcript without writing and
// returns the row id to cut before. Submit calls it before claiming the turn, so a refusal
// leaves no trace at all; rewind checks again under the claim (the store refuses a row that
// went stale meanwhile).
func (s *Session) checkRewind(ctx context.Context, tr Truncate) (uint64, error) {
	if tr.BeforeRowID == 0 && tr.BeforeUserOrdinal == nil {
		return 0, ErrTruncateNoTarget
	}
	if !tr.Confirm {
		return 0, ErrTruncateConsent
	}
	rows, err := s.History(ctx, store.RowQuery{}) // none yet for a lazy session
	if err != nil {
		return 0, err
	}
	var users []store.Row
	for _, r := range rows {
		if r.Role == "user" {
			users = append(users, r)
		}
	}
	ordinal := -1
	if tr.BeforeRowID != 0 {
		for i, u := range users {
			if u.ID == tr.BeforeRowID {
				ordinal = i
			}
		}
		if ordinal < 0 {
			// A user row a compaction archived: rewind along the lineage (lineage.go).
			seg, ok, err := s.lineageBefore(ctx, tr.BeforeRowID)
			if err != nil {
				return 0, err
			}
			if !ok || tr.BeforeUserOrdinal != nil { // ordinals count the active transcript only
				return 0, fmt.Errorf("%w (row id %d)", ErrTruncateStale, tr.BeforeRowID)
			}
			if len(seg) == 0 && !tr.ConfirmEmpty {
				return 0, ErrTruncateEmpty
			}
			return tr.BeforeRowID, nil
		}
		if tr.BeforeUserOrdinal != nil && *tr.BeforeUserOrdinal != ordinal {
			return 0, fmt.Errorf("%w: ordinal %d, row id target is turn %d", ErrTruncateMismatch, *tr.BeforeUserOrdinal, ordinal)
		}
	} else {
		o := *tr.BeforeUserOrdinal
		if o < 0 || o >= len(users) {
			return 0, fmt.Errorf("%w (ordinal %d of %d user turns)", ErrTruncateStale, o, len(users))
		}
		// Durable sessions always have row ids; an ordinal alone could cut the wrong turn
		// after a concurrent edit, so it is refused.
		return 0, ErrTruncateOrdinal
	}
	target := users[ordinal].ID
	before := 0
	for _, r := range rows {
		if r.ID < target {
			before++
		}
	}
	if before == 0 && len(rows) > 0 && !tr.ConfirmEmpty {
		return 0, ErrTruncateEmpty
	}
	return target, nil
}

// rewind validates a truncating submit and applies it with the new user row in one store
// transaction. Every refusal happens before anything is written.
func (s *Session) rewind(ctx context.Context, tr Truncate, userRow store.Row) (Admission, error) {
	target, err := s.checkRewind(ctx, tr)
	if err != nil {
		return Admission{}, err
	}
	s.uncalibrate()
	if seg, ok, err := s.lineageBefore(ctx, target); err != nil {
		return Admission{}, err
	} else if ok {
		return s.rewindLineage(ctx, seg, userRow)
	}
	res, err := s.wst().Rewind(ctx, s.id, store.Fence{}, target, []store.Row{userRow})
	if errors.Is(err, store.ErrStaleRow) {
		return Admission{}, fmt.Errorf("%w (row id %d)", ErrTruncateStale, target)
	}
	if err != nil {
		return Admission{}, err
	}
	adm := Admission{Survivors: []uint64{}}
	for _, r := range res.Survivors {
		if r.Role == "user" {
			adm.Survivors = append(adm.Survivors, r.ID)
		}
	}
	if len(res.Appended) == 1 {
		adm.UserRowID = res.Appended[0].ID
	}
	if err := s.reload(ctx); err != nil {
		return Admission{}, err
	}
	return adm, nil
}
