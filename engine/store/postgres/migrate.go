package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hermes-go/hermes/engine/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one file of migrations/, NNNN_name.sql, applied once in version order.
type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	ents, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range ents {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must run 1, 2, 3… without gaps", m.name)
		}
	}
	return out, nil
}

// migrate brings schema up to the newest migration, in one transaction holding a transaction-
// scoped advisory lock on the schema's name: nodes starting together apply each migration once,
// the later ones waiting and then finding nothing to do. A database migrated by a newer hermes
// (a version this build does not know) is refused with store.ErrNewerFormat.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('hermes migrations'), hashtext($1))", schema); err != nil {
			return err
		}
		ident := pgx.Identifier{schema}.Sanitize()
		// search_path names the schema from the connection's start; it takes effect for
		// this transaction once the schema exists.
		setup := "CREATE SCHEMA IF NOT EXISTS " + ident + ";\n" +
			"SET LOCAL search_path TO " + ident + ";\n" +
			"CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, " +
			"applied_at timestamptz NOT NULL DEFAULT now())"
		if _, err := tx.Conn().PgConn().Exec(ctx, setup).ReadAll(); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err != nil {
			return err
		}
		if have > len(ms) {
			return fmt.Errorf("%w: schema %s is at migration %d, this build knows %d", store.ErrNewerFormat, schema, have, len(ms))
		}
		for _, m := range ms[have:] {
			if _, err := tx.Conn().PgConn().Exec(ctx, m.sql).ReadAll(); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	})
}
