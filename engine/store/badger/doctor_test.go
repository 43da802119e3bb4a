package badgerstore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/hermes-go/hermes/engine/store"
)

// poison writes records the way a store that accepted any id (or a damaged disk) left them,
// behind the committer's back.
func poison(t *testing.T, s *Store, kv map[string]string) {
	t.Helper()
	err := s.db.Update(func(txn *badger.Txn) error {
		for k, v := range kv {
			if err := txn.Set([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPoisonedListing is the poisoned-listing defect: one record whose key and id disagree
// (what a non-UTF-8 session id used to store) or that does not decode must not make every
// listing fail; it is skipped, logged once, and reported and quarantined by Doctor.
func TestPoisonedListing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var logs bytes.Buffer
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(ctx, store.Session{ID: "good", Title: "kept"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendRows(ctx, "good", store.Fence{}, []store.Row{{Role: "user", Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	poison(t, s, map[string]string{
		"s/a\xffb":  `{"id":"a\ufffdb","title":"poison","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`,
		"t/poison":  "a\xffb",
		"s/notjson": `{"id":`,
		"m/good/\x00\x00\x00\x00\x00\x00\x01\x00": `{broken`,
		"l/good": `[]`,
	})
	for range 2 {
		list, err := s.ListSessions(ctx, store.ListOptions{})
		if err != nil {
			t.Fatalf("ListSessions with a poisoned record: %v", err)
		}
		if len(list) != 1 || list[0].ID != "good" {
			t.Fatalf("ListSessions = %+v, want only good", list)
		}
	}
	if n := strings.Count(logs.String(), "cannot be decoded"); n != 2 {
		t.Fatalf("logged %d skips over two listings of two bad records, want 2 (once each):\n%s", n, logs.String())
	}

	problems, err := s.Doctor(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, p := range problems {
		kinds[p.Key] = p.Kind
		if p.MovedTo != "" {
			t.Fatalf("a report-only scan moved %q", p.Key)
		}
	}
	want := map[string]string{"s/a\xffb": "session", "s/notjson": "session", "m/good/\x00\x00\x00\x00\x00\x00\x01\x00": "row", "l/good": "lease"}
	if len(kinds) != len(want) {
		t.Fatalf("Doctor found %q, want %q", kinds, want)
	}
	for k, kind := range want {
		if kinds[k] != kind {
			t.Fatalf("Doctor found %q, want %q", kinds, want)
		}
	}

	moved, err := s.Doctor(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range moved {
		if !strings.HasPrefix(p.MovedTo, nsQuarantine) || !strings.HasSuffix(p.MovedTo, p.Key) {
			t.Fatalf("quarantine of %q went to %q", p.Key, p.MovedTo)
		}
		var got []byte
		if err := s.db.View(func(txn *badger.Txn) error {
			got, err = getCopy(txn, []byte(p.MovedTo))
			return err
		}); err != nil || got == nil {
			t.Fatalf("quarantined %q is not at %q: %v", p.Key, p.MovedTo, err)
		}
	}
	// The title of the quarantined session is free again, and the good session's transcript
	// reads without the broken row.
	if _, err := s.CreateSession(ctx, store.Session{ID: "fresh", Title: "poison"}); err != nil {
		t.Fatalf("title of a quarantined session still taken: %v", err)
	}
	rows, err := s.Rows(ctx, "good", store.RowQuery{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("Rows(good) after quarantine = %v, %v", rows, err)
	}

	// A restart keeps the store clean.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if again, err := s.Doctor(ctx, false); err != nil || len(again) != 0 {
		t.Fatalf("Doctor after quarantine and restart = %+v, %v", again, err)
	}
	list, err := s.ListSessions(ctx, store.ListOptions{})
	if err != nil || len(list) != 2 {
		t.Fatalf("ListSessions after restart = %+v, %v", list, err)
	}
}

// FuzzCheckRecord: the doctor's check never panics, and a session record it passes is one
// every reader decodes under its key.
func FuzzCheckRecord(f *testing.F) {
	f.Add([]byte("s/a"), []byte(`{"id":"a"}`))
	f.Add([]byte("s/a\xffb"), []byte(`{"id":"a\ufffdb"}`))
	f.Add([]byte("m/a/\x00\x00\x00\x00\x00\x00\x00\x01"), []byte(`{"role":"user"}`))
	f.Add([]byte("m//"), []byte(`{`))
	f.Add([]byte("l/a"), []byte(`{"generation":1}`))
	f.Fuzz(func(t *testing.T, key, val []byte) {
		p := checkRecord(key, val)
		if p == nil && bytes.HasPrefix(key, []byte(nsSession)) {
			s, err := decodeSession(key, val)
			if err != nil || s.ID != string(key[len(nsSession):]) {
				t.Fatalf("passed %q = %q, which does not decode under its key: %v", key, val, err)
			}
		}
	})
}
