package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/postgres"
	"github.com/hermes-go/hermes/engine/store/postgres/pgtest"
	"github.com/hermes-go/hermes/engine/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Each store of the suite gets a schema of its own, which is much cheaper than a database and
// isolates the same way (tables, sequence, NOTIFY channel).
var schemaSeq atomic.Int64

func openSchema(t testing.TB, url, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open(%s): %v", schema, err)
	}
	return s
}

func freshSchema() string { return fmt.Sprintf("s%d", schemaSeq.Add(1)) }

func TestStore(t *testing.T) {
	url := pgtest.DB(t)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store { return openSchema(t, url, freshSchema()) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			ps := s.(*postgres.Store)
			if err := ps.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openSchema(t, url, ps.Schema())
		},
	})
}
