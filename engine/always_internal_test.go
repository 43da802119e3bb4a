package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// heldList holds the first listing of the always approvals until released.
type heldList struct {
	store.Store
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (h *heldList) ListKV(ctx context.Context, prefix string) (map[string][]byte, error) {
	kv, err := h.Store.ListKV(ctx, prefix)
	held := false
	h.once.Do(func() { held = true })
	if held {
		close(h.entered)
		<-h.release
	}
	return kv, err
}

// A listing read before a pattern was taken away, and returned after a later call listed (and
// cached) the store without it, does not put the pattern back in the cache: a revoked "always"
// would otherwise let its calls run unasked until some later hint.
func TestAlwaysSlowListingDoesNotRevive(t *testing.T) {
	mem := memstore.New()
	t.Cleanup(func() { mem.Close() })
	ctx := context.Background()
	if err := mem.PutKV(ctx, alwaysKey("git push --force"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	st := &heldList{Store: mem, entered: make(chan struct{}), release: make(chan struct{})}
	e, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	slow := make(chan []string, 1)
	go func() { slow <- e.always(ctx) }() // lists with the pattern, then waits
	<-st.entered
	if err := mem.DeleteKV(ctx, alwaysKey("git push --force")); err != nil {
		t.Fatal(err)
	}
	if got := e.always(ctx); len(got) != 0 { // takes the hint, lists and caches without it
		t.Fatalf("after the delete: %v", got)
	}
	close(st.release)
	if got := <-slow; len(got) != 1 {
		t.Fatalf("the slow listing read %v, want the pattern it saw", got)
	}
	if got := e.always(ctx); len(got) != 0 {
		t.Fatalf("a revoked always approval is back in the cache: %v", got)
	}
}
