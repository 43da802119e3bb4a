package badgerstore_test

import (
	"testing"

	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/storetest"
)

func benchAppend(b *testing.B, sync bool, writers int) {
	s, err := badgerstore.Open(b.TempDir(), badgerstore.Options{SyncWrites: sync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkAppend(b, s, writers)
}

// 100 sessions appending at once, every row fsynced before it is acknowledged.
func BenchmarkAppendSynced100Sessions(b *testing.B) { benchAppend(b, true, 100) }

// The same without fsync: the cost of the store itself.
func BenchmarkAppendUnsynced100Sessions(b *testing.B) { benchAppend(b, false, 100) }

// One writer, synced: no concurrency to group, so one fsync per row.
func BenchmarkAppendSyncedSingleWriter(b *testing.B) { benchAppend(b, true, 1) }
