package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/postgres"
	"github.com/hermes-go/hermes/engine/store/postgres/pgtest"
)

// HERMES_STORE=postgres://… puts the CLI's sessions in PostgreSQL: a chat turn is stored there
// (not in the home's badger directory) and listed by another process.
func TestPostgresStoreSelected(t *testing.T) {
	c, err := pgtest.Start()
	if err != nil {
		if pgtest.Required() {
			t.Fatalf("PostgreSQL required (HERMES_PG=required): %v", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	url, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	home, work := t.TempDir(), t.TempDir()
	cassette := repoPath("scripts", "demo", "demo.cassette.json")
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + cassette, "HERMES_STORE=" + url}
	r := hermes(t, work, env, "chat", "--approve", "deny", "-q", demoPrompt)
	if r.code != 0 || !strings.Contains(r.stdout, demoAnswer) {
		t.Fatalf("chat on postgres: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.err)
	}
	id := regexp.MustCompile(`\[session (\S+) ·`).FindStringSubmatch(r.err)
	if id == nil {
		t.Fatalf("no session id in stderr: %s", r.err)
	}
	if _, err := os.Stat(filepath.Join(home, "state")); !os.IsNotExist(err) {
		t.Fatalf("the badger directory was made although the store is PostgreSQL (stat: %v)", err)
	}
	ls := hermes(t, work, env, "sessions")
	if ls.code != 0 || !strings.Contains(ls.stdout, id[1]) {
		t.Fatalf("sessions on postgres: %d %s %s", ls.code, ls.stdout, ls.err)
	}
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.Rows(ctx, id[1], store.RowQuery{})
	if err != nil || len(rows) < 2 || !strings.Contains(rows[len(rows)-1].Content, demoAnswer) {
		t.Fatalf("rows in PostgreSQL: %d, %v", len(rows), err)
	}

	bad := hermes(t, work, []string{"HERMES_HOME=" + home, "HERMES_STORE=mysql://u:pw@h/db"}, "sessions")
	if bad.code == 0 || !strings.Contains(bad.err, `"mysql" stores are not supported`) || strings.Contains(bad.err, "pw") {
		t.Fatalf("an unsupported store url: exit %d, stderr %s", bad.code, bad.err)
	}
}
