package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/ids"
	"github.com/hermes-go/hermes/engine/store"
)

// TestCreateRefusesBadIDs: the engine refuses an id no store could keep, lazy sessions
// included (they reach the store only at their first prompt), and Open of such an id is
// simply not found.
func TestCreateRefusesBadIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	for _, lazy := range []bool{false, true} {
		for _, id := range []string{"a\xffb", "a/b", "x\u202ey"} {
			_, err := h.eng.Create(ctx, engine.CreateOptions{ID: id, Lazy: lazy})
			if !errors.Is(err, store.ErrInvalidRecord) || !errors.Is(err, ids.ErrInvalid) {
				t.Errorf("Create(%q, lazy %v) = %v", id, lazy, err)
			}
			if _, ok := h.eng.Live(id); ok {
				t.Errorf("%q is live after a refused create", id)
			}
			if _, err := h.eng.Open(ctx, id); !errors.Is(err, engine.ErrSessionNotFound) {
				t.Errorf("Open(%q) = %v", id, err)
			}
		}
	}
	if list, err := h.st.ListSessions(ctx, store.ListOptions{}); err != nil || len(list) != 0 {
		t.Fatalf("stored after refused creates: %v %v", list, err)
	}
}
