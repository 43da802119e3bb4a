package badgerstore_test

import (
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/storetest"
)

func openDir(t *testing.T, dir string) *badgerstore.Store {
	t.Helper()
	s, err := badgerstore.Open(dir, badgerstore.DefaultOptions())
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store { return openDir(t, t.TempDir()) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			bs := s.(*badgerstore.Store)
			if err := bs.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openDir(t, bs.Dir())
		},
	})
}

func TestStoreInMemory(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			s, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
			if err != nil {
				t.Fatalf("Open in memory: %v", err)
			}
			return s
		},
	})
}
