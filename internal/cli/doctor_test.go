package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// poisonStore writes records behind the store's back, as a store that accepted any id (or a
// damaged disk) left them.
func poisonStore(t *testing.T, dir string, kv map[string]string) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		for k, v := range kv {
			if err := txn.Set([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestDoctorQuarantinesPoisonedRecords is the poisoned-listing defect end to end: a record
// whose key and id disagree (what a non-UTF-8 X-Hermes-Session-Id used to store) no longer
// breaks `hermes sessions`; `hermes doctor` reports it (exit 1), `--quarantine` moves it aside
// (exit 0), and afterwards the store is clean.
func TestDoctorQuarantinesPoisonedRecords(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	env := []string{"HERMES_HOME=" + home}
	// A checkup creates nothing: on a home without a store it says so and leaves no store.
	if r := hermes(t, work, env, "doctor", "--check", "store"); r.code != 0 || !strings.Contains(r.stdout, "does not exist") {
		t.Fatalf("doctor on a home without a store: %d\n%s%s", r.code, r.stdout, r.err)
	}
	if _, err := os.Stat(filepath.Join(home, "state")); !os.IsNotExist(err) {
		t.Fatalf("doctor created the store: %v", err)
	}
	if r := hermes(t, work, env, "sessions"); r.code != 0 {
		t.Fatalf("sessions on a new home: %d\n%s%s", r.code, r.stdout, r.err)
	}
	if r := hermes(t, work, env, "doctor", "--check", "store"); r.code != 0 || !strings.Contains(r.stdout, "no problems found") {
		t.Fatalf("doctor on a new store: %d\n%s%s", r.code, r.stdout, r.err)
	}
	poisonStore(t, filepath.Join(home, "state"), map[string]string{
		"s/good":   `{"id":"good","title":"kept","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","version":1}`,
		"s/a\xffb": `{"id":"a\ufffdb","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","version":1}`,
	})
	r := hermes(t, work, env, "sessions")
	if r.code != 0 || !strings.Contains(r.stdout, "good") {
		t.Fatalf("sessions with a poisoned record: %d\n%s%s", r.code, r.stdout, r.err)
	}
	r = hermes(t, work, env, "doctor", "--check", "store", "--json")
	var rep struct {
		Problems []struct{ Kind, Key, Reason, MovedTo string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r.stdout)
	}
	if r.code != 1 || len(rep.Problems) != 1 || rep.Problems[0].Kind != "session" || rep.Problems[0].Key != `"s/a\xffb"` {
		t.Fatalf("doctor: %d %+v\n%s", r.code, rep, r.err)
	}
	r = hermes(t, work, env, "doctor", "--check", "store", "--quarantine")
	if r.code != 0 || !strings.Contains(r.stdout, "quarantined as") {
		t.Fatalf("doctor --quarantine: %d\n%s%s", r.code, r.stdout, r.err)
	}
	if r := hermes(t, work, env, "doctor", "--check", "store"); r.code != 0 || !strings.Contains(r.stdout, "no problems found") {
		t.Fatalf("doctor after quarantine: %d\n%s%s", r.code, r.stdout, r.err)
	}
	if r := hermes(t, work, env, "doctor", "extra"); r.code != 2 {
		t.Fatalf("usage: %d", r.code)
	}
}
