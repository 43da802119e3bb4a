package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
)

// hermes sessions -n: a count, 0 meaning all; a negative one is a usage error naming the flag,
// not a listing of everything.
func TestSessionsCountFlag(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	st, err := badgerstore.Open(filepath.Join(home, "state"), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 25 {
		id := "s-" + string(rune('a'+i))
		if _, err := st.CreateSession(ctx, store.Session{ID: id, Model: "openai:gpt-4o", Source: "cli"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendRows(ctx, id, store.Fence{}, []store.Row{{Role: "user", Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	env := []string{"HERMES_HOME=" + home}
	rows := func(args ...string) int {
		t.Helper()
		r := hermes(t, work, env, append([]string{"sessions"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d: %s", args, r.code, r.err)
		}
		return strings.Count(r.stdout, "\n") - 1 // the header
	}
	if n := rows(); n != 20 {
		t.Errorf("default: %d rows, want 20", n)
	}
	if n := rows("-n", "3"); n != 3 {
		t.Errorf("-n 3: %d rows", n)
	}
	if n := rows("-n", "0"); n != 25 {
		t.Errorf("-n 0: %d rows, want all 25", n)
	}
	for _, v := range []string{"-5", "-1"} {
		r := hermes(t, work, env, "sessions", "-n", v)
		if r.code != 2 || r.stdout != "" || strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, "hermes sessions: -n ") || !strings.Contains(r.err, v) {
			t.Errorf("-n %s: exit %d\nstdout %q\nstderr %s", v, r.code, r.stdout, r.err)
		}
	}
}
