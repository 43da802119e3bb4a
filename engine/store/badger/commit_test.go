package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

func mustOpen(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func appendOpFor(t *testing.T, sid string, n int, content string) (*op, []store.Row) {
	t.Helper()
	rows := make([]store.Row, n)
	for i := range rows {
		rows[i] = store.Row{Role: "tool", Content: content}
	}
	prepared, err := prepareRows(sid, rows, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]store.Row, n)
	return &op{apply: appendOp(sid, store.Fence{}, prepared, out, store.Usage{}, nil), done: make(chan struct{})}, out
}

// TestCommitBatchSplits hands the committer one batch far larger than a badger transaction,
// with a failing op and an op too large on its own in the middle, and checks that every other
// op commits, in order, and that the failures write nothing.
func TestCommitBatchSplits(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ctx := context.Background()
	if _, err := s.CreateSession(ctx, store.Session{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	row := strings.Repeat("x", 4000) // inline: below the value threshold, counts in full
	const good, perOp = 10, 250      // ~1 MB per op, ~10 MB in all: several transactions
	var ops []*op
	var outs [][]store.Row
	missing, _ := appendOpFor(t, "missing", 1, "x")
	tooBig, _ := appendOpFor(t, "a", 800, row) // ~3.2 MB: over the limit by itself
	for i := range good {
		o, out := appendOpFor(t, "a", perOp, row)
		ops, outs = append(ops, o), append(outs, out)
		switch i {
		case 3:
			ops = append(ops, missing)
		case 6:
			ops = append(ops, tooBig)
		}
	}

	// The committer goroutine is idle (nothing queued), so calling it directly keeps the single
	// writer rule; the session create above and the calls below order the accesses.
	s.commitBatch(ops)

	if !errors.Is(missing.err, store.ErrNotFound) {
		t.Fatalf("op for a missing session: %v, want ErrNotFound", missing.err)
	}
	if !errors.Is(tooBig.err, store.ErrInvalidRecord) {
		t.Fatalf("oversized op: %v, want ErrInvalidRecord", tooBig.err)
	}
	var last uint64
	for i, o := range ops {
		if o == missing || o == tooBig {
			continue
		}
		if o.err != nil {
			t.Fatalf("op %d: %v", i, o.err)
		}
	}
	for i, out := range outs {
		for _, r := range out {
			if r.ID <= last {
				t.Fatalf("op %d got row id %d after %d: ops committed out of order", i, r.ID, last)
			}
			last = r.ID
		}
	}

	check := func(s *Store) {
		t.Helper()
		sess, err := s.GetSession(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.Rows(ctx, "a", store.RowQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != good*perOp || sess.RowCount != good*perOp {
			t.Fatalf("%d rows, RowCount %d; want %d", len(rows), sess.RowCount, good*perOp)
		}
		if rows[len(rows)-1].ID != last {
			t.Fatalf("last stored row %d, last acknowledged %d", rows[len(rows)-1].ID, last)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	defer s.Close()
	check(s)
	more, err := s.AppendRows(ctx, "a", store.Fence{}, []store.Row{{Role: "user", Content: "next"}})
	if err != nil {
		t.Fatal(err)
	}
	if more[0].ID <= last {
		t.Fatalf("row id %d after reopen, but %d was issued before", more[0].ID, last)
	}
}

func TestLargeRewind(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ctx := context.Background()
	if _, err := s.CreateSession(ctx, store.Session{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	// 3,000 rows, 30 of them tool outputs big enough for the value log: a long session.
	const total = 3000
	var first []store.Row
	for b := range total / 500 {
		batch := make([]store.Row, 500)
		for i := range batch {
			n := b*500 + i
			c := fmt.Sprintf("row %d %s", n, strings.Repeat("t", 300))
			if n%100 == 50 {
				c = fmt.Sprintf("row %d %s", n, strings.Repeat("B", 50<<10))
			}
			batch[i] = store.Row{Role: "assistant", Content: c}
		}
		out, err := s.AppendRows(ctx, "a", store.Fence{}, batch)
		if err != nil {
			t.Fatalf("append batch %d: %v", b, err)
		}
		first = append(first, out...)
	}
	res, err := s.Rewind(ctx, "a", store.Fence{}, first[100].ID, nil)
	if err != nil {
		t.Fatalf("Rewind over %d rows: %v", total, err)
	}
	if len(res.Survivors) != 100 || res.Archived != total-100 {
		t.Fatalf("rewind kept %d, archived %d", len(res.Survivors), res.Archived)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	defer s.Close()
	all, err := s.Rows(ctx, "a", store.RowQuery{IncludeArchived: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total {
		t.Fatalf("%d rows with archive after reopen, want %d", len(all), total)
	}
	byContent := map[string]int{}
	for _, r := range all {
		byContent[r.Content]++
	}
	for _, r := range first {
		if byContent[r.Content] != 1 {
			t.Fatalf("row %q present %d times after rewind and reopen", r.Content[:12], byContent[r.Content])
		}
	}
}

// TestRewindBeyondTransactionLimit documents the limit: a rewind that cannot fit in one
// transaction fails cleanly and writes nothing.
func TestRewindBeyondTransactionLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 15,000 rows")
	}
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	if _, err := s.CreateSession(ctx, store.Session{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	for range 15 {
		batch := make([]store.Row, 1000)
		for i := range batch {
			batch[i] = store.Row{Role: "user", Content: "x"}
		}
		if _, err := s.AppendRows(ctx, "a", store.Fence{}, batch); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.GetSession(ctx, "a")
	_, err := s.Rewind(ctx, "a", store.Fence{}, 0, nil)
	if !errors.Is(err, store.ErrInvalidRecord) {
		t.Fatalf("rewind of 15,000 rows: %v, want ErrInvalidRecord (too large)", err)
	}
	after, _ := s.GetSession(ctx, "a")
	rows, _ := s.Rows(ctx, "a", store.RowQuery{})
	if after.Version != before.Version || after.Rewinds != 0 || len(rows) != 15000 {
		t.Fatalf("failed rewind wrote: version %d→%d, rewinds %d, %d active rows", before.Version, after.Version, after.Rewinds, len(rows))
	}
	// The committer carries on.
	if _, err := s.AppendRows(ctx, "a", store.Fence{}, []store.Row{{Role: "user", Content: "y"}}); err != nil {
		t.Fatalf("append after a failed oversized rewind: %v", err)
	}
}
