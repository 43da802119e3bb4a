package store

import (
	"context"
	"fmt"
	"maps"
)

// maxUpdateRounds bounds how often Update runs fn again on a record that moved under it.
const maxUpdateRounds = 64

// Update is the loop behind every store's UpdateSession: read the record, apply fn to a copy
// (its Meta copied too), refuse a changed id, check the result, and have write store it only if
// the record is still at the version fn saw. write reports moved when it was not; then, with
// expectVersion 0, fn runs again on the newer record, at most 64 times. fn runs with nothing
// of the store held, so a slow fn holds up no writer and may itself call the store.
func Update(ctx context.Context, id string, expectVersion uint64,
	get func(context.Context, string) (Session, error),
	fn, check func(*Session) error,
	write func(cur, next Session) (out Session, moved bool, err error),
) (Session, error) {
	for round := 0; ; round++ {
		cur, err := get(ctx, id)
		if err != nil {
			return Session{}, err
		}
		if expectVersion != 0 && cur.Version != expectVersion {
			return Session{}, fmt.Errorf("session %q at version %d, caller expected %d: %w",
				id, cur.Version, expectVersion, ErrConflict)
		}
		next := cur
		next.Meta = maps.Clone(cur.Meta)
		if err := fn(&next); err != nil {
			return Session{}, err
		}
		if next.ID != cur.ID {
			return Session{}, fmt.Errorf("%w: update may not change the session id", ErrInvalidRecord)
		}
		if check != nil {
			if err := check(&next); err != nil {
				return Session{}, err
			}
		}
		out, moved, err := write(cur, next)
		switch {
		case err != nil:
			return Session{}, err
		case !moved:
			return out, nil
		case expectVersion != 0 || round+1 >= maxUpdateRounds:
			return Session{}, fmt.Errorf("session %q changed concurrently: %w", id, ErrConflict)
		}
	}
}
