package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermes-go/hermes/engine/store"
)

// rewind validates a truncating submit and applies it with the new user row in one store
// transaction. Every refusal happens before anything is written.
func (s *Session) rewind(ctx context.Context, tr Truncate, userRow store.Row) (Admission, error) {
	if tr.BeforeRowID == 0 && tr.BeforeUserOrdinal == nil {
		return Admission{}, ErrTruncateNoTarget
	}
	if !tr.Confirm {
		return Admission{}, ErrTruncateConsent
	}
	rows, err := s.e.cfg.Store.Rows(ctx, s.id, store.RowQuery{})
	if err != nil {
		return Admission{}, err
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
			return Admission{}, fmt.Errorf("%w (row id %d)", ErrTruncateStale, tr.BeforeRowID)
		}
		if tr.BeforeUserOrdinal != nil && *tr.BeforeUserOrdinal != ordinal {
			return Admission{}, fmt.Errorf("%w: ordinal %d, row id target is turn %d", ErrTruncateMismatch, *tr.BeforeUserOrdinal, ordinal)
		}
	} else {
		o := *tr.BeforeUserOrdinal
		if o < 0 || o >= len(users) {
			return Admission{}, fmt.Errorf("%w (ordinal %d of %d user turns)", ErrTruncateStale, o, len(users))
		}
		// Durable sessions always have row ids; an ordinal alone could cut the wrong turn
		// after a concurrent edit, so it is refused.
		return Admission{}, ErrTruncateOrdinal
	}
	target := users[ordinal].ID
	before := 0
	for _, r := range rows {
		if r.ID < target {
			before++
		}
	}
	if before == 0 && len(rows) > 0 && !tr.ConfirmEmpty {
		return Admission{}, ErrTruncateEmpty
	}
	res, err := s.e.cfg.Store.Rewind(ctx, s.id, store.Fence{}, target, []store.Row{userRow})
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
