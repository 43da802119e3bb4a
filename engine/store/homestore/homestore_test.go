package homestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/homestore"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/store/storetest"
)

// inProcess runs a store process's Serve in this test process over a badger directory under
// home, until the test ends or the returned stop is called.
func inProcess(t *testing.T, home string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- homestore.Serve(ctx, homestore.ServerOptions{
			Home: home,
			Open: func() (store.Store, error) {
				return badgerstore.Open(filepath.Join(home, "state"), badgerstore.DefaultOptions())
			},
			Ready: func() { close(ready) },
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func dial(t *testing.T, home string) *homestore.Client {
	t.Helper()
	c, err := homestore.Dial(context.Background(), homestore.ClientOptions{Home: home, Patience: 5 * time.Second})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// shortHome is a home directory with a path short enough for a plain socket address.
func shortHome(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestStore(t *testing.T) {
	stops := map[store.Store]func(){}
	homes := map[store.Store]string{}
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			home := t.TempDir() // long: exercises the long-path socket address
			stop := inProcess(t, home)
			c := dial(t, home)
			stops[c], homes[c] = stop, home
			return c
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			stops[s]()
			home := homes[s]
			stop := inProcess(t, home)
			c := dial(t, home)
			stops[c], homes[c] = stop, home
			return c
		},
	})
}

func TestSocketPrivate(t *testing.T) {
	home := shortHome(t)
	inProcess(t, home)
	fi, err := os.Stat(homestore.SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	// A second server on the same home refuses: the first holds the lock and answers.
	err = homestore.Serve(context.Background(), homestore.ServerOptions{
		Home: home,
		Open: func() (store.Store, error) { t.Fatal("second server opened the store"); return nil, nil },
	})
	if !errors.Is(err, homestore.ErrRunning) {
		t.Fatalf("second Serve = %v, want ErrRunning", err)
	}
	if pid, held := homestore.LockHolder(home); !held || pid != os.Getpid() {
		t.Fatalf("LockHolder = %d, %v; want this process, held", pid, held)
	}
}

func TestUnavailable(t *testing.T) {
	home := shortHome(t)
	_, err := homestore.Dial(context.Background(), homestore.ClientOptions{Home: home, Patience: 50 * time.Millisecond})
	var ue *homestore.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Dial with no store process = %v, want an UnavailableError", err)
	}
	for _, want := range []string{home, homestore.SocketPath(home), homestore.LogPath(home)} {
		if !contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || (len(s) >= len(sub) && index(s, sub) >= 0) }

func index(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// stuckClose is a store whose Close never returns, as badger's does when its directory was
// removed under it (it retries writing its tables forever).
type stuckClose struct {
	store.Store
	closing chan struct{}
}

func (s *stuckClose) Close() error {
	close(s.closing)
	select {}
}

// TestStoppedAfterSocketRemoved: a store process told to stop (a signal or its idle timer) in
// the second between its home's removal and the watcher noticing leaves without closing the
// store, which could never finish closing: it exits instead of hanging.
func TestStoppedAfterSocketRemoved(t *testing.T) {
	home := shortHome(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	st := &stuckClose{Store: memstore.New(), closing: make(chan struct{})}
	go func() {
		done <- homestore.Serve(ctx, homestore.ServerOptions{
			Home:  home,
			Open:  func() (store.Store, error) { return st, nil },
			Ready: func() { close(ready) },
		})
	}()
	<-ready
	if err := os.Remove(homestore.SocketPath(home)); err != nil {
		t.Fatal(err)
	}
	cancel() // before the watcher's next look
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-st.closing:
		t.Fatal("closed a store whose home was removed")
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// TestListCarriesUsage: a listing over the store process carries every usage field, cost and
// cache writes included, as the session record does.
func TestListCarriesUsage(t *testing.T) {
	ctx := context.Background()
	home := shortHome(t)
	inProcess(t, home)
	c := dial(t, home)
	if _, err := c.CreateSession(ctx, store.Session{ID: "u1", Source: "cli"}); err != nil {
		t.Fatal(err)
	}
	want := store.Usage{InputTokens: 3, OutputTokens: 2, CachedTokens: 1, CacheWriteTokens: 7, ReasoningTokens: 4, APICalls: 1, ToolCalls: 5, CostUSD: 0.0125}
	if _, err := c.UpdateSession(ctx, "u1", 0, func(s *store.Session) error { s.Usage = want; return nil }); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSessions(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Usage != want {
		t.Fatalf("listed %+v, want one session with usage %+v", list, want)
	}
}
