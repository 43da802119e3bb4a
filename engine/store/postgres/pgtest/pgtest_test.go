package pgtest_test

import (
	"context"
	"testing"

	"github.com/hermes-go/hermes/engine/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Two databases are separate, and a crash-style restart keeps what was committed.
func TestDatabasesAndRestart(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	a, b := pgtest.DB(t), pgtest.DB(t)
	if a == b {
		t.Fatalf("two databases share a URL: %s", a)
	}
	exec := func(u, sql string) error {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(a, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := exec(b, "SELECT v FROM t"); err == nil {
		t.Fatal("a table of one database is visible in another")
	}
	if err := c.Restart(true); err != nil {
		t.Fatalf("restart after an immediate stop: %v", err)
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("committed row after a crash restart = %d, %v; want 42", v, err)
	}
}
