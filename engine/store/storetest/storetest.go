// Package storetest is the behaviour suite every store.Store implementation must pass. An
// implementation's tests call Run with a Harness that opens fresh stores (and, for persistent
// stores, reopens one over the same data).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Harness adapts one implementation to the suite.
type Harness struct {
	// Open returns a new, empty store. The suite closes it (Close must tolerate a second call).
	Open func(t *testing.T) store.Store
	// Reopen closes s and opens a store over the same data. Nil when the store does not persist;
	// the persistence cases are then skipped.
	Reopen func(t *testing.T, s store.Store) store.Store
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, h Harness) {
	cases := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"CreateGet", testCreateGet},
		{"List", testList},
		{"Titles", testTitles},
		{"CompareAndSet", testCAS},
		{"ConcurrentUpdate", testConcurrentUpdate},
		{"Append", testAppend},
		{"AppendRowsUsage", testAppendUsage},
		{"RowQueries", testRowQueries},
		{"Rewind", testRewind},
		{"RewindStale", testRewindStale},
		{"RewindAll", testRewindAll},
		{"CopyRows", testCopyRows},
		{"Leases", testLeases},
		{"Fencing", testFencing},
		{"LeaseRenew", testLeaseRenew},
		{"GetLease", testGetLease},
		{"LeaseRace", testLeaseRace},
		{"FencedWrites", testFencedWrites},
		{"Watch", testWatch},
		{"KV", testKV},
		{"KVCompareAndSwap", testKVCAS},
		{"Events", testEvents},
		{"EventsFenced", testEventsFenced},
		{"EventsTakeoverGap", testEventsTakeoverGap},
		{"EventsConcurrent", testEventsConcurrent},
		{"EventsLargeBatch", testEventsLargeBatch},
		{"EventsReopen", testEventsReopen},
		{"KVConcurrentCAS", testKVConcurrentCAS},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Closed", testClosed},
		{"Reopen", testReopen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
}

// open returns a fresh store that is closed when the test ends.
func open(t *testing.T, h Harness) store.Store {
	t.Helper()
	s := h.Open(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var ctx = context.Background()

// base is a fixed point in the past, so that explicit timestamps sort below anything the store
// stamps with the current time.
var base = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

func create(t *testing.T, s store.Store, sess store.Session) store.Session {
	t.Helper()
	out, err := s.CreateSession(ctx, sess)
	if err != nil {
		t.Fatalf("CreateSession(%q): %v", sess.ID, err)
	}
	return out
}

func get(t *testing.T, s store.Store, id string) store.Session {
	t.Helper()
	out, err := s.GetSession(ctx, id)
	if err != nil {
		t.Fatalf("GetSession(%q): %v", id, err)
	}
	return out
}

func msgs(contents ...string) []store.Row {
	rows := make([]store.Row, len(contents))
	for i, c := range contents {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		rows[i] = store.Row{Role: role, Content: c, TurnID: "turn"}
	}
	return rows
}

func appendRows(t *testing.T, s store.Store, sid string, contents ...string) []store.Row {
	t.Helper()
	out, err := s.AppendRows(ctx, sid, store.Fence{}, msgs(contents...))
	if err != nil {
		t.Fatalf("AppendRows(%q): %v", sid, err)
	}
	return out
}

func rows(t *testing.T, s store.Store, sid string, q store.RowQuery) []store.Row {
	t.Helper()
	out, err := s.Rows(ctx, sid, q)
	if err != nil {
		t.Fatalf("Rows(%q, %+v): %v", sid, q, err)
	}
	return out
}

func contents(rs []store.Row) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Content
	}
	return out
}

func ids(rs []store.Row) []uint64 {
	out := make([]uint64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func wantStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func wantAscending(t *testing.T, what string, ids []uint64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("%s: row ids not strictly ascending: %v", what, ids)
		}
	}
}

func testCreateGet(t *testing.T, h Harness) {
	s := open(t, h)
	in := store.Session{
		ID: "s1", Title: "first", Source: "cli", Model: "openai:gpt", Cwd: "/tmp",
		Meta:     map[string]string{"k": "v"},
		RowCount: 7, Rewinds: 3, Version: 42, // store-managed: must be ignored
	}
	got := create(t, s, in)
	if got.Version != 1 || got.RowCount != 0 || got.Rewinds != 0 {
		t.Fatalf("created record: version %d rows %d rewinds %d, want 1 0 0", got.Version, got.RowCount, got.Rewinds)
	}
	if got.CreatedAt.IsZero() || got.UpdatedAt.IsZero() {
		t.Fatalf("created record has zero timestamps: %+v", got)
	}
	in.Meta["k"] = "changed after create"
	back := get(t, s, "s1")
	if back.Title != "first" || back.Source != "cli" || back.Model != "openai:gpt" || back.Cwd != "/tmp" ||
		back.Meta["k"] != "v" || back.Version != 1 || !back.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("GetSession = %+v, want what CreateSession returned %+v", back, got)
	}
	back.Meta["k"] = "mutated copy"
	if get(t, s, "s1").Meta["k"] != "v" {
		t.Fatal("mutating a returned Meta map changed the stored session")
	}

	explicit := create(t, s, store.Session{ID: "s2", CreatedAt: base, UpdatedAt: base.Add(time.Hour)})
	if !explicit.CreatedAt.Equal(base) || !explicit.UpdatedAt.Equal(base.Add(time.Hour)) {
		t.Fatalf("explicit timestamps not kept: %v %v", explicit.CreatedAt, explicit.UpdatedAt)
	}

	_, err := s.CreateSession(ctx, store.Session{ID: "s1"})
	wantErr(t, "duplicate id", err, store.ErrExists)
	_, err = s.GetSession(ctx, "missing")
	wantErr(t, "missing session", err, store.ErrNotFound)
	// Not valid UTF-8 is the poisoned-listing case: JSON cannot carry such an id, so its record
	// would hold an id different from its key.
	for _, bad := range []string{"", "a/b", "tab\there", string(make([]byte, 300)), "a\xffb", "\xc3", "a\u202eb"} {
		_, err = s.CreateSession(ctx, store.Session{ID: bad})
		wantErr(t, fmt.Sprintf("session id %q", bad), err, store.ErrInvalidRecord)
	}
	// The same for a title: its index key and the record's JSON must hold the same string.
	_, err = s.CreateSession(ctx, store.Session{ID: "bad-title", Title: "a\xffb"})
	wantErr(t, "title not UTF-8", err, store.ErrInvalidRecord)
	_, err = s.UpdateSession(ctx, "s1", 0, func(sess *store.Session) error { sess.Title = "\xc3"; return nil })
	wantErr(t, "renamed to a title not UTF-8", err, store.ErrInvalidRecord)
	list, err := s.ListSessions(ctx, store.ListOptions{})
	if err != nil {
		t.Fatalf("listing after refused creates: %v", err)
	}
	for _, sess := range list {
		if sess.ID != "s1" && sess.ID != "s2" {
			t.Errorf("a refused id was stored: %q", sess.ID)
		}
	}
}

func testList(t *testing.T, h Harness) {
	s := open(t, h)
	at := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	create(t, s, store.Session{ID: "a", Source: "cli", UpdatedAt: at(1)})
	create(t, s, store.Session{ID: "b", Source: "tui", UpdatedAt: at(3)})
	create(t, s, store.Session{ID: "c", Source: "cli", UpdatedAt: at(2), ParentID: "a", ParentKind: "branch"})
	create(t, s, store.Session{ID: "d", Source: "cli", UpdatedAt: at(4), ParentID: "a", ParentKind: "compression"})

	list := func(o store.ListOptions) []string {
		t.Helper()
		out, err := s.ListSessions(ctx, o)
		if err != nil {
			t.Fatalf("ListSessions(%+v): %v", o, err)
		}
		ids := make([]string, len(out))
		for i, x := range out {
			ids[i] = x.ID
		}
		return ids
	}
	wantStrings(t, "all, newest first", list(store.ListOptions{}), "d", "b", "c", "a")
	wantStrings(t, "source cli", list(store.ListOptions{Source: "cli"}), "d", "c", "a")
	wantStrings(t, "children of a", list(store.ListOptions{ParentID: "a"}), "d", "c")
	wantStrings(t, "limit 2", list(store.ListOptions{Limit: 2}), "d", "b")
	wantStrings(t, "source+parent+limit", list(store.ListOptions{Source: "cli", ParentID: "a", Limit: 1}), "d")
	wantStrings(t, "no match", list(store.ListOptions{Source: "acp"}))

	// Any write stamps UpdatedAt with the current time, which is after every explicit one above.
	appendRows(t, s, "a", "hello")
	wantStrings(t, "after append to a", list(store.ListOptions{Limit: 2}), "a", "d")
}

func testTitles(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a", Title: "plan"})
	_, err := s.CreateSession(ctx, store.Session{ID: "b", Title: "plan"})
	wantErr(t, "create with taken title", err, store.ErrTitleTaken)
	if _, err := s.GetSession(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("session b exists after a refused create (err %v)", err)
	}
	create(t, s, store.Session{ID: "b"})

	setTitle := func(id, title string) error {
		_, err := s.UpdateSession(ctx, id, 0, func(x *store.Session) error { x.Title = title; return nil })
		return err
	}
	wantErr(t, "rename to taken title", setTitle("b", "plan"), store.ErrTitleTaken)
	if got := get(t, s, "b").Title; got != "" {
		t.Fatalf("refused rename still changed title to %q", got)
	}
	if err := setTitle("a", "plan"); err != nil {
		t.Fatalf("re-setting own title: %v", err)
	}
	if err := setTitle("a", "plan v2"); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if err := setTitle("b", "plan"); err != nil {
		t.Fatalf("old title should be free after rename: %v", err)
	}
	wantErr(t, "rename into the new title", setTitle("b", "plan v2"), store.ErrTitleTaken)
	if err := setTitle("a", ""); err != nil {
		t.Fatalf("clearing title: %v", err)
	}
	if err := setTitle("b", "plan v2"); err != nil {
		t.Fatalf("cleared title should be free: %v", err)
	}
	_, err = s.CreateSession(ctx, store.Session{ID: "c", Title: "plan v2"})
	wantErr(t, "create with the title b now holds", err, store.ErrTitleTaken)
	create(t, s, store.Session{ID: "c", Title: "plan"}) // b let go of it
}

func testCAS(t *testing.T, h Harness) {
	s := open(t, h)
	v1 := create(t, s, store.Session{ID: "a"})
	v2, err := s.UpdateSession(ctx, "a", v1.Version, func(x *store.Session) error {
		x.Model = "m1"
		x.EndReason = "user_exit"
		x.RowCount, x.Rewinds, x.Version = 99, 99, 99 // store-managed: ignored
		x.Usage.Add(store.Usage{InputTokens: 10, APICalls: 1})
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateSession with current version: %v", err)
	}
	if v2.Version != v1.Version+1 || v2.Model != "m1" || v2.RowCount != 0 || v2.Rewinds != 0 || v2.Usage.InputTokens != 10 {
		t.Fatalf("updated record = %+v", v2)
	}
	if back := get(t, s, "a"); back.Version != v2.Version || back.Model != "m1" || back.EndReason != "user_exit" {
		t.Fatalf("stored record after update = %+v", back)
	}

	_, err = s.UpdateSession(ctx, "a", v1.Version, func(x *store.Session) error { x.Model = "lost"; return nil })
	wantErr(t, "stale expectVersion", err, store.ErrConflict)
	if get(t, s, "a").Model != "m1" {
		t.Fatal("a conflicting update was written")
	}

	// An append is a write too: it moves the version on.
	appendRows(t, s, "a", "x")
	_, err = s.UpdateSession(ctx, "a", v2.Version, func(x *store.Session) error { return nil })
	wantErr(t, "version moved by append", err, store.ErrConflict)

	boom := errors.New("boom")
	before := get(t, s, "a")
	_, err = s.UpdateSession(ctx, "a", 0, func(x *store.Session) error { x.Model = "no"; return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("fn error not returned: %v", err)
	}
	if after := get(t, s, "a"); after.Version != before.Version || after.Model != "m1" {
		t.Fatal("failed fn still wrote")
	}
	_, err = s.UpdateSession(ctx, "a", 0, func(x *store.Session) error { x.ID = "b"; return nil })
	wantErr(t, "changing id", err, store.ErrInvalidRecord)
	_, err = s.UpdateSession(ctx, "missing", 0, func(x *store.Session) error { return nil })
	wantErr(t, "update missing", err, store.ErrNotFound)
}

func testConcurrentUpdate(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := s.UpdateSession(ctx, "a", 0, func(x *store.Session) error {
					x.Usage.APICalls++
					return nil
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent UpdateSession: %v", err)
	}
	if got := get(t, s, "a").Usage.APICalls; got != workers*each {
		t.Fatalf("APICalls = %d after %d increments: updates were lost", got, workers*each)
	}
}

func testAppend(t *testing.T, h Harness) {
	s := open(t, h)
	before := create(t, s, store.Session{ID: "a", UpdatedAt: base})
	create(t, s, store.Session{ID: "b"})

	when := base.Add(time.Minute)
	in := []store.Row{
		{Role: "user", Content: "hi <b>&", TurnID: "t1", Time: when},
		{Role: "assistant", Content: "", Reasoning: "thinking", ToolCalls: json.RawMessage(`[ {"id": "c1", "name": "<x>"} ]`), TurnID: "t1"},
		{Role: "tool", Content: "result", ToolCallID: "c1", ToolName: "terminal", DisplayKind: "steer", TurnID: "t1"},
	}
	a1, err := s.AppendRows(ctx, "a", store.Fence{}, in)
	if err != nil {
		t.Fatalf("AppendRows: %v", err)
	}
	b1 := appendRows(t, s, "b", "b1", "b2")
	a2 := appendRows(t, s, "a", "a4")
	all := slices.Concat(ids(a1), ids(b1), ids(a2))
	wantAscending(t, "ids across sessions and calls", all)
	for _, r := range slices.Concat(a1, a2) {
		if r.SessionID != "a" || !r.Active || r.Time.IsZero() || r.ID == 0 {
			t.Fatalf("returned row not in stored form: %+v", r)
		}
	}
	if !a1[0].Time.Equal(when) {
		t.Fatalf("explicit row time not kept: %v", a1[0].Time)
	}

	got := rows(t, s, "a", store.RowQuery{})
	if !slices.Equal(ids(got), slices.Concat(ids(a1), ids(a2))) {
		t.Fatalf("Rows ids = %v, want %v", ids(got), slices.Concat(ids(a1), ids(a2)))
	}
	wantStrings(t, "contents", contents(got), "hi <b>&", "", "result", "a4")
	r1 := got[1]
	if r1.Reasoning != "thinking" || r1.TurnID != "t1" || r1.Role != "assistant" {
		t.Fatalf("row 2 = %+v", r1)
	}
	var calls []map[string]string
	if err := json.Unmarshal(r1.ToolCalls, &calls); err != nil || len(calls) != 1 || calls[0]["name"] != "<x>" {
		t.Fatalf("tool calls did not round-trip: %s (%v)", r1.ToolCalls, err)
	}
	if r := got[2]; r.ToolCallID != "c1" || r.ToolName != "terminal" || r.DisplayKind != "steer" {
		t.Fatalf("tool row = %+v", r)
	}

	sess := get(t, s, "a")
	if sess.RowCount != 4 || sess.Version != before.Version+2 || !sess.UpdatedAt.After(base) {
		t.Fatalf("session after two appends: rows %d version %d updated %v", sess.RowCount, sess.Version, sess.UpdatedAt)
	}

	_, err = s.AppendRows(ctx, "missing", store.Fence{}, msgs("x"))
	wantErr(t, "append to missing session", err, store.ErrNotFound)
	_, err = s.AppendRows(ctx, "a", store.Fence{}, []store.Row{{Role: "user"}, {Content: "no role"}})
	wantErr(t, "row without role", err, store.ErrInvalidRecord)
	_, err = s.AppendRows(ctx, "a", store.Fence{}, []store.Row{{Role: "assistant", ToolCalls: json.RawMessage(`{bad`)}})
	wantErr(t, "invalid tool_calls", err, store.ErrInvalidRecord)
	if n := len(rows(t, s, "a", store.RowQuery{})); n != 4 {
		t.Fatalf("refused appends wrote rows: %d rows", n)
	}
	empty, err := s.AppendRows(ctx, "a", store.Fence{}, nil)
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty append = %v, %v", empty, err)
	}
	_, err = s.AppendRows(ctx, "missing", store.Fence{}, nil)
	wantErr(t, "empty append to missing session", err, store.ErrNotFound)
	_, err = s.Rows(ctx, "missing", store.RowQuery{})
	wantErr(t, "rows of missing session", err, store.ErrNotFound)
}

// coreUsage is the part of a usage every store keeps (cost and cache-write tokens are not
// columns of every store).
func coreUsage(u store.Usage) store.Usage {
	return store.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens,
		ReasoningTokens: u.ReasoningTokens, APICalls: u.APICalls, ToolCalls: u.ToolCalls}
}

func testAppendUsage(t *testing.T, h Harness) {
	s := open(t, h)
	start := store.Usage{InputTokens: 10, OutputTokens: 1, APICalls: 1}
	before := create(t, s, store.Session{ID: "a", Usage: start})
	create(t, s, store.Session{ID: "b"})
	appendRows(t, s, "a", "first")

	add := store.Usage{InputTokens: 100, OutputTokens: 7, CachedTokens: 30, ReasoningTokens: 2, APICalls: 2, ToolCalls: 1}
	want := start
	want.Add(add)
	out, rec, err := s.AppendRowsUsage(ctx, "a", store.Fence{}, msgs("second", "third"), add)
	if err != nil {
		t.Fatalf("AppendRowsUsage: %v", err)
	}
	if len(out) != 2 || out[0].SessionID != "a" || !out[0].Active || out[0].ID == 0 || out[1].ID <= out[0].ID {
		t.Fatalf("returned rows not in stored form: %+v", out)
	}
	got := get(t, s, "a")
	if coreUsage(got.Usage) != want || got.RowCount != 3 || got.Version != before.Version+2 {
		t.Fatalf("session after append with usage: usage %+v rows %d version %d, want usage %+v rows 3 version %d",
			got.Usage, got.RowCount, got.Version, want, before.Version+2)
	}
	if coreUsage(rec.Usage) != want || rec.RowCount != got.RowCount || rec.Version != got.Version || rec.ID != "a" {
		t.Fatalf("returned record %+v, stored %+v", rec, got)
	}
	wantStrings(t, "rows", contents(rows(t, s, "a", store.RowQuery{})), "first", "second", "third")
	if b := get(t, s, "b"); b.Usage != (store.Usage{}) || b.RowCount != 0 {
		t.Fatalf("another session changed: %+v", b)
	}

	// No rows: only the usage is added.
	want.Add(add)
	out, rec, err = s.AppendRowsUsage(ctx, "a", store.Fence{}, nil, add)
	if err != nil || len(out) != 0 || coreUsage(rec.Usage) != want || rec.RowCount != 3 {
		t.Fatalf("usage without rows: %v %+v %v", out, rec, err)
	}
	if got := get(t, s, "a"); coreUsage(got.Usage) != want || got.Version != rec.Version {
		t.Fatalf("stored after usage without rows: %+v, returned %+v", got, rec)
	}

	// Refused: nothing of either is written.
	_, _, err = s.AppendRowsUsage(ctx, "missing", store.Fence{}, msgs("x"), add)
	wantErr(t, "append with usage to a missing session", err, store.ErrNotFound)
	_, _, err = s.AppendRowsUsage(ctx, "a", store.Fence{}, []store.Row{{Role: "user"}, {Content: "no role"}}, add)
	wantErr(t, "append with usage of a row without role", err, store.ErrInvalidRecord)
	old, err := s.AcquireLease(ctx, "a", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AppendRowsUsage(ctx, "a", store.Fence{Generation: old.Generation}, msgs("by node-1"), store.Usage{}); err != nil {
		t.Fatalf("append with usage under the lease: %v", err)
	}
	if err := s.ReleaseLease(ctx, old); err != nil {
		t.Fatal(err)
	}
	cur, err := s.AcquireLease(ctx, "a", "node-2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mid := get(t, s, "a")
	_, _, err = s.AppendRowsUsage(ctx, "a", store.Fence{Generation: old.Generation}, msgs("stale"), add)
	wantErr(t, "append with usage, old generation", err, store.ErrFenced)
	_, _, err = s.AppendRowsUsage(ctx, "a", store.Fence{Generation: old.Generation}, nil, add)
	wantErr(t, "usage without rows, old generation", err, store.ErrFenced)
	_, _, err = store.Fenced(s, "a", old.Generation).AppendRowsUsage(ctx, "a", store.Fence{}, msgs("stale view"), add)
	wantErr(t, "append with usage through a stale fenced view", err, store.ErrFenced)
	if after := get(t, s, "a"); after.Version != mid.Version || coreUsage(after.Usage) != coreUsage(mid.Usage) || after.RowCount != mid.RowCount {
		t.Fatalf("refused writes changed the session: %+v, was %+v", after, mid)
	}
	if _, rec, err := store.Fenced(s, "a", cur.Generation).AppendRowsUsage(ctx, "a", store.Fence{}, msgs("by node-2"), add); err != nil ||
		rec.RowCount != mid.RowCount+1 {
		t.Fatalf("append with usage through the current fenced view: %+v %v", rec, err)
	}
	wantStrings(t, "rows at the end", contents(rows(t, s, "a", store.RowQuery{})), "first", "second", "third", "by node-1", "by node-2")
}

func testRowQueries(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	create(t, s, store.Session{ID: "other"})
	var all []store.Row
	for i := range 10 {
		all = append(all, appendRows(t, s, "a", fmt.Sprint(i))...)
		appendRows(t, s, "other", "noise") // interleave ids of another session
	}
	q := func(q store.RowQuery) []string { t.Helper(); return contents(rows(t, s, "a", q)) }
	wantStrings(t, "all", q(store.RowQuery{}), "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	wantStrings(t, "after 3rd", q(store.RowQuery{AfterID: all[2].ID}), "3", "4", "5", "6", "7", "8", "9")
	wantStrings(t, "after an id between rows", q(store.RowQuery{AfterID: all[2].ID + 1}), "3", "4", "5", "6", "7", "8", "9")
	wantStrings(t, "limit", q(store.RowQuery{Limit: 3}), "0", "1", "2")
	wantStrings(t, "after+limit", q(store.RowQuery{AfterID: all[4].ID, Limit: 2}), "5", "6")
	wantStrings(t, "tail", q(store.RowQuery{Tail: true, Limit: 3}), "7", "8", "9")
	wantStrings(t, "tail without limit", q(store.RowQuery{Tail: true}), "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	wantStrings(t, "tail after", q(store.RowQuery{Tail: true, Limit: 5, AfterID: all[6].ID}), "7", "8", "9")
	wantStrings(t, "tail larger than rows", q(store.RowQuery{Tail: true, Limit: 50}), "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	wantStrings(t, "after last", q(store.RowQuery{AfterID: all[9].ID}))
	wantStrings(t, "after max id", q(store.RowQuery{AfterID: ^uint64(0)}))
	wantStrings(t, "tail after max id", q(store.RowQuery{AfterID: ^uint64(0), Tail: true, Limit: 2}))
}

func testRewind(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	create(t, s, store.Session{ID: "b"})
	orig := appendRows(t, s, "a", "r1", "r2", "r3", "r4", "r5")
	appendRows(t, s, "b", "b1")
	before := get(t, s, "a")

	res, err := s.Rewind(ctx, "a", store.Fence{}, orig[2].ID, msgs("edited"))
	if err != nil {
		t.Fatalf("Rewind: %v", err)
	}
	if res.Archived != 3 || len(res.Survivors) != 2 || len(res.Appended) != 1 {
		t.Fatalf("RewindResult: archived %d survivors %d appended %d, want 3 2 1", res.Archived, len(res.Survivors), len(res.Appended))
	}
	wantStrings(t, "survivors", contents(res.Survivors), "r1", "r2")
	wantStrings(t, "appended", contents(res.Appended), "edited")
	newIDs := slices.Concat(ids(res.Survivors), ids(res.Appended))
	wantAscending(t, "rewound ids", newIDs)
	maxOld := orig[len(orig)-1].ID
	for _, r := range slices.Concat(res.Survivors, res.Appended) {
		if r.ID <= maxOld || !r.Active || r.SessionID != "a" {
			t.Fatalf("rewound row %+v: want a fresh active id above %d", r, maxOld)
		}
	}
	if res.Survivors[0].TurnID != "turn" || res.Survivors[1].Role != "assistant" {
		t.Fatalf("survivors lost fields: %+v", res.Survivors)
	}

	active := rows(t, s, "a", store.RowQuery{})
	if !slices.Equal(ids(active), newIDs) {
		t.Fatalf("active rows %v, want %v", ids(active), newIDs)
	}
	wantStrings(t, "active contents", contents(active), "r1", "r2", "edited")

	withArchive := rows(t, s, "a", store.RowQuery{IncludeArchived: true})
	wantStrings(t, "with archive", contents(withArchive), "r3", "r4", "r5", "r1", "r2", "edited")
	for _, r := range withArchive[:3] {
		if r.Active {
			t.Fatalf("archived row reported active: %+v", r)
		}
	}
	if !slices.Equal(ids(withArchive[:3]), ids(orig[2:])) {
		t.Fatalf("archived rows ids %v, want their original ids %v", ids(withArchive[:3]), ids(orig[2:]))
	}
	wantStrings(t, "archive tail", contents(rows(t, s, "a", store.RowQuery{IncludeArchived: true, Tail: true, Limit: 4})), "r5", "r1", "r2", "edited")
	wantStrings(t, "archive head", contents(rows(t, s, "a", store.RowQuery{IncludeArchived: true, Limit: 2})), "r3", "r4")
	wantStrings(t, "archive after", contents(rows(t, s, "a", store.RowQuery{IncludeArchived: true, AfterID: orig[3].ID})), "r5", "r1", "r2", "edited")

	sess := get(t, s, "a")
	if sess.RowCount != 3 || sess.Rewinds != 1 || sess.Version != before.Version+1 {
		t.Fatalf("session after rewind: rows %d rewinds %d version %d (was %d)", sess.RowCount, sess.Rewinds, sess.Version, before.Version)
	}
	wantStrings(t, "other session untouched", contents(rows(t, s, "b", store.RowQuery{IncludeArchived: true})), "b1")

	// A second rewind archives next to the first archive.
	res2, err := s.Rewind(ctx, "a", store.Fence{}, res.Survivors[1].ID, nil)
	if err != nil {
		t.Fatalf("second Rewind: %v", err)
	}
	if res2.Archived != 2 || len(res2.Survivors) != 1 || len(res2.Appended) != 0 {
		t.Fatalf("second rewind: %+v", res2)
	}
	wantStrings(t, "after second rewind", contents(rows(t, s, "a", store.RowQuery{})), "r1")
	wantStrings(t, "archive after second rewind", contents(rows(t, s, "a", store.RowQuery{IncludeArchived: true})),
		"r3", "r4", "r5", "r2", "edited", "r1")
	if sess := get(t, s, "a"); sess.RowCount != 1 || sess.Rewinds != 2 {
		t.Fatalf("session after second rewind: rows %d rewinds %d", sess.RowCount, sess.Rewinds)
	}
}

func testRewindStale(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	create(t, s, store.Session{ID: "b"})
	orig := appendRows(t, s, "a", "r1", "r2", "r3")
	other := appendRows(t, s, "b", "b1")
	res, err := s.Rewind(ctx, "a", store.Fence{}, orig[1].ID, nil)
	if err != nil {
		t.Fatalf("Rewind: %v", err)
	}
	snapshot := rows(t, s, "a", store.RowQuery{IncludeArchived: true})
	sess := get(t, s, "a")

	for name, id := range map[string]uint64{
		"survivor's old id":   orig[0].ID, // replaced by a fresh id
		"archived row":        orig[2].ID,
		"another session row": other[0].ID,
		"never issued":        1 << 60,
	} {
		_, err := s.Rewind(ctx, "a", store.Fence{}, id, msgs("must not appear"))
		wantErr(t, "rewind to "+name, err, store.ErrStaleRow)
	}
	after := rows(t, s, "a", store.RowQuery{IncludeArchived: true})
	if !slices.Equal(ids(after), ids(snapshot)) || !slices.Equal(contents(after), contents(snapshot)) {
		t.Fatalf("a refused rewind wrote: %q, was %q", contents(after), contents(snapshot))
	}
	if got := get(t, s, "a"); got.Version != sess.Version || got.Rewinds != sess.Rewinds || got.RowCount != sess.RowCount {
		t.Fatalf("a refused rewind changed the session: %+v, was %+v", got, sess)
	}
	if _, err := s.Rewind(ctx, "a", store.Fence{}, res.Survivors[0].ID, nil); err != nil {
		t.Fatalf("rewind to the survivor's new id: %v", err)
	}
	_, err = s.Rewind(ctx, "missing", store.Fence{}, 0, nil)
	wantErr(t, "rewind missing session", err, store.ErrNotFound)
	_, err = s.Rewind(ctx, "a", store.Fence{}, 0, []store.Row{{Content: "no role"}})
	wantErr(t, "rewind with invalid extra", err, store.ErrInvalidRecord)
	if got := get(t, s, "a"); got.Rewinds != sess.Rewinds+1 {
		t.Fatalf("rewind with invalid extra still counted: rewinds %d", got.Rewinds)
	}
}

func testRewindAll(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	orig := appendRows(t, s, "a", "r1", "r2")
	res, err := s.Rewind(ctx, "a", store.Fence{}, 0, nil)
	if err != nil {
		t.Fatalf("Rewind(0): %v", err)
	}
	if res.Archived != 2 || len(res.Survivors) != 0 || len(res.Appended) != 0 {
		t.Fatalf("Rewind(0) = %+v", res)
	}
	if got := rows(t, s, "a", store.RowQuery{}); len(got) != 0 {
		t.Fatalf("active rows after Rewind(0): %q", contents(got))
	}
	if got := rows(t, s, "a", store.RowQuery{IncludeArchived: true}); !slices.Equal(ids(got), ids(orig)) {
		t.Fatalf("archived rows %v, want %v", ids(got), ids(orig))
	}
	if sess := get(t, s, "a"); sess.RowCount != 0 || sess.Rewinds != 1 {
		t.Fatalf("session after Rewind(0): rows %d rewinds %d", sess.RowCount, sess.Rewinds)
	}
	// Rewinding an empty transcript to replace it wholesale.
	res, err = s.Rewind(ctx, "a", store.Fence{}, 0, msgs("fresh1", "fresh2"))
	if err != nil || res.Archived != 0 || len(res.Appended) != 2 {
		t.Fatalf("Rewind(0) on empty transcript = %+v, %v", res, err)
	}
	wantStrings(t, "replaced transcript", contents(rows(t, s, "a", store.RowQuery{})), "fresh1", "fresh2")
	if sess := get(t, s, "a"); sess.RowCount != 2 || sess.Rewinds != 2 {
		t.Fatalf("session after replace: rows %d rewinds %d", sess.RowCount, sess.Rewinds)
	}
}

func testCopyRows(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "src"})
	src := appendRows(t, s, "src", "r1", "r2", "r3", "r4")
	create(t, s, store.Session{ID: "branch", ParentID: "src", ParentKind: "branch"})

	n, err := s.CopyRows(ctx, "src", "branch", src[1].ID)
	if err != nil || n != 2 {
		t.Fatalf("CopyRows upto r2 = %d, %v; want 2", n, err)
	}
	got := rows(t, s, "branch", store.RowQuery{})
	wantStrings(t, "branch rows", contents(got), "r1", "r2")
	for i, r := range got {
		if r.ID <= src[3].ID || r.SessionID != "branch" || !r.Active || r.Role != src[i].Role || r.TurnID != src[i].TurnID {
			t.Fatalf("copied row %+v: want a fresh id in branch with the source's fields", r)
		}
	}
	b := get(t, s, "branch")
	if b.RowCount != 2 || b.ForkRowID != src[1].ID {
		t.Fatalf("branch: rows %d fork row %d, want 2 and %d", b.RowCount, b.ForkRowID, src[1].ID)
	}
	wantStrings(t, "source untouched", contents(rows(t, s, "src", store.RowQuery{})), "r1", "r2", "r3", "r4")

	create(t, s, store.Session{ID: "full"})
	if n, err := s.CopyRows(ctx, "src", "full", 0); err != nil || n != 4 {
		t.Fatalf("CopyRows all = %d, %v; want 4", n, err)
	}
	if f := get(t, s, "full"); f.ForkRowID != src[3].ID || f.RowCount != 4 {
		t.Fatalf("full copy: fork row %d rows %d", f.ForkRowID, f.RowCount)
	}

	if _, err := s.Rewind(ctx, "src", store.Fence{}, src[2].ID, nil); err != nil {
		t.Fatal(err)
	}
	create(t, s, store.Session{ID: "late"})
	_, err = s.CopyRows(ctx, "src", "late", src[0].ID) // replaced by a fresh id in the rewind
	wantErr(t, "copy upto a stale row", err, store.ErrStaleRow)
	if n := len(rows(t, s, "late", store.RowQuery{})); n != 0 {
		t.Fatalf("refused copy wrote %d rows", n)
	}
	if n, err := s.CopyRows(ctx, "src", "late", 0); err != nil || n != 2 {
		t.Fatalf("copy after rewind = %d, %v; want the 2 active rows", n, err)
	}
	_, err = s.CopyRows(ctx, "src", "missing", 0)
	wantErr(t, "copy into missing", err, store.ErrNotFound)
	_, err = s.CopyRows(ctx, "missing", "late", 0)
	wantErr(t, "copy from missing", err, store.ErrNotFound)
	_, err = s.CopyRows(ctx, "src", "src", 0)
	wantErr(t, "copy into itself", err, store.ErrInvalidRecord)
}

func testLeases(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	l1, err := s.AcquireLease(ctx, "a", "owner-1", time.Hour)
	if err != nil {
		t.Fatalf("AcquireLease: %v", err)
	}
	if l1.Generation == 0 || l1.Owner != "owner-1" || l1.SessionID != "a" || !l1.Expires.After(time.Now().Add(30*time.Minute)) {
		t.Fatalf("lease = %+v", l1)
	}
	renewed, err := s.AcquireLease(ctx, "a", "owner-1", 2*time.Hour)
	if err != nil || renewed.Generation != l1.Generation || !renewed.Expires.After(l1.Expires) {
		t.Fatalf("renewal = %+v, %v; want same generation, later expiry", renewed, err)
	}
	_, err = s.AcquireLease(ctx, "a", "owner-2", time.Hour)
	wantErr(t, "acquire held lease", err, store.ErrLeaseHeld)

	if err := s.ReleaseLease(ctx, renewed); err != nil {
		t.Fatalf("ReleaseLease: %v", err)
	}
	if err := s.ReleaseLease(ctx, renewed); err != nil {
		t.Fatalf("second ReleaseLease: %v", err)
	}
	l2, err := s.AcquireLease(ctx, "a", "owner-2", time.Nanosecond)
	if err != nil {
		t.Fatalf("acquire released lease: %v", err)
	}
	if l2.Generation <= l1.Generation {
		t.Fatalf("generation %d after a change of owner, was %d", l2.Generation, l1.Generation)
	}
	err = s.ReleaseLease(ctx, l1)
	wantErr(t, "release superseded lease", err, store.ErrFenced)

	// owner-2's lease has expired (1ns ttl, and a whole commit has happened since): owner-3 may
	// take it over.
	l3, err := s.AcquireLease(ctx, "a", "owner-3", time.Hour)
	if err != nil {
		t.Fatalf("acquire expired lease: %v", err)
	}
	if l3.Generation <= l2.Generation {
		t.Fatalf("generation %d after expiry takeover, was %d", l3.Generation, l2.Generation)
	}
	// Re-acquiring after one's own release is a change of ownership too.
	if err := s.ReleaseLease(ctx, l3); err != nil {
		t.Fatal(err)
	}
	l4, err := s.AcquireLease(ctx, "a", "owner-3", time.Hour)
	if err != nil || l4.Generation <= l3.Generation {
		t.Fatalf("re-acquire after release = %+v, %v; want a newer generation than %d", l4, err, l3.Generation)
	}

	_, err = s.AcquireLease(ctx, "missing", "owner-1", time.Hour)
	wantErr(t, "lease on missing session", err, store.ErrNotFound)
	_, err = s.AcquireLease(ctx, "a", "", time.Hour)
	wantErr(t, "lease without owner", err, store.ErrInvalidRecord)
	_, err = s.AcquireLease(ctx, "a", "owner-1", 0)
	wantErr(t, "lease without ttl", err, store.ErrInvalidRecord)
}

func testFencing(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	old, err := s.AcquireLease(ctx, "a", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	oldFence := store.Fence{Generation: old.Generation}
	first, err := s.AppendRows(ctx, "a", oldFence, msgs("by node-1"))
	if err != nil {
		t.Fatalf("append under current lease: %v", err)
	}
	if err := s.ReleaseLease(ctx, old); err != nil {
		t.Fatal(err)
	}
	cur, err := s.AcquireLease(ctx, "a", "node-2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before := get(t, s, "a")

	_, err = s.AppendRows(ctx, "a", oldFence, msgs("stale append"))
	wantErr(t, "append with old generation", err, store.ErrFenced)
	_, err = s.AppendRows(ctx, "a", oldFence, nil)
	wantErr(t, "empty append with old generation", err, store.ErrFenced)
	_, err = s.Rewind(ctx, "a", oldFence, first[0].ID, msgs("stale rewind"))
	wantErr(t, "rewind with old generation", err, store.ErrFenced)
	_, err = s.AppendRows(ctx, "a", store.Fence{Generation: cur.Generation + 1}, msgs("future"))
	wantErr(t, "append with a generation never issued", err, store.ErrFenced)
	if after := get(t, s, "a"); after.Version != before.Version || after.RowCount != 1 {
		t.Fatalf("fenced writes changed the session: %+v", after)
	}
	wantStrings(t, "rows after fenced writes", contents(rows(t, s, "a", store.RowQuery{IncludeArchived: true})), "by node-1")

	if _, err := s.AppendRows(ctx, "a", store.Fence{Generation: cur.Generation}, msgs("by node-2")); err != nil {
		t.Fatalf("append under new lease: %v", err)
	}
	if _, err := s.AppendRows(ctx, "a", store.Fence{}, msgs("unfenced")); err != nil {
		t.Fatalf("unfenced append: %v", err)
	}
	if _, err := s.Rewind(ctx, "a", store.Fence{Generation: cur.Generation}, 0, nil); err != nil {
		t.Fatalf("rewind under new lease: %v", err)
	}
}

func testKV(t *testing.T, h Harness) {
	s := open(t, h)
	put := func(k, v string) {
		t.Helper()
		if err := s.PutKV(ctx, k, []byte(v)); err != nil {
			t.Fatalf("PutKV(%q): %v", k, err)
		}
	}
	put("runs/1", "one")
	put("runs/2", "two")
	put("runsx", "not under runs/")
	put("idem/k", "v")
	v, err := s.GetKV(ctx, "runs/1")
	if err != nil || string(v) != "one" {
		t.Fatalf("GetKV = %q, %v", v, err)
	}
	v[0] = 'X'
	if v, _ := s.GetKV(ctx, "runs/1"); string(v) != "one" {
		t.Fatalf("mutating a returned value changed the store: %q", v)
	}
	put("runs/1", "uno")
	m, err := s.ListKV(ctx, "runs/")
	if err != nil {
		t.Fatalf("ListKV: %v", err)
	}
	if len(m) != 2 || string(m["runs/1"]) != "uno" || string(m["runs/2"]) != "two" {
		t.Fatalf("ListKV(runs/) = %q", m)
	}
	if all, _ := s.ListKV(ctx, ""); len(all) != 4 {
		t.Fatalf("ListKV(\"\") has %d keys, want 4", len(all))
	}
	if err := s.DeleteKV(ctx, "runs/1"); err != nil {
		t.Fatalf("DeleteKV: %v", err)
	}
	_, err = s.GetKV(ctx, "runs/1")
	wantErr(t, "get deleted key", err, store.ErrNotFound)
	if err := s.DeleteKV(ctx, "runs/1"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	put("empty", "")
	if v, err := s.GetKV(ctx, "empty"); err != nil || len(v) != 0 {
		t.Fatalf("empty value = %q, %v", v, err)
	}
	wantErr(t, "empty key", s.PutKV(ctx, "", []byte("x")), store.ErrInvalidRecord)
	// KV keys live apart from sessions.
	if _, err := s.GetSession(ctx, "runs/2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a KV key is visible as a session: %v", err)
	}
}

func testKVCAS(t *testing.T, h Harness) {
	s := open(t, h)
	cas := func(what, k string, old, new []byte, want bool) {
		t.Helper()
		ok, err := s.CompareAndSwapKV(ctx, k, old, new)
		if err != nil || ok != want {
			t.Fatalf("%s: CompareAndSwapKV(%q, %q, %q) = %v, %v; want %v", what, k, old, new, ok, err, want)
		}
	}
	value := func(k string) (string, bool) {
		t.Helper()
		v, err := s.GetKV(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			return "", false
		}
		if err != nil {
			t.Fatalf("GetKV(%q): %v", k, err)
		}
		return string(v), true
	}
	want := func(k, v string, present bool) {
		t.Helper()
		if got, ok := value(k); ok != present || got != v {
			t.Fatalf("%q = %q (present %v), want %q (present %v)", k, got, ok, v, present)
		}
	}

	cas("create absent", "c/1", nil, []byte("one"), true)
	want("c/1", "one", true)
	cas("create present", "c/1", nil, []byte("again"), false)
	want("c/1", "one", true)
	cas("wrong old", "c/1", []byte("two"), []byte("three"), false)
	cas("empty old is not absent", "c/1", []byte{}, []byte("three"), false)
	want("c/1", "one", true)
	cas("swap", "c/1", []byte("one"), []byte("two"), true)
	want("c/1", "two", true)
	cas("delete with wrong old", "c/1", []byte("one"), nil, false)
	want("c/1", "two", true)
	cas("delete", "c/1", []byte("two"), nil, true)
	want("c/1", "", false)
	cas("swap of absent", "c/1", []byte("two"), []byte("x"), false)
	want("c/1", "", false)
	cas("absent stays absent", "c/1", nil, nil, true)
	want("c/1", "", false)
	cas("absent delete when present", "c/2", nil, []byte{}, true)
	want("c/2", "", true)
	cas("present is not absent", "c/2", nil, nil, false)
	cas("nil old is not the empty value", "c/2", nil, []byte("x"), false)
	cas("empty value swaps", "c/2", []byte{}, []byte("x"), true)
	want("c/2", "x", true)
	cas("to empty", "c/2", []byte("x"), []byte{}, true)
	want("c/2", "", true)
	_, err := s.CompareAndSwapKV(ctx, "", nil, []byte("x"))
	wantErr(t, "empty key", err, store.ErrInvalidRecord)

	// Fencing: a stale holder's swap is refused and changes nothing.
	create(t, s, store.Session{ID: "f"})
	l, err := s.AcquireLease(ctx, "f", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fenced := store.Fenced(s, "f", l.Generation)
	if ok, err := fenced.CompareAndSwapKV(ctx, "runs/f", nil, []byte("1")); err != nil || !ok {
		t.Fatalf("swap under the current lease = %v, %v", ok, err)
	}
	if err := s.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, "f", "node-2", time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err = fenced.CompareAndSwapKV(ctx, "runs/f", []byte("1"), []byte("2"))
	wantErr(t, "stale fenced swap", err, store.ErrFenced)
	want("runs/f", "1", true)
}

// testKVConcurrentCAS: many writers race to advance one counter by compare-and-swap; every
// increment that reported success is counted exactly once, and a create race has one winner.
func testKVConcurrentCAS(t *testing.T, h Harness) {
	s := open(t, h)
	const writers, rounds = 8, 10
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
		errs []error
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The create race: one winner.
			ok, err := s.CompareAndSwapKV(ctx, "race/create", nil, fmt.Appendf(nil, "w%d", w))
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				wins++
			}
			mu.Unlock()
			for range rounds {
				for {
					cur, err := s.GetKV(ctx, "race/counter")
					var old []byte
					n := 0
					switch {
					case errors.Is(err, store.ErrNotFound):
					case err != nil:
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					default:
						old = cur
						fmt.Sscanf(string(cur), "%d", &n)
					}
					ok, err := s.CompareAndSwapKV(ctx, "race/counter", old, fmt.Appendf(nil, "%d", n+1))
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					if ok {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent swaps failed: %v", errs)
	}
	if wins != 1 {
		t.Fatalf("%d writers won the create race, want exactly 1", wins)
	}
	v, err := s.GetKV(ctx, "race/counter")
	if err != nil || string(v) != fmt.Sprint(writers*rounds) {
		t.Fatalf("counter = %q, %v; want %d (every successful swap counted once)", v, err, writers*rounds)
	}
}

// evs makes events with seqs from..to (inclusive).
func evs(from, to uint64) []store.StoredEvent {
	var out []store.StoredEvent
	for seq := from; seq <= to; seq++ {
		e := store.StoredEvent{Seq: seq, Type: "message.delta", Time: time.Unix(1700000000, int64(seq)*1000).UTC(), TurnID: "t1", Text: fmt.Sprintf("<d%d>", seq)}
		if seq%2 == 0 {
			e.Type, e.Text = "tool.start", ""
			e.Data = json.RawMessage(fmt.Sprintf(`{"call_id":"c%d","args":{"q":"<&>"}}`, seq))
		}
		out = append(out, e)
	}
	return out
}

func eventsSince(t *testing.T, s store.Store, sid string, after uint64, limit int) []store.StoredEvent {
	t.Helper()
	out, err := s.EventsSince(ctx, sid, after, limit)
	if err != nil {
		t.Fatalf("EventsSince(%s, %d, %d): %v", sid, after, limit, err)
	}
	return out
}

func lastEventSeq(t *testing.T, s store.Store, sid string) uint64 {
	t.Helper()
	n, err := s.LastEventSeq(ctx, sid)
	if err != nil {
		t.Fatalf("LastEventSeq(%s): %v", sid, err)
	}
	return n
}

// wantEvents checks got against want: same seqs, fields and payload bytes, in order.
func wantEvents(t *testing.T, what string, got, want []store.StoredEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.TurnID != w.TurnID || g.Text != w.Text ||
			string(g.Data) != string(w.Data) || !g.Time.Equal(w.Time) {
			t.Fatalf("%s: event %d = %+v (data %s), want %+v (data %s)", what, i, g, g.Data, w, w.Data)
		}
	}
}

func testEvents(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	create(t, s, store.Session{ID: "b"})
	if n := lastEventSeq(t, s, "a"); n != 0 {
		t.Fatalf("new session's last event seq = %d", n)
	}
	if got := eventsSince(t, s, "a", 0, 0); len(got) != 0 {
		t.Fatalf("new session has events %+v", got)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := s.Watch(wctx, store.Interest{Sessions: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	all := evs(1, 10)
	if err := s.AppendEvents(ctx, "a", store.Fence{}, all[:4]); err != nil {
		t.Fatalf("AppendEvents 1..4: %v", err)
	}
	if cs, _ := next(t, sub); !hasChange(cs, store.Change{SessionID: "a"}) {
		t.Fatalf("append hints %+v, want session a", cs)
	}
	if err := s.AppendEvents(ctx, "a", store.Fence{}, all[4:]); err != nil {
		t.Fatalf("AppendEvents 5..10: %v", err)
	}
	wantEvents(t, "all", eventsSince(t, s, "a", 0, 0), all)
	wantEvents(t, "after 3, limit 4", eventsSince(t, s, "a", 3, 4), all[3:7])
	wantEvents(t, "after 9", eventsSince(t, s, "a", 9, 0), all[9:])
	wantEvents(t, "after the end", eventsSince(t, s, "a", 10, 0), nil)
	if n := lastEventSeq(t, s, "a"); n != 10 {
		t.Fatalf("last seq = %d, want 10", n)
	}
	// Contiguity: a gap, a reuse and a batch with a hole are refused and write nothing.
	for _, bad := range []struct {
		what string
		evs  []store.StoredEvent
	}{
		{"gap", evs(12, 12)},
		{"reuse", evs(10, 11)},
		{"reuse of the first", evs(1, 1)},
		{"hole inside the batch", append(evs(11, 11), evs(13, 13)...)},
	} {
		wantErr(t, bad.what, s.AppendEvents(ctx, "a", store.Fence{}, bad.evs), store.ErrEventSeq)
	}
	bad := evs(11, 11)
	bad[0].Type = ""
	wantErr(t, "event without a type", s.AppendEvents(ctx, "a", store.Fence{}, bad), store.ErrInvalidRecord)
	bad = evs(11, 11)
	bad[0].Data = json.RawMessage("{not json")
	wantErr(t, "event data not JSON", s.AppendEvents(ctx, "a", store.Fence{}, bad), store.ErrInvalidRecord)
	if n := lastEventSeq(t, s, "a"); n != 10 {
		t.Fatalf("refused appends moved the log to %d", n)
	}
	// Logs are per session; an empty log may start at any seq (a journal's retained tail).
	if err := s.AppendEvents(ctx, "b", store.Fence{}, evs(5, 6)); err != nil {
		t.Fatalf("first append at seq 5: %v", err)
	}
	wantEvents(t, "b", eventsSince(t, s, "b", 0, 0), evs(5, 6))
	wantEvents(t, "a untouched", eventsSince(t, s, "a", 0, 0), all)
	if err := s.AppendEvents(ctx, "a", store.Fence{}, nil); err != nil {
		t.Fatalf("empty append: %v", err)
	}
	// Unknown sessions.
	wantErr(t, "append to an unknown session", s.AppendEvents(ctx, "nope", store.Fence{}, evs(1, 1)), store.ErrNotFound)
	_, err = s.EventsSince(ctx, "nope", 0, 0)
	wantErr(t, "events of an unknown session", err, store.ErrNotFound)
	_, err = s.LastEventSeq(ctx, "nope")
	wantErr(t, "last seq of an unknown session", err, store.ErrNotFound)
	// Events are not rows, and do not touch the session record (its version is a CAS token).
	if got := get(t, s, "a"); got.RowCount != 0 {
		t.Fatalf("events counted as rows: %+v", got)
	}
	before := get(t, s, "a").Version
	if err := s.AppendEvents(ctx, "a", store.Fence{}, evs(11, 11)); err != nil {
		t.Fatal(err)
	}
	if after := get(t, s, "a").Version; after != before {
		t.Fatalf("an event append moved the session version %d -> %d", before, after)
	}
}

func testEventsFenced(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	l1, err := s.AcquireLease(ctx, "a", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, "a", store.Fence{Generation: l1.Generation}, evs(1, 2)); err != nil {
		t.Fatalf("append under the lease: %v", err)
	}
	if err := s.ReleaseLease(ctx, l1); err != nil {
		t.Fatal(err)
	}
	l2, err := s.AcquireLease(ctx, "a", "node-2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "stale generation", s.AppendEvents(ctx, "a", store.Fence{Generation: l1.Generation}, evs(3, 3)), store.ErrFenced)
	stale := store.Fenced(s, "a", l1.Generation)
	wantErr(t, "stale fenced view", stale.AppendEvents(ctx, "a", store.Fence{}, evs(3, 3)), store.ErrFenced)
	wantErr(t, "stale context fence", s.AppendEvents(store.WithFence(ctx, "a", l1.Generation), "a", store.Fence{}, evs(3, 3)), store.ErrFenced)
	if n := lastEventSeq(t, s, "a"); n != 2 {
		t.Fatalf("stale appends moved the log to %d", n)
	}
	fresh := store.Fenced(s, "a", l2.Generation)
	if err := fresh.AppendEvents(ctx, "a", store.Fence{}, evs(3, 4)); err != nil {
		t.Fatalf("append by the new holder: %v", err)
	}
	got := eventsSince(t, s, "a", 0, 0)
	wantEvents(t, "log", got, evs(1, 4))
	for _, e := range got {
		want := l1.Generation
		if e.Seq > 2 {
			want = l2.Generation
		}
		if e.Generation != want {
			t.Fatalf("event %d stored with generation %d, want %d", e.Seq, e.Generation, want)
		}
	}
}

// testEventsTakeoverGap: a lease holder that took a session over from one that did not release
// it numbers its events past the seqs the previous holder reserved, so its first fenced append
// may skip seqs; an unfenced append may not, and no append reuses a stored seq. Readers see the
// log across the gap.
func testEventsTakeoverGap(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	l1, err := s.AcquireLease(ctx, "a", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Fenced(s, "a", l1.Generation).AppendEvents(ctx, "a", store.Fence{}, evs(1, 3)); err != nil {
		t.Fatalf("append under the first lease: %v", err)
	}
	if err := s.ReleaseLease(ctx, l1); err != nil {
		t.Fatal(err)
	}
	l2, err := s.AcquireLease(ctx, "a", "node-2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "unfenced gap", s.AppendEvents(ctx, "a", store.Fence{}, evs(5, 5)), store.ErrEventSeq)
	wantErr(t, "stale holder's gap", s.AppendEvents(ctx, "a", store.Fence{Generation: l1.Generation}, evs(9, 9)), store.ErrFenced)
	fresh := store.Fenced(s, "a", l2.Generation)
	wantErr(t, "fenced reuse", fresh.AppendEvents(ctx, "a", store.Fence{}, evs(3, 4)), store.ErrEventSeq)
	wantErr(t, "fenced hole inside the batch", fresh.AppendEvents(ctx, "a", store.Fence{}, append(evs(9, 9), evs(11, 11)...)), store.ErrEventSeq)
	if n := lastEventSeq(t, s, "a"); n != 3 {
		t.Fatalf("refused appends moved the log to %d", n)
	}
	if err := fresh.AppendEvents(ctx, "a", store.Fence{}, evs(9, 10)); err != nil {
		t.Fatalf("fenced append past a gap: %v", err)
	}
	if err := s.AppendEvents(ctx, "a", store.Fence{Generation: l2.Generation}, evs(11, 11)); err != nil {
		t.Fatalf("continuing after the gap: %v", err)
	}
	want := append(evs(1, 3), evs(9, 11)...)
	wantEvents(t, "log with a gap", eventsSince(t, s, "a", 0, 0), want)
	wantEvents(t, "after a seq in the gap", eventsSince(t, s, "a", 5, 0), evs(9, 11))
	wantEvents(t, "across the gap, limit 2", eventsSince(t, s, "a", 2, 2), append(evs(3, 3), evs(9, 9)...))
	if n := lastEventSeq(t, s, "a"); n != 11 {
		t.Fatalf("last seq = %d, want 11", n)
	}
	for _, e := range eventsSince(t, s, "a", 0, 0) {
		if g := map[bool]uint64{true: l1.Generation, false: l2.Generation}[e.Seq <= 3]; e.Generation != g {
			t.Fatalf("event %d stored with generation %d, want %d", e.Seq, e.Generation, g)
		}
	}
	if h.Reopen != nil {
		s = h.Reopen(t, s)
		t.Cleanup(func() { s.Close() })
		wantEvents(t, "log with a gap after reopen", eventsSince(t, s, "a", 0, 0), want)
		wantErr(t, "reuse after reopen", s.AppendEvents(ctx, "a", store.Fence{Generation: l2.Generation}, evs(10, 10)), store.ErrEventSeq)
	}
}

// testEventsConcurrent: one writer appends in small batches while readers follow the log by
// cursor, woken by hints; every reader sees every event once, in order.
func testEventsConcurrent(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	const total, batch, readers = 300, 7, 4
	all := evs(1, total)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	results := make([][]store.StoredEvent, readers)
	errs := make(chan error, readers+1)
	for r := range readers {
		sub, err := s.Watch(wctx, store.Interest{Sessions: []string{"a"}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cursor uint64
			deadline := time.After(60 * time.Second)
			for cursor < total {
				got, err := s.EventsSince(ctx, "a", cursor, 50)
				if err != nil {
					errs <- err
					return
				}
				if len(got) > 0 {
					results[r] = append(results[r], got...)
					cursor = got[len(got)-1].Seq
					continue
				}
				select {
				case <-sub.C():
					sub.Take()
				case <-deadline:
					errs <- fmt.Errorf("reader %d stuck at %d", r, cursor)
					return
				}
			}
		}()
	}
	for i := 0; i < total; i += batch {
		if err := s.AppendEvents(ctx, "a", store.Fence{}, all[i:min(i+batch, total)]); err != nil {
			t.Fatalf("append at %d: %v", i, err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for r := range readers {
		wantEvents(t, fmt.Sprintf("reader %d", r), results[r], all)
	}

	// Two writers racing for the same seqs: one wins, the other is refused, nothing doubles.
	create(t, s, store.Session{ID: "b"})
	var wins, refused int
	var mu sync.Mutex
	var race sync.WaitGroup
	for range 4 {
		race.Add(1)
		go func() {
			defer race.Done()
			err := s.AppendEvents(ctx, "b", store.Fence{}, evs(1, 3))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrEventSeq):
				refused++
			default:
				t.Errorf("racing append: %v", err)
			}
		}()
	}
	race.Wait()
	if wins != 1 || refused != 3 {
		t.Fatalf("racing appends: %d won, %d refused; want 1 and 3", wins, refused)
	}
	wantEvents(t, "b", eventsSince(t, s, "b", 0, 0), evs(1, 3))
}

func testEventsLargeBatch(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	big := evs(1, 2000)
	for i := range big {
		if big[i].Data == nil {
			big[i].Text = fmt.Sprintf("%0512d", i) // about 1 MB in all
		}
	}
	if err := s.AppendEvents(ctx, "a", store.Fence{}, big); err != nil {
		t.Fatalf("append of %d events: %v", len(big), err)
	}
	wantEvents(t, "large batch", eventsSince(t, s, "a", 0, 0), big)
	wantEvents(t, "large batch, paged", eventsSince(t, s, "a", 1000, 500), big[1000:1500])
	tooMany := evs(2001, 2001+store.MaxEventBatch)
	wantErr(t, "batch over the limit", s.AppendEvents(ctx, "a", store.Fence{}, tooMany), store.ErrInvalidRecord)
	if n := lastEventSeq(t, s, "a"); n != 2000 {
		t.Fatalf("last seq = %d after a refused batch, want 2000", n)
	}
}

func testEventsReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("store does not persist")
	}
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	if err := s.AppendEvents(ctx, "a", store.Fence{}, evs(1, 5)); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s)
	t.Cleanup(func() { s.Close() })
	wantEvents(t, "after reopen", eventsSince(t, s, "a", 0, 0), evs(1, 5))
	wantErr(t, "reuse after reopen", s.AppendEvents(ctx, "a", store.Fence{}, evs(5, 5)), store.ErrEventSeq)
	if err := s.AppendEvents(ctx, "a", store.Fence{}, evs(6, 6)); err != nil {
		t.Fatalf("continuing after reopen: %v", err)
	}
}

func testConcurrentAppends(t *testing.T, h Harness) {
	s := open(t, h)
	const sessions, writersPer, appends = 6, 4, 20
	for i := range sessions {
		create(t, s, store.Session{ID: fmt.Sprintf("s%d", i)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*writersPer*appends)
	for i := range sessions {
		for w := range writersPer {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sid := fmt.Sprintf("s%d", i)
				for n := range appends {
					_, err := s.AppendRows(ctx, sid, store.Fence{}, msgs(fmt.Sprintf("w%d-%d-a", w, n), fmt.Sprintf("w%d-%d-b", w, n)))
					if err != nil {
						errs <- err
						return
					}
					if _, err := s.Rows(ctx, sid, store.RowQuery{Tail: true, Limit: 2}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	seen := map[uint64]bool{}
	for i := range sessions {
		sid := fmt.Sprintf("s%d", i)
		got := rows(t, s, sid, store.RowQuery{})
		if len(got) != writersPer*appends*2 {
			t.Fatalf("%s has %d rows, want %d", sid, len(got), writersPer*appends*2)
		}
		wantAscending(t, sid, ids(got))
		// Each append's two rows are adjacent: one append is one atomic write.
		pos := map[string]int{}
		for j, r := range got {
			if seen[r.ID] {
				t.Fatalf("row id %d used twice", r.ID)
			}
			seen[r.ID] = true
			pos[r.Content] = j
		}
		for w := range writersPer {
			for n := range appends {
				a, okA := pos[fmt.Sprintf("w%d-%d-a", w, n)]
				b, okB := pos[fmt.Sprintf("w%d-%d-b", w, n)]
				if !okA || !okB || b != a+1 {
					t.Fatalf("%s: append w%d-%d missing or split (positions %d, %d)", sid, w, n, a, b)
				}
			}
		}
		if c := get(t, s, sid).RowCount; c != int64(len(got)) {
			t.Fatalf("%s RowCount %d, rows %d", sid, c, len(got))
		}
	}
}

func testClosed(t *testing.T, h Harness) {
	s := h.Open(t)
	create(t, s, store.Session{ID: "a"})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := s.GetSession(ctx, "a")
	wantErr(t, "get after close", err, store.ErrClosed)
	_, err = s.AppendRows(ctx, "a", store.Fence{}, msgs("x"))
	wantErr(t, "append after close", err, store.ErrClosed)
	wantErr(t, "put after close", s.PutKV(ctx, "k", nil), store.ErrClosed)

	s2 := open(t, h)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s2.CreateSession(cctx, store.Session{ID: "a"})
	wantErr(t, "create with cancelled context", err, context.Canceled)
	if _, err := s2.GetSession(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("create with a cancelled context wrote: %v", err)
	}
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("store does not persist")
	}
	s := open(t, h)
	create(t, s, store.Session{ID: "a", Title: "kept", Meta: map[string]string{"k": "v"}})
	create(t, s, store.Session{ID: "b"})
	orig := appendRows(t, s, "a", "r1", "r2", "r3")
	res, err := s.Rewind(ctx, "a", store.Fence{}, orig[1].ID, msgs("edited"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, "b", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutKV(ctx, "runs/1", []byte("v")); err != nil {
		t.Fatal(err)
	}
	maxID := res.Appended[0].ID
	wantRows := rows(t, s, "a", store.RowQuery{IncludeArchived: true})
	wantA := get(t, s, "a")

	s = h.Reopen(t, s)
	t.Cleanup(func() { _ = s.Close() })

	gotA := get(t, s, "a")
	if gotA.Version != wantA.Version || gotA.RowCount != wantA.RowCount || gotA.Rewinds != wantA.Rewinds ||
		gotA.Title != "kept" || gotA.Meta["k"] != "v" || !gotA.UpdatedAt.Equal(wantA.UpdatedAt) {
		t.Fatalf("session after reopen = %+v, want %+v", gotA, wantA)
	}
	gotRows := rows(t, s, "a", store.RowQuery{IncludeArchived: true})
	if !slices.Equal(ids(gotRows), ids(wantRows)) || !slices.Equal(contents(gotRows), contents(wantRows)) {
		t.Fatalf("rows after reopen %v %q, want %v %q", ids(gotRows), contents(gotRows), ids(wantRows), contents(wantRows))
	}
	for i := range gotRows {
		if gotRows[i].Active != wantRows[i].Active || !gotRows[i].Time.Equal(wantRows[i].Time) {
			t.Fatalf("row %d after reopen = %+v, want %+v", i, gotRows[i], wantRows[i])
		}
	}
	if v, err := s.GetKV(ctx, "runs/1"); err != nil || string(v) != "v" {
		t.Fatalf("kv after reopen = %q, %v", v, err)
	}
	_, err = s.CreateSession(ctx, store.Session{ID: "c", Title: "kept"})
	wantErr(t, "title index after reopen", err, store.ErrTitleTaken)

	// Row ids keep growing across a reopen, even past ids that a rewind deleted.
	next := appendRows(t, s, "b", "after reopen")
	if next[0].ID <= maxID {
		t.Fatalf("row id %d after reopen, highest before was %d: ids reused", next[0].ID, maxID)
	}
	// The lease generation survives: a newer owner still fences the old one after a restart.
	if err := s.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	l2, err := s.AcquireLease(ctx, "b", "node-2", time.Hour)
	if err != nil || l2.Generation <= l.Generation {
		t.Fatalf("lease after reopen = %+v, %v; want generation above %d", l2, err, l.Generation)
	}
	_, err = s.AppendRows(ctx, "b", store.Fence{Generation: l.Generation}, msgs("stale"))
	wantErr(t, "stale fence after reopen", err, store.ErrFenced)
}

func testLeaseRenew(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	l, err := s.AcquireLease(ctx, "a", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.RenewLease(ctx, l, 2*time.Hour)
	if err != nil || r.Generation != l.Generation || r.Owner != "node-1" || !r.Expires.After(l.Expires) {
		t.Fatalf("RenewLease = %+v, %v; want generation %d, later expiry", r, err, l.Generation)
	}
	// A renewal by a holder that never held this generation, or of an expired lease, is refused.
	_, err = s.RenewLease(ctx, store.Lease{SessionID: "a", Owner: "node-2", Generation: l.Generation}, time.Hour)
	wantErr(t, "renew by another owner", err, store.ErrLeaseLost)
	_, err = s.RenewLease(ctx, r, 0)
	wantErr(t, "renew without ttl", err, store.ErrInvalidRecord)

	short, err := s.RenewLease(ctx, r, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitPast(short.Expires)
	_, err = s.RenewLease(ctx, short, time.Hour)
	wantErr(t, "renew after expiry", err, store.ErrLeaseLost)
	if ls, err := s.ListLeases(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("ListLeases after expiry = %+v, %v; want none", ls, err)
	}

	// Expired: another holder takes it with a newer generation, and the old one stays lost.
	l2, err := s.AcquireLease(ctx, "a", "node-2", time.Hour)
	if err != nil || l2.Generation <= l.Generation {
		t.Fatalf("takeover after expiry = %+v, %v; want generation above %d", l2, err, l.Generation)
	}
	_, err = s.RenewLease(ctx, short, time.Hour)
	wantErr(t, "renew after takeover", err, store.ErrLeaseLost)
	ls, err := s.ListLeases(ctx)
	if err != nil || len(ls) != 1 || ls[0].SessionID != "a" || ls[0].Owner != "node-2" || ls[0].Generation != l2.Generation {
		t.Fatalf("ListLeases = %+v, %v; want node-2's lease on a", ls, err)
	}
	if err := s.ReleaseLease(ctx, l2); err != nil {
		t.Fatal(err)
	}
	_, err = s.RenewLease(ctx, l2, time.Hour)
	wantErr(t, "renew after release", err, store.ErrLeaseLost)
	_, err = s.RenewLease(ctx, store.Lease{SessionID: "missing", Owner: "x", Generation: 1}, time.Hour)
	if err == nil {
		t.Fatal("renewing a lease of a missing session succeeded")
	}
}

// testGetLease: GetLease answers the one session's live lease, and ErrNotFound whenever
// nobody holds it (never leased, released, expired, no such session).
func testGetLease(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	create(t, s, store.Session{ID: "b"})
	_, err := s.GetLease(ctx, "a")
	wantErr(t, "lease never taken", err, store.ErrNotFound)
	_, err = s.GetLease(ctx, "missing")
	wantErr(t, "lease of a missing session", err, store.ErrNotFound)

	la, err := s.AcquireLease(ctx, "a", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := s.AcquireLease(ctx, "b", "node-2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []store.Lease{la, lb} {
		got, err := s.GetLease(ctx, want.SessionID)
		if err != nil || got.SessionID != want.SessionID || got.Owner != want.Owner || got.Generation != want.Generation || !got.Expires.Equal(want.Expires) {
			t.Fatalf("GetLease(%q) = %+v, %v; want %+v", want.SessionID, got, err, want)
		}
	}
	// A renewal shows its new expiry.
	r, err := s.RenewLease(ctx, la, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetLease(ctx, "a"); err != nil || !got.Expires.Equal(r.Expires) || got.Generation != la.Generation {
		t.Fatalf("GetLease after renewal = %+v, %v; want %+v", got, err, r)
	}
	// Released: nobody holds it, though the generation is remembered.
	if err := s.ReleaseLease(ctx, r); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetLease(ctx, "a")
	wantErr(t, "released lease", err, store.ErrNotFound)
	if got, err := s.GetLease(ctx, "b"); err != nil || got.Owner != "node-2" {
		t.Fatalf("GetLease(b) after releasing a = %+v, %v; want node-2's", got, err)
	}
	// Expired: nobody holds it either; the next holder shows with its newer generation.
	short, err := s.AcquireLease(ctx, "a", "node-3", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitPast(short.Expires)
	_, err = s.GetLease(ctx, "a")
	wantErr(t, "expired lease", err, store.ErrNotFound)
	l4, err := s.AcquireLease(ctx, "a", "node-4", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetLease(ctx, "a"); err != nil || got.Owner != "node-4" || got.Generation != l4.Generation || got.Generation <= short.Generation {
		t.Fatalf("GetLease after takeover = %+v, %v; want node-4's generation %d", got, err, l4.Generation)
	}
}

// waitPast sleeps until the wall clock is past t (leases expire by the store's clock, which is
// this machine's).
func waitPast(t time.Time) {
	for time.Now().Before(t.Add(time.Millisecond)) {
		time.Sleep(time.Until(t) + time.Millisecond)
	}
}

func testLeaseRace(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	const holders = 8
	var wg sync.WaitGroup
	won := make(chan store.Lease, holders)
	errs := make(chan error, holders)
	for i := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.AcquireLease(ctx, "a", fmt.Sprintf("node-%d", i), time.Hour)
			if err != nil {
				errs <- err
				return
			}
			won <- l
		}()
	}
	wg.Wait()
	close(won)
	close(errs)
	if len(won) != 1 {
		t.Fatalf("%d holders acquired one lease at once, want exactly 1", len(won))
	}
	for err := range errs {
		wantErr(t, "losing acquire", err, store.ErrLeaseHeld)
	}
	// Generations strictly increase over a chain of holders.
	prev := (<-won)
	for i := range 5 {
		if err := s.ReleaseLease(ctx, prev); err != nil {
			t.Fatal(err)
		}
		next, err := s.AcquireLease(ctx, "a", fmt.Sprintf("next-%d", i), time.Hour)
		if err != nil || next.Generation <= prev.Generation {
			t.Fatalf("acquire %d = %+v, %v; want generation above %d", i, next, err, prev.Generation)
		}
		prev = next
	}
}

// testFencedWrites covers the fence a write carries in its context (store.Fenced, WithFence):
// every write of a stale holder is refused by the store and changes nothing.
func testFencedWrites(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	create(t, s, store.Session{ID: "b"})
	old, err := s.AcquireLease(ctx, "a", "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stale := store.Fenced(s, "a", old.Generation)
	if _, err := stale.AppendRows(ctx, "a", store.Fence{}, msgs("by node-1")); err != nil {
		t.Fatalf("fenced append under the current lease: %v", err)
	}
	if err := stale.PutKV(ctx, "runs/a/1", []byte("v1")); err != nil {
		t.Fatalf("fenced put under the current lease: %v", err)
	}
	if _, err := stale.UpdateSession(ctx, "a", 0, func(x *store.Session) error { x.Title = "t1"; return nil }); err != nil {
		t.Fatalf("fenced update under the current lease: %v", err)
	}
	if err := stale.Close(); err != nil {
		t.Fatalf("closing a fenced view: %v", err)
	}
	if _, err := s.GetSession(ctx, "a"); err != nil {
		t.Fatalf("closing a fenced view closed the store: %v", err)
	}

	// node-1 stalls past its ttl; node-2 takes the session over.
	short, err := s.RenewLease(ctx, old, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitPast(short.Expires)
	cur, err := s.AcquireLease(ctx, "a", "node-2", time.Hour)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	beforeA, beforeB := get(t, s, "a"), get(t, s, "b")

	_, err = stale.AppendRows(ctx, "a", store.Fence{}, msgs("stale"))
	wantErr(t, "stale fenced append", err, store.ErrFenced)
	_, err = stale.AppendRows(ctx, "a", store.Fence{}, nil)
	wantErr(t, "stale fenced empty append", err, store.ErrFenced)
	_, err = stale.AppendRows(ctx, "b", store.Fence{}, msgs("stale, other session"))
	wantErr(t, "stale fenced append to another session", err, store.ErrFenced)
	_, err = stale.Rewind(ctx, "a", store.Fence{}, 0, nil)
	wantErr(t, "stale fenced rewind", err, store.ErrFenced)
	_, err = stale.UpdateSession(ctx, "a", 0, func(x *store.Session) error { x.Title = "stale"; return nil })
	wantErr(t, "stale fenced update", err, store.ErrFenced)
	_, err = stale.CopyRows(ctx, "a", "b", 0)
	wantErr(t, "stale fenced copy", err, store.ErrFenced)
	_, err = stale.CreateSession(ctx, store.Session{ID: "c"})
	wantErr(t, "stale fenced create", err, store.ErrFenced)
	wantErr(t, "stale fenced put", stale.PutKV(ctx, "runs/a/1", []byte("stale")), store.ErrFenced)
	wantErr(t, "stale fenced delete", stale.DeleteKV(ctx, "runs/a/1"), store.ErrFenced)
	wantErr(t, "stale WithFence put", s.PutKV(store.WithFence(ctx, "a", old.Generation), "k", nil), store.ErrFenced)
	wantErr(t, "fence on a session without a lease", s.PutKV(store.WithFence(ctx, "b", 1), "k", nil), store.ErrFenced)

	if after := get(t, s, "a"); after.Version != beforeA.Version || after.Title != "t1" || after.RowCount != 1 {
		t.Fatalf("stale writes changed session a: %+v", after)
	}
	if after := get(t, s, "b"); after.Version != beforeB.Version || after.RowCount != 0 {
		t.Fatalf("stale writes changed session b: %+v", after)
	}
	if v, err := s.GetKV(ctx, "runs/a/1"); err != nil || string(v) != "v1" {
		t.Fatalf("kv after stale writes = %q, %v; want v1", v, err)
	}
	if _, err := s.GetKV(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("stale WithFence put wrote: %v", err)
	}
	if _, err := s.GetSession(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("stale fenced create wrote: %v", err)
	}

	// The new holder writes; reads through the stale view still work.
	fresh := store.Fenced(s, "a", cur.Generation)
	if _, err := fresh.AppendRows(ctx, "a", store.Fence{}, msgs("by node-2")); err != nil {
		t.Fatalf("append by the new holder: %v", err)
	}
	if err := fresh.PutKV(ctx, "runs/a/1", []byte("v2")); err != nil {
		t.Fatalf("put by the new holder: %v", err)
	}
	if err := fresh.DeleteKV(ctx, "runs/a/1"); err != nil {
		t.Fatalf("delete by the new holder: %v", err)
	}
	wantStrings(t, "rows read through the stale view", contents(rows(t, stale, "a", store.RowQuery{})), "by node-1", "by node-2")
	// An explicit fence argument still counts on its own: an old one is refused through the
	// new holder's view.
	_, err = fresh.AppendRows(ctx, "a", store.Fence{Generation: old.Generation}, msgs("explicit stale"))
	wantErr(t, "explicit stale fence through a fresh view", err, store.ErrFenced)
	// Unfenced single-process writes keep working.
	if _, err := s.AppendRows(ctx, "a", store.Fence{}, msgs("unfenced")); err != nil {
		t.Fatalf("unfenced append: %v", err)
	}
}

// next waits for the subscription's signal and returns what it took.
func next(t *testing.T, sub *store.Subscription) ([]store.Change, bool) {
	t.Helper()
	select {
	case _, ok := <-sub.C():
		if !ok {
			t.Fatal("subscription ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no change hint within 10s")
	}
	return sub.Take()
}

func hasChange(cs []store.Change, c store.Change) bool { return slices.Contains(cs, c) }

func testWatch(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, store.Session{ID: "a"})
	create(t, s, store.Session{ID: "b"})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := s.Watch(wctx, store.Interest{Sessions: []string{"a"}, KeyPrefixes: []string{"events/a/"}})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	all, err := s.Watch(wctx, store.Interest{AllSessions: true, KeyPrefixes: []string{""}})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}

	// Writes elsewhere do not wake the session's watcher; the catch-all one sees them.
	appendRows(t, s, "b", "elsewhere")
	if err := s.PutKV(ctx, "events/b/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	cs, _ := next(t, all)
	for len(cs) < 2 {
		more, _ := next(t, all)
		cs = append(cs, more...)
	}
	if !hasChange(cs, store.Change{SessionID: "b"}) || !hasChange(cs, store.Change{Key: "events/b/1"}) {
		t.Fatalf("catch-all watcher got %+v", cs)
	}

	type write struct {
		name string
		do   func() error
		want store.Change
	}
	writes := []write{
		{"append", func() error { _, err := s.AppendRows(ctx, "a", store.Fence{}, msgs("x")); return err }, store.Change{SessionID: "a"}},
		{"update", func() error {
			_, err := s.UpdateSession(ctx, "a", 0, func(x *store.Session) error { x.Title = "w"; return nil })
			return err
		}, store.Change{SessionID: "a"}},
		{"rewind", func() error { _, err := s.Rewind(ctx, "a", store.Fence{}, 0, msgs("y")); return err }, store.Change{SessionID: "a"}},
		{"lease", func() error { _, err := s.AcquireLease(ctx, "a", "n", time.Hour); return err }, store.Change{SessionID: "a"}},
		{"put", func() error { return s.PutKV(ctx, "events/a/1", []byte("e")) }, store.Change{Key: "events/a/1"}},
		{"cas", func() error {
			ok, err := s.CompareAndSwapKV(ctx, "events/a/1", []byte("e"), []byte("c"))
			if err == nil && !ok {
				err = errors.New("swap refused")
			}
			return err
		}, store.Change{Key: "events/a/1"}},
		{"delete", func() error { return s.DeleteKV(ctx, "events/a/1") }, store.Change{Key: "events/a/1"}},
	}
	for _, w := range writes {
		if err := w.do(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		// The hint is there by the time the write returns.
		select {
		case <-sub.C():
		default:
			t.Fatalf("%s: no hint pending when the write returned", w.name)
		}
		got, lost := sub.Take()
		if lost || !hasChange(got, w.want) {
			t.Fatalf("%s: hints %+v (lost %v), want %+v", w.name, got, lost, w.want)
		}
		for _, c := range got {
			if c.SessionID == "b" || c.Key == "events/b/1" {
				t.Fatalf("%s: the session watcher got %+v", w.name, c)
			}
		}
	}
	// A failed write wakes nobody.
	if _, err := s.Rewind(ctx, "a", store.Fence{}, 1<<60, nil); !errors.Is(err, store.ErrStaleRow) {
		t.Fatalf("stale rewind: %v", err)
	}
	select {
	case <-sub.C():
		got, lost := sub.Take()
		t.Fatalf("a refused write woke the watcher: %+v lost=%v", got, lost)
	default:
	}

	// Many writes while nobody reads coalesce into one signal.
	for i := range 20 {
		if err := s.PutKV(ctx, fmt.Sprintf("events/a/%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := next(t, sub)
	if len(got) != 20 {
		t.Fatalf("coalesced hints: %d, want 20 distinct keys", len(got))
	}

	// Cancelling the watch's context ends the subscription: C is closed.
	cancel()
	select {
	case _, ok := <-sub.C():
		if ok {
			// a signal left from before; the close follows
			if _, ok := <-sub.C(); ok {
				t.Fatal("subscription signalled after its context ended")
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription not ended by its context")
	}
	sub.Close() // idempotent

	// Close of the store ends the remaining subscriptions.
	late, err := s.Watch(ctx, store.Interest{AllSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-late.C():
		for ok {
			_, ok = <-late.C()
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription not ended by Close")
	}
	if _, err := s.Watch(ctx, store.Interest{AllSessions: true}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
}
