package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
)

// TestCLIIsTheLocalOwner: hermes sessions lists the local owner's sessions (and, with -all,
// every principal's, naming the owner), never a deleted one; hermes chat does not continue
// another principal's.
func TestCLIIsTheLocalOwner(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	st, err := badgerstore.Open(filepath.Join(home, "state"), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, s := range []store.Session{
		{ID: "local-one", Title: "mine", Model: "openai:x", CreatedAt: now, UpdatedAt: now},
		{ID: "api-other", Title: "theirs", Model: "openai:x", CreatedAt: now, UpdatedAt: now, Principal: "key_0123456789abcdef"},
		{ID: "local-gone", Title: "deleted", Model: "openai:x", CreatedAt: now, UpdatedAt: now, Meta: map[string]string{engine.MetaDeleted: now.Format(time.RFC3339)}},
	} {
		if _, err := st.CreateSession(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:x", "OPENAI_API_KEY=k", "OPENAI_BASE_URL=http://127.0.0.1:9/v1"}
	r := hermes(t, work, env, "sessions")
	if r.code != 0 || !strings.Contains(r.stdout, "local-one") || strings.Contains(r.stdout, "api-other") || strings.Contains(r.stdout, "local-gone") {
		t.Fatalf("sessions: %d %s %s", r.code, r.stdout, r.err)
	}
	r = hermes(t, work, env, "sessions", "-all")
	if r.code != 0 || !strings.Contains(r.stdout, "local-one") || !strings.Contains(r.stdout, "api-other") || sessionRow(r.stdout, "api-other")["OWNER"] != "key_0123456789abcdef" || strings.Contains(r.stdout, "local-gone") {
		t.Fatalf("sessions -all: %d %s %s", r.code, r.stdout, r.err)
	}
	r = hermes(t, work, env, "chat", "--session", "api-other", "-q", "hello")
	if r.code == 0 || !strings.Contains(r.err, "another principal") {
		t.Fatalf("chat into another principal's session: %d %s %s", r.code, r.stdout, r.err)
	}
}
