package memstore_test

import (
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(*testing.T) store.Store { return memstore.New() },
	})
}

// Baseline for the badger store's append benchmarks.
func BenchmarkAppend100Sessions(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	storetest.BenchmarkAppend(b, s, 100)
}
