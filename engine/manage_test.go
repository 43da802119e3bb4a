package engine_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
)

// gatedStore holds Rewind until released (after signalling that it was reached), and fails
// AppendRows of rows whose content is failContent.
type gatedStore struct {
	store.Store
	rewindReached chan struct{}
	rewindRelease chan struct{}
	failContent   string
}

func (g *gatedStore) Rewind(ctx context.Context, id string, f store.Fence, before uint64, extra []store.Row) (store.RewindResult, error) {
	if g.rewindReached != nil {
		close(g.rewindReached)
		g.rewindReached = nil
		<-g.rewindRelease
	}
	return g.Store.Rewind(ctx, id, f, before, extra)
}

func (g *gatedStore) AppendRows(ctx context.Context, id string, f store.Fence, rows []store.Row) ([]store.Row, error) {
	for _, r := range rows {
		if g.failContent != "" && r.Content == g.failContent {
			return nil, errors.New("disk full")
		}
	}
	return g.Store.AppendRows(ctx, id, f, rows)
}

func listed(t *testing.T, eng *engine.Engine, id string) bool {
	t.Helper()
	all, err := eng.List(context.Background(), engine.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(all, func(r engine.Record) bool { return r.ID == id })
}

func contents(rows []engine.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Role + ":" + r.Content
	}
	return out
}

func TestCreateSeededHistory(t *testing.T) {
	t.Parallel()
	g := &gatedStore{failContent: "unwritable"}
	h := newHarness(t, func(c *engine.Config) { g.Store = c.Store; c.Store = g })
	ctx := ctxT(t)
	s, err := h.eng.Create(ctx, engine.CreateOptions{Lazy: true, History: []engine.Row{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Stored() || s.Record().RowCount != 3 {
		t.Fatalf("seeded session stored=%v rows=%d, want stored with 3 rows", s.Stored(), s.Record().RowCount)
	}
	if got := contents(mustRows(t, s)); !slices.Equal(got, []string{"system:be brief", "user:hi", "assistant:hello"}) {
		t.Fatalf("seeded transcript %q", got)
	}
	h.srv.Enqueue(openaitest.Text("fine"))
	h.run(s, "next")
	if msgs := h.lastRequestMessages(); len(msgs) != 5 || msgs[1]["content"] != "be brief" || msgs[3]["content"] != "hello" {
		t.Fatalf("the model did not see the seeded history: %v", msgs)
	}

	// A seed that cannot be written leaves nothing behind: not live, not listed, not openable.
	_, err = h.eng.Create(ctx, engine.CreateOptions{ID: "seed-fails", History: []engine.Row{{Role: "user", Content: "unwritable"}}})
	if err == nil {
		t.Fatal("a seed the store refused was reported as written")
	}
	if _, ok := h.eng.Peek("seed-fails"); ok || listed(t, h.eng, "seed-fails") {
		t.Fatal("the half-made session is still visible")
	}
	if _, err := h.eng.Open(ctx, "seed-fails"); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("open of the half-made session: %v", err)
	}
}

func TestDeleteHidesSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	s := h.create()
	h.srv.Enqueue(openaitest.Text("done"))
	h.run(s, "hello")
	id := s.ID()
	other := h.create()

	if err := h.eng.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if s.Status() != engine.StatusClosed {
		t.Fatalf("the deleted session is %s, want closed", s.Status())
	}
	if err := s.SetTitle(ctx, "after delete"); !errors.Is(err, engine.ErrSessionClosed) {
		t.Fatalf("title of a deleted session: %v", err)
	}
	if _, err := h.eng.Open(ctx, id); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("open of a deleted session: %v", err)
	}
	if _, err := h.eng.Record(ctx, id); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("record of a deleted session: %v", err)
	}
	if listed(t, h.eng, id) || !listed(t, h.eng, other.ID()) {
		t.Fatal("list shows the deleted session or hides the other")
	}
	if _, err := h.eng.Branch(ctx, id, engine.BranchOptions{}); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("branch of a deleted session: %v", err)
	}
	// The transcript is kept in the store.
	rec, err := h.st.GetSession(ctx, id)
	if err != nil || rec.Meta[engine.MetaDeleted] == "" || rec.EndReason != "deleted" || rec.RowCount != 2 {
		t.Fatalf("stored record after delete %+v, %v", rec, err)
	}
	// The limit counts sessions that are listed.
	if all, err := h.eng.List(ctx, engine.ListOptions{Limit: 1}); err != nil || len(all) != 1 || all[0].ID != other.ID() {
		t.Fatalf("list with limit 1: %+v, %v", all, err)
	}

	if err := h.eng.Delete(ctx, id); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if err := h.eng.Delete(ctx, "no-such-session"); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("delete of an unknown session: %v", err)
	}
	// A lazy session, never stored, is just closed.
	lazy, err := h.eng.Create(ctx, engine.CreateOptions{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.eng.Delete(ctx, lazy.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Record(ctx, lazy.ID()); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("record of a deleted lazy session: %v", err)
	}
}

func TestDeleteInterruptsRunningTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.create()
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"slow"}, FaultAt: 1, Gate: g})
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "work"})
	if err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	if err := h.eng.Delete(ctxT(t), s.ID()); err != nil {
		t.Fatal(err)
	}
	g.Release()
	out, err := s.Wait(ctxT(t), adm.TurnID)
	if err != nil || !out.Interrupted {
		t.Fatalf("the running turn was not interrupted: %+v, %v", out, err)
	}
}

func TestUndo(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	s := h.create()
	if _, err := s.Undo(ctx); !errors.Is(err, engine.ErrNothingToUndo) {
		t.Fatalf("undo of an empty session: %v", err)
	}
	h.srv.Enqueue(openaitest.Text("one"), openaitest.Text("two"))
	h.run(s, "first")
	h.run(s, "second")
	u, err := s.Undo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u.Text != "second" || u.Archived != 2 {
		t.Fatalf("undo %+v, want the second prompt and 2 rows archived", u)
	}
	if got := contents(mustRows(t, s)); !slices.Equal(got, []string{"user:first", "assistant:one"}) {
		t.Fatalf("transcript after undo %q", got)
	}
	if s.Record().Rewinds != 1 {
		t.Fatalf("the cached record was not refreshed: %+v", s.Record())
	}

	// A running turn is not undone under it.
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"slow"}, FaultAt: 1, Gate: g})
	adm, err := s.Submit(ctx, engine.Prompt{Text: "third"})
	if err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	if _, err := s.Undo(ctx); !errors.Is(err, engine.ErrBusy) {
		t.Fatalf("undo while a turn runs: %v", err)
	}
	if err := s.Append(ctx, engine.Row{Role: "system", Content: "x"}); !errors.Is(err, engine.ErrBusy) {
		t.Fatalf("append while a turn runs: %v", err)
	}
	s.Interrupt("")
	g.Release()
	if _, err := s.Wait(ctx, adm.TurnID); err != nil {
		t.Fatal(err)
	}
}

// TestUndoHoldsTheTurn is the race an undo made of a check and a separate rewind had: a prompt
// admitted between the check and the write started a turn whose user row the rewind then
// archived, leaving its answer without its prompt. The undo now holds the turn slot: the
// prompt, arriving while the rewind is held in the store, is queued behind it and runs after.
func TestUndoHoldsTheTurn(t *testing.T) {
	t.Parallel()
	g := &gatedStore{}
	h := newHarness(t, func(c *engine.Config) { g.Store = c.Store; c.Store = g })
	ctx := ctxT(t)
	s := h.create()
	h.srv.Enqueue(openaitest.Text("one"), openaitest.Text("two"))
	h.run(s, "first")

	g.rewindReached, g.rewindRelease = make(chan struct{}), make(chan struct{})
	reached := g.rewindReached
	type result struct {
		u   engine.Undone
		err error
	}
	undone := make(chan result, 1)
	go func() {
		u, err := s.Undo(ctx)
		undone <- result{u, err}
	}()
	<-reached // the undo has checked and is writing

	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	adm, err := s.Submit(ctx, engine.Prompt{Text: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if adm.Status != engine.AdmitQueued || adm.TurnID != "" {
		t.Fatalf("a prompt during the undo was admitted as %+v; it must wait for the undo", adm)
	}
	if _, err := s.Undo(ctx); !errors.Is(err, engine.ErrBusy) {
		t.Fatalf("a second undo during the first: %v", err)
	}
	close(g.rewindRelease)
	r := <-undone
	if r.err != nil || r.u.Text != "first" || r.u.Archived != 2 {
		t.Fatalf("undo %+v, %v", r.u, r.err)
	}
	ev := next(t, sub, engine.EvMessageComplete)
	if out, ok := ev.Data.(engine.Outcome); !ok || out.Text != "two" {
		t.Fatalf("the queued turn ended with %+v", ev.Data)
	}
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := contents(mustRows(t, s)); !slices.Equal(got, []string{"user:second", "assistant:two"}) {
		t.Fatalf("transcript %q: the queued turn must follow the undo whole", got)
	}
}

func TestAppendContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	s, err := h.eng.Create(ctx, engine.CreateOptions{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, engine.Row{Role: "system", Content: "answer in French"}); err != nil {
		t.Fatal(err)
	}
	if !s.Stored() {
		t.Fatal("append did not store the lazy session")
	}
	h.srv.Enqueue(openaitest.Text("bonjour"))
	h.run(s, "hello")
	if got := contents(mustRows(t, s)); !slices.Equal(got, []string{"system:answer in French", "user:hello", "assistant:bonjour"}) {
		t.Fatalf("transcript %q", got)
	}
}

func TestBranchWithID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	parent, err := h.eng.Create(ctx, engine.CreateOptions{Title: "plans"})
	if err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(openaitest.Text("one"), openaitest.Text("two"))
	h.run(parent, "first")
	h.run(parent, "second")
	rows := mustRows(t, parent)

	b, err := h.eng.Branch(ctx, parent.ID(), engine.BranchOptions{ID: "plans-b", UptoRowID: rows[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	rec := b.Record()
	if b.ID() != "plans-b" || rec.ParentID != parent.ID() || rec.ParentKind != "branch" || rec.Title != "plans #2" || rec.RowCount != 2 {
		t.Fatalf("branch %+v", rec)
	}
	if _, err := h.eng.Branch(ctx, parent.ID(), engine.BranchOptions{ID: "plans-b"}); !errors.Is(err, engine.ErrSessionExists) {
		t.Fatalf("branch onto a taken id: %v", err)
	}
	// A title held by a lazy session, not stored yet, is taken too.
	if _, err := h.eng.Create(ctx, engine.CreateOptions{Lazy: true, Title: "pending"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Branch(ctx, parent.ID(), engine.BranchOptions{ID: "plans-c", Title: "pending"}); !errors.Is(err, engine.ErrTitleTaken) {
		t.Fatalf("branch under a pending title: %v", err)
	}
	// A stale row leaves no branch behind.
	_, err = h.eng.Branch(ctx, parent.ID(), engine.BranchOptions{ID: "plans-d", UptoRowID: 999999})
	if !errors.Is(err, engine.ErrStaleRow) {
		t.Fatalf("branch up to a stale row: %v", err)
	}
	if _, ok := h.eng.Peek("plans-d"); ok || listed(t, h.eng, "plans-d") {
		t.Fatal("the failed branch is still visible")
	}
	if _, err := h.eng.Branch(ctx, parent.ID(), engine.BranchOptions{ID: "bad/id"}); !errors.Is(err, engine.ErrInvalidRecord) {
		t.Fatalf("branch under an invalid id: %v", err)
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	if _, err := h.eng.Setting(ctx, "ns/a"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unset setting: %v", err)
	}
	for k, v := range map[string]string{"ns/a": "1", "ns/b": "2", "other/c": "3"} {
		if err := h.eng.PutSetting(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := h.eng.Setting(ctx, "ns/b"); err != nil || string(b) != "2" {
		t.Fatalf("setting ns/b: %q, %v", b, err)
	}
	kv, err := h.eng.Settings(ctx, "ns/")
	if err != nil || len(kv) != 2 || string(kv["ns/a"]) != "1" {
		t.Fatalf("settings under ns/: %q, %v", kv, err)
	}
	if err := h.eng.DeleteSetting(ctx, "ns/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Setting(ctx, "ns/a"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("deleted setting: %v", err)
	}
	if err := h.eng.DeleteSetting(ctx, "ns/never"); err != nil {
		t.Fatalf("deleting an unset setting: %v", err)
	}
}

var (
	errCopy = errors.New("copy failed")
	errMark = errors.New("mark failed")
)

// brokenBranchStore cannot copy rows nor update a record.
type brokenBranchStore struct{ store.Store }

func (brokenBranchStore) CopyRows(context.Context, string, string, uint64) (int, error) {
	return 0, errCopy
}

func (brokenBranchStore) UpdateSession(context.Context, string, uint64, func(*store.Session) error) (store.Session, error) {
	return store.Session{}, errMark
}

// A branch whose rows could not be copied is marked deleted; when that write fails too, the
// caller hears of both failures.
func TestBranchReportsAFailedCleanup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.Store = brokenBranchStore{c.Store} })
	parent := h.create()
	_, err := h.eng.Branch(ctxT(t), parent.ID(), engine.BranchOptions{ID: "child"})
	if !errors.Is(err, errCopy) || !errors.Is(err, errMark) {
		t.Fatalf("branch: %v, want the copy's and the cleanup's failures", err)
	}
	if _, ok := h.eng.Peek("child"); ok {
		t.Fatal("the failed branch is still live")
	}
}

// TestUndoHandsOverToTheLine: a prompt admitted in line (Prompt.InLine) during an undo waits
// for it and starts its turn once the undo is done.
func TestUndoHandsOverToTheLine(t *testing.T) {
	t.Parallel()
	g := &gatedStore{}
	h := newHarness(t, func(c *engine.Config) { g.Store = c.Store; c.Store = g })
	ctx := ctxT(t)
	s := h.create()
	h.srv.Enqueue(openaitest.Text("one"), openaitest.Text("two"))
	h.run(s, "first")

	g.rewindReached, g.rewindRelease = make(chan struct{}), make(chan struct{})
	reached := g.rewindReached
	undone := make(chan error, 1)
	go func() {
		_, err := s.Undo(ctx)
		undone <- err
	}()
	<-reached
	admitted := make(chan engine.Admission, 1)
	go func() {
		adm, err := s.Submit(ctx, engine.Prompt{Text: "second", InLine: true})
		if err != nil {
			t.Error(err)
		}
		admitted <- adm
	}()
	for s.Snapshot().InLine == 0 { // waits in line behind the undo
		select {
		case adm := <-admitted:
			t.Fatalf("admitted during the undo: %+v", adm)
		default:
		}
		runtime.Gosched()
	}
	close(g.rewindRelease)
	if err := <-undone; err != nil {
		t.Fatal(err)
	}
	adm := <-admitted
	if adm.Status != engine.AdmitStarted {
		t.Fatalf("the prompt in line was admitted as %+v", adm)
	}
	if out, err := s.Wait(ctx, adm.TurnID); err != nil || out.Text != "two" {
		t.Fatalf("its turn: %+v, %v", out, err)
	}
	if got := contents(mustRows(t, s)); !slices.Equal(got, []string{"user:second", "assistant:two"}) {
		t.Fatalf("transcript %q", got)
	}
}

// TestManageReleasedHandle: a handle the engine released while idle still undoes (it is made
// live again); once the session is deleted, it is refused like an unknown one.
func TestManageReleasedHandle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	s := h.create()
	h.srv.Enqueue(openaitest.Text("one"))
	h.run(s, "first")
	if n := h.eng.ReleaseIdle(0, nil); n != 1 || !s.Released() {
		t.Fatalf("released %d, handle released %v", n, s.Released())
	}
	if u, err := s.Undo(ctx); err != nil || u.Text != "first" {
		t.Fatalf("undo through a released handle: %+v, %v", u, err)
	}
	if h.eng.ReleaseIdle(0, nil) != 1 {
		t.Fatal("not released again")
	}
	if err := h.eng.Delete(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, engine.Row{Role: "system", Content: "x"}); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("append through the handle of a deleted session: %v", err)
	}
}

// A branch refused for a row id that is not in the parent leaves nothing: its id and title can
// be used at once; a deleted session's title is free again too.
func TestRefusedBranchLeavesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	parent, err := h.eng.Create(ctx, engine.CreateOptions{ID: "s1", Title: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(openaitest.Text("one"))
	h.run(parent, "first")
	rows := mustRows(t, parent)
	missing := rows[len(rows)-1].ID + 1
	_, err = h.eng.Branch(ctx, "s1", engine.BranchOptions{ID: "zz-fork", Title: "T-fork", UptoRowID: missing})
	if !errors.Is(err, engine.ErrStaleRow) {
		t.Fatalf("branch up to a row the parent does not have: %v", err)
	}
	if _, err := h.st.GetSession(ctx, "zz-fork"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused branch left a record: %v", err)
	}
	b, err := h.eng.Branch(ctx, "s1", engine.BranchOptions{ID: "zz-fork", Title: "T-fork", UptoRowID: rows[0].ID})
	if err != nil {
		t.Fatalf("branch under the refused branch's id and title: %v", err)
	}
	if rec := b.Record(); rec.Title != "T-fork" || rec.RowCount != 1 {
		t.Fatalf("branch %+v", rec)
	}
	if err := h.eng.Delete(ctx, "zz-fork"); err != nil {
		t.Fatal(err)
	}
	if rec, err := h.st.GetSession(ctx, "zz-fork"); err != nil || rec.Title != "" || rec.Meta[engine.MetaDeletedTitle] != "T-fork" {
		t.Fatalf("deleted record %+v, %v", rec, err)
	}
	if _, err := h.eng.Create(ctx, engine.CreateOptions{Title: "T-fork"}); err != nil {
		t.Fatalf("create under a deleted session's title: %v", err)
	}
}

// A session deleted while it still held its title in the store (an older store) gives it up
// when another session asks for it.
func TestDeletedSessionTitleIsFreed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	if _, err := h.st.CreateSession(ctx, store.Session{ID: "old", Title: "kept", Meta: map[string]string{engine.MetaDeleted: "2026-01-01T00:00:00Z"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Create(ctx, engine.CreateOptions{Title: "kept"}); err != nil {
		t.Fatalf("create under a deleted session's title: %v", err)
	}
	if rec, err := h.st.GetSession(ctx, "old"); err != nil || rec.Meta[engine.MetaDeleted] != "2026-01-01T00:00:00Z" || rec.Meta[engine.MetaDeletedTitle] != "kept" {
		t.Fatalf("old record %+v, %v", rec, err)
	}
}

// copyFailsOnce fails the first CopyRows.
type copyFailsOnce struct {
	store.Store
	failed bool
}

func (c *copyFailsOnce) CopyRows(ctx context.Context, src, dst string, upto uint64) (int, error) {
	if !c.failed {
		c.failed = true
		return 0, errCopy
	}
	return c.Store.CopyRows(ctx, src, dst, upto)
}

// A branch whose rows could not be copied is discarded: its id and title are free again, for
// a branch, a new session or a lazy one; the id of a session that was really used is not.
func TestDiscardedBranchFreesItsID(t *testing.T) {
	t.Parallel()
	cs := &copyFailsOnce{}
	h := newHarness(t, func(c *engine.Config) { cs.Store = c.Store; c.Store = cs })
	ctx := ctxT(t)
	parent := h.create()
	h.srv.Enqueue(openaitest.Text("one"))
	h.run(parent, "first")
	if _, err := h.eng.Branch(ctx, parent.ID(), engine.BranchOptions{ID: "child", Title: "kid"}); !errors.Is(err, errCopy) {
		t.Fatalf("branch: %v", err)
	}
	if rec, err := h.st.GetSession(ctx, "child"); err != nil || rec.Meta[engine.MetaDiscarded] == "" || rec.Title != "" {
		t.Fatalf("discarded record %+v, %v", rec, err)
	}
	lazy, err := h.eng.Create(ctx, engine.CreateOptions{ID: "child", Lazy: true})
	if err != nil {
		t.Fatalf("lazy session under a discarded id: %v", err)
	}
	if err := lazy.Close(ctx, ""); err != nil {
		t.Fatal(err)
	}
	b, err := h.eng.Branch(ctx, parent.ID(), engine.BranchOptions{ID: "child", Title: "kid"})
	if err != nil {
		t.Fatalf("branch under the discarded id: %v", err)
	}
	rec := b.Record()
	if rec.Title != "kid" || rec.ParentID != parent.ID() || rec.RowCount != 2 || rec.Meta[engine.MetaDiscarded] != "" || rec.Meta[engine.MetaDeleted] != "" {
		t.Fatalf("branch %+v", rec)
	}
	if r, err := h.eng.Record(ctx, "child"); err != nil || r.RowCount != 2 {
		t.Fatalf("record of the branch: %+v, %v", r, err)
	}
	// A session that was used and then deleted keeps its id.
	if err := h.eng.Delete(ctx, "child"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Create(ctx, engine.CreateOptions{ID: "child"}); !errors.Is(err, engine.ErrSessionExists) {
		t.Fatalf("create under a deleted session's id: %v", err)
	}
}
