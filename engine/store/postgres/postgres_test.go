package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/postgres"
	"github.com/hermes-go/hermes/engine/store/postgres/pgtest"
)

var ctx = context.Background()

func query(t *testing.T, url, sql string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Nodes starting at once on an empty database: each migration is applied exactly once, and
// every node comes up.
func TestConcurrentStarts(t *testing.T) {
	url := pgtest.DB(t)
	const nodes = 6
	stores := make([]*postgres.Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(ctx, url, postgres.Options{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	files, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	if n := query(t, url, "SELECT count(*) FROM hermes.schema_migrations"); n != len(files) {
		t.Fatalf("%d migration rows after %d concurrent starts, want one per file (%d)", n, nodes, len(files))
	}
	// All of them are usable and see one another's writes.
	if _, err := stores[0].CreateSession(ctx, store.Session{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[nodes-1].GetSession(ctx, "a"); err != nil {
		t.Fatalf("a session made on one node, read on another: %v", err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.DB(t)
	s := openSchema(t, url, "hermes")
	_ = s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO hermes.schema_migrations (version, name) VALUES (999, '0999_future.sql')"); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, url, postgres.Options{})
	if !errors.Is(err, store.ErrNewerFormat) {
		t.Fatalf("Open of a schema migrated by a newer build: %v, want ErrNewerFormat", err)
	}
}

// waitHint waits for a hint naming want, or for Lost when want is zero.
func waitHint(t *testing.T, sub *store.Subscription, want store.Change) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-sub.C():
			if !ok {
				t.Fatal("subscription ended")
			}
			cs, lost := sub.Take()
			if want == (store.Change{}) && lost {
				return
			}
			for _, c := range cs {
				if c == want {
					return
				}
			}
		case <-deadline:
			t.Fatalf("no hint %+v within 20s", want)
		}
	}
}

// Two nodes on one schema: a write on one wakes the other's watcher (NOTIFY), and a fence
// taken on one refuses the other's stale writes.
func TestTwoNodes(t *testing.T) {
	url := pgtest.DB(t)
	a, b := openSchema(t, url, "hermes"), openSchema(t, url, "hermes")
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	sub, err := b.Watch(ctx, store.Interest{Sessions: []string{"s"}, KeyPrefixes: []string{"runs/"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := a.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	waitHint(t, sub, store.Change{SessionID: "s"})
	if err := a.PutKV(ctx, "runs/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitHint(t, sub, store.Change{Key: "runs/1"})

	la, err := a.AcquireLease(ctx, "s", "node-a", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitPast(la.Expires)
	lb, err := b.AcquireLease(ctx, "s", "node-b", time.Hour)
	if err != nil || lb.Generation <= la.Generation {
		t.Fatalf("takeover on node b: %+v, %v", lb, err)
	}
	_, err = a.AppendRows(ctx, "s", store.Fence{Generation: la.Generation}, []store.Row{{Role: "user", Content: "zombie"}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old holder's append on node a: %v, want ErrFenced", err)
	}
	if _, err := b.AppendRows(ctx, "s", store.Fence{Generation: lb.Generation}, []store.Row{{Role: "user", Content: "owner"}}); err != nil {
		t.Fatal(err)
	}
	rows, err := a.Rows(ctx, "s", store.RowQuery{IncludeArchived: true})
	if err != nil || len(rows) != 1 || rows[0].Content != "owner" {
		t.Fatalf("rows = %+v, %v; want only the owner's", rows, err)
	}
}

// A fenced write in flight holds the lease row: a takeover waits for it to commit, and every
// write of the old holder after the takeover is refused. Many writers race one takeover; the
// rows that got in all carry the old generation's commits before it, none after.
func TestFenceRacesTakeover(t *testing.T) {
	url := pgtest.DB(t)
	s := openSchema(t, url, "hermes")
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	old, err := s.AcquireLease(ctx, "s", "zombie", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	stale := store.Fenced(s, "s", old.Generation)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []uint64
	stop := make(chan struct{})
	first := make(chan struct{}, 8)
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rs, err := stale.AppendRows(ctx, "s", store.Fence{}, []store.Row{{Role: "assistant", Content: "z"}})
				if errors.Is(err, store.ErrFenced) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, rs[0].ID)
				mu.Unlock()
				select {
				case first <- struct{}{}:
				default:
				}
			}
		})
	}
	// Take over while the old holder's writes are in full flow.
	for range 8 {
		<-first
	}
	cur, err := s.AcquireLease(ctx, "s", "owner", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mark, err := s.AppendRows(ctx, "s", store.Fence{Generation: cur.Generation}, []store.Row{{Role: "system", Content: "takeover"}})
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no write of the old holder got in before the takeover; the race did not happen")
	}
	for _, id := range acked {
		if id > mark[0].ID {
			t.Fatalf("the old holder's row %d was acknowledged after the new holder's first row %d", id, mark[0].ID)
		}
	}
	rows, err := s.Rows(ctx, "s", store.RowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if last := rows[len(rows)-1]; last.Content != "takeover" || len(rows) != len(acked)+1 {
		t.Fatalf("%d rows, last %q; want the %d acknowledged ones then the takeover mark", len(rows), last.Content, len(acked))
	}
}

// Text PostgreSQL cannot hold in a text column: content keeps it byte for byte (bytea), the
// other fields refuse it with ErrInvalidRecord and write nothing.
func TestTextEdges(t *testing.T) {
	s := openSchema(t, pgtest.DB(t), "hermes")
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	odd := "nul\x00 and bad \xff utf-8"
	if _, err := s.AppendRows(ctx, "s", store.Fence{}, []store.Row{{Role: "assistant", Content: odd, Reasoning: odd,
		ToolCalls: []byte(`[{"a":"\u0000"}]`), Attachments: []string{"a.png"}}}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Rows(ctx, "s", store.RowQuery{})
	if err != nil || len(rows) != 1 || rows[0].Content != odd || rows[0].Reasoning != odd ||
		string(rows[0].ToolCalls) != `[{"a":"\u0000"}]` || len(rows[0].Attachments) != 1 {
		t.Fatalf("rows = %+v, %v", rows, err)
	}
	_, err = s.AppendRows(ctx, "s", store.Fence{}, []store.Row{{Role: "user", TurnID: "t\x00"}})
	if !errors.Is(err, store.ErrInvalidRecord) {
		t.Fatalf("turn id with NUL: %v", err)
	}
	_, err = s.CreateSession(ctx, store.Session{ID: "m", Meta: map[string]string{"k": "\x00"}})
	if !errors.Is(err, store.ErrInvalidRecord) {
		t.Fatalf("meta with NUL: %v", err)
	}
	if got, _ := s.GetSession(ctx, "s"); got.RowCount != 1 {
		t.Fatalf("refused writes changed the session: %+v", got)
	}
	// Keys are bytes: any key, listed by bytewise prefix.
	for _, k := range []string{"p/\xff", "p/\xff\xff", "p0", "p/"} {
		if err := s.PutKV(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := s.ListKV(ctx, "p/\xff")
	if err != nil || len(m) != 2 || string(m["p/\xff\xff"]) != "p/\xff\xff" {
		t.Fatalf("ListKV(p/\\xff) = %q, %v", m, err)
	}
	if m, _ := s.ListKV(ctx, "p/"); len(m) != 3 {
		t.Fatalf("ListKV(p/) = %q", m)
	}
}

// The database restarts under a running node: calls during the outage fail with
// ErrUnavailable, the node reconnects by itself, its watchers are told they may have missed
// hints, hints flow again, and nothing acknowledged before is lost.
func TestDatabaseRestart(t *testing.T) {
	c := pgtest.Shared(t)
	url := pgtest.DB(t)
	a, b := openSchema(t, url, "hermes"), openSchema(t, url, "hermes")
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	if _, err := a.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	acked, err := a.AppendRows(ctx, "s", store.Fence{}, []store.Row{{Role: "user", Content: "before"}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.Watch(ctx, store.Interest{Sessions: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	_, err = a.AppendRows(ctx, "s", store.Fence{}, []store.Row{{Role: "user", Content: "during"}})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("append while the database is down: %v, want ErrUnavailable", err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitHint(t, sub, store.Change{}) // Lost: the listening connection was cut
	var got []store.Row
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err = a.Rows(ctx, "s", store.RowQuery{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || len(got) != 1 || got[0].ID != acked[0].ID {
		t.Fatalf("rows after restart = %+v, %v; want the acknowledged row only", got, err)
	}
	if _, err := a.AppendRows(ctx, "s", store.Fence{}, []store.Row{{Role: "user", Content: "after"}}); err != nil {
		t.Fatalf("append after restart: %v", err)
	}
	waitHint(t, sub, store.Change{SessionID: "s"})
}

// A node whose listening connection is cut (here by the database) reconnects by itself.
func TestListenerReconnects(t *testing.T) {
	url := pgtest.DB(t)
	a, b := openSchema(t, url, "hermes"), openSchema(t, url, "hermes")
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	sub, err := b.Watch(ctx, store.Interest{AllSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	n := query(t, url, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`)
	if n != 2 {
		t.Fatalf("terminated %d listening connections, want 2", n)
	}
	waitHint(t, sub, store.Change{})
	if _, err := a.CreateSession(ctx, store.Session{ID: "after"}); err != nil {
		t.Fatal(err)
	}
	waitHint(t, sub, store.Change{SessionID: "after"})
}

// waitPast sleeps until the wall clock (the database's too: same machine) is past t.
func waitPast(t time.Time) {
	for time.Now().Before(t.Add(time.Millisecond)) {
		time.Sleep(time.Until(t) + time.Millisecond)
	}
}

// Appends of many sessions at once share commits (group.go): a stale holder among them is
// refused alone, a missing session is reported alone, and everything acknowledged is stored,
// each append's rows adjacent and in order.
func TestGroupedAppends(t *testing.T) {
	s := openSchema(t, pgtest.DB(t), "hermes")
	t.Cleanup(func() { _ = s.Close() })
	const sessions, each = 24, 30
	fences := make([]store.Fence, sessions)
	for i := range sessions {
		sid := fmt.Sprintf("g%d", i)
		if _, err := s.CreateSession(ctx, store.Session{ID: sid}); err != nil {
			t.Fatal(err)
		}
		l, err := s.AcquireLease(ctx, sid, "n", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		fences[i] = store.Fence{Generation: l.Generation}
		if i%4 == 3 { // a stale holder: its writes must all be refused
			fences[i] = store.Fence{Generation: l.Generation + 1}
		}
	}
	acked := make([][]string, sessions)
	ackedIDs := make([][]uint64, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			sid := fmt.Sprintf("g%d", i)
			for n := range each {
				a, b := fmt.Sprintf("%d-a", n), fmt.Sprintf("%d-b", n)
				got, err := s.AppendRows(ctx, sid, fences[i], []store.Row{{Role: "user", Content: a}, {Role: "assistant", Content: b}})
				switch {
				case i%4 == 3 && !errors.Is(err, store.ErrFenced):
					t.Errorf("%s: stale append: %v, want ErrFenced", sid, err)
				case i%4 != 3 && err != nil:
					t.Errorf("%s: %v", sid, err)
				case err == nil:
					acked[i] = append(acked[i], a, b)
					ackedIDs[i] = append(ackedIDs[i], got[0].ID, got[1].ID)
				}
				if _, err := s.AppendRows(ctx, "missing", store.Fence{}, []store.Row{{Role: "user"}}); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("append to a missing session: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for i := range sessions {
		rows, err := s.Rows(ctx, fmt.Sprintf("g%d", i), store.RowQuery{IncludeArchived: true})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(rows))
		for j, r := range rows {
			got[j] = r.Content
			if r.ID != ackedIDs[i][j] {
				t.Fatalf("g%d: row %d stored with id %d, acknowledged with %d", i, j, r.ID, ackedIDs[i][j])
			}
			if j > 0 && r.ID <= rows[j-1].ID {
				t.Fatalf("g%d: ids not ascending: %d after %d", i, r.ID, rows[j-1].ID)
			}
		}
		if !slices.Equal(got, acked[i]) {
			t.Fatalf("g%d: stored %q, acknowledged %q", i, got, acked[i])
		}
		if sess, _ := s.GetSession(ctx, fmt.Sprintf("g%d", i)); sess.RowCount != int64(len(acked[i])) {
			t.Fatalf("g%d: row_count %d, rows %d", i, sess.RowCount, len(acked[i]))
		}
	}
}

// A lease released while another owner's acquire finds it held is acquired, or reported held,
// never an error of its own: the acquire read the released row (no expiry) and failed with a
// scan error, which a request answered as a 503.
func TestAcquireRacesRelease(t *testing.T) {
	s := openSchema(t, pgtest.DB(t), "hermes")
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // holder a takes the lease and gives it back as fast as it can
		for {
			select {
			case <-stop:
				return
			default:
			}
			if l, err := s.AcquireLease(ctx, "s", "a", time.Minute); err == nil {
				_ = s.ReleaseLease(ctx, l)
			}
		}
	})
	got, held := 0, 0
	for range 400 {
		l, err := s.AcquireLease(ctx, "s", "b", time.Minute)
		switch {
		case err == nil:
			got++
			if err := s.ReleaseLease(ctx, l); err != nil {
				t.Fatal(err)
			}
		case errors.Is(err, store.ErrLeaseHeld):
			held++
		default:
			close(stop)
			wg.Wait()
			t.Fatalf("acquire racing a release: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("acquired %d, found held %d", got, held)
}
