package engine

import (
	"context"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// BenchmarkWarmTurnLease measures a warm text turn (submit → outcome, an instant model) with
// session leases off and on, on the in-memory store and on badger with synced writes: what
// taking, marking, watching and giving back the lease adds to each turn.
func BenchmarkWarmTurnLease(b *testing.B) {
	stores := map[string]func(b *testing.B) store.Store{
		"memory": func(*testing.B) store.Store { return memstore.New() },
		"badger": func(b *testing.B) store.Store {
			st, err := badgerstore.Open(b.TempDir(), badgerstore.DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
	for _, name := range []string{"memory", "badger"} {
		for _, leases := range []string{"off", "on"} {
			b.Run(name+"/leases_"+leases, func(b *testing.B) {
				st := stores[name](b)
				defer st.Close()
				p := newGated()
				e, err := New(Config{Store: st, Providers: map[string]model.Provider{"p": p}, DefaultModel: "p:m", Cwd: b.TempDir(), Leases: LeaseConfig{Off: leases == "off"}})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				ctx := context.Background()
				s, err := e.Create(ctx, CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				turn := func() {
					adm, err := s.Submit(ctx, Prompt{Text: "hello"})
					if err != nil {
						b.Fatal(err)
					}
					if out, err := s.Wait(ctx, adm.TurnID); err != nil || out.Status != StatusCompleted {
						b.Fatalf("%+v %v", out, err)
					}
				}
				turn() // warm
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					turn()
				}
			})
		}
	}
}
