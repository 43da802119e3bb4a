package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/tool"
)

// releaseAll releases every idle session regardless of when it was last used.
func releaseAll(e *engine.Engine) int { return e.ReleaseIdle(0, nil) }

func TestReleaseIdleThenOpenContinues(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(openaitest.Text("first answer"), openaitest.Text("second answer"))
	s := h.create()
	if err := s.SetTitle(ctxT(t), "kept title"); err != nil {
		t.Fatal(err)
	}
	if out := h.run(s, "first question"); out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	usage := s.Usage()
	if usage.APICalls == 0 {
		t.Fatalf("usage not recorded: %+v", usage)
	}

	if n := releaseAll(h.eng); n != 1 {
		t.Fatalf("released %d sessions, want 1", n)
	}
	if _, live := h.eng.Live(s.ID()); live {
		t.Fatal("a released session is still live")
	}
	if !s.Released() || s.Status() != engine.StatusClosed {
		t.Fatalf("old object: released=%v status=%s", s.Released(), s.Status())
	}
	sub := s.Subscribe(s.LastSeq())
	if _, err := sub.Next(ctxT(t)); !errors.Is(err, engine.ErrJournalClosed) {
		t.Fatalf("subscribing to a released object: %v", err)
	}
	sub.Close()
	rec, err := h.st.GetSession(ctxT(t), s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !rec.EndedAt.IsZero() || rec.EndReason != "" {
		t.Fatalf("a release must not end the session: %+v", rec)
	}

	// The handle stays valid: Open of its id, while it is held, makes that same object live.
	gen, lastSeq := s.Generation(), s.LastSeq()
	s2, err := h.eng.Open(ctxT(t), s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if s2 != s || s2.Released() || s2.Status() != engine.StatusIdle {
		t.Fatalf("Open must make the held object live again: same=%v released=%v status=%s", s2 == s, s2.Released(), s2.Status())
	}
	// Its journal mirrors the stored event log: the same generation, the seqs go on.
	if s2.Generation() != gen || s2.LastSeq() < lastSeq {
		t.Fatalf("a revived session continues its stored log: generation %s (was %s), last seq %d (was %d)", s2.Generation(), gen, s2.LastSeq(), lastSeq)
	}
	if got := s2.Record(); got.Title != "kept title" || got.Model != s.Record().Model || got.Usage != usage {
		t.Fatalf("record after reload: %+v (usage before %+v)", got, usage)
	}
	if out := h.run(s2, "second question"); out.Status != engine.StatusCompleted || out.Text != "second answer" {
		t.Fatalf("outcome %+v", out)
	}
	var sent []string
	for _, m := range h.lastRequestMessages() {
		c, _ := m["content"].(string)
		sent = append(sent, c)
	}
	joined := strings.Join(sent, "|")
	if !strings.Contains(joined, "first question|first answer|second question") {
		t.Fatalf("the model must see the earlier turn: %q", joined)
	}
	if rows := mustRows(t, s2); len(rows) != 4 {
		t.Fatalf("transcript rows: %d, want 4", len(rows))
	}
}

func TestReleaseIdleSkipsSessionsInUse(t *testing.T) {
	t.Parallel()
	t.Run("subscribed", func(t *testing.T) {
		h := newHarness(t, nil)
		s := h.stored()
		sub := s.Subscribe(s.LastSeq())
		if n := releaseAll(h.eng); n != 0 {
			t.Fatalf("released a watched session (%d)", n)
		}
		sub.Close()
		if n := releaseAll(h.eng); n != 1 {
			t.Fatalf("released %d after the subscriber left, want 1", n)
		}
	})
	t.Run("recently used", func(t *testing.T) {
		h := newHarness(t, nil)
		s := h.stored()
		if n := h.eng.ReleaseIdle(time.Hour, nil); n != 0 {
			t.Fatalf("released a session used just now (%d)", n)
		}
		if _, live := h.eng.Live(s.ID()); !live {
			t.Fatal("session gone")
		}
	})
	t.Run("keep", func(t *testing.T) {
		h := newHarness(t, nil)
		s := h.stored()
		var asked []string
		n := h.eng.ReleaseIdle(0, func(c *engine.Session) bool {
			asked = append(asked, c.ID())
			return true
		})
		if n != 0 || len(asked) != 1 || asked[0] != s.ID() {
			t.Fatalf("keep: released %d, asked about %v", n, asked)
		}
		if n := h.eng.ReleaseIdle(0, func(*engine.Session) bool { return false }); n != 1 {
			t.Fatalf("released %d when keep declines, want 1", n)
		}
	})
	t.Run("turn running", func(t *testing.T) {
		h := newHarness(t, nil)
		g := openaitest.NewGate()
		h.srv.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Gate: g})
		s := h.stored()
		adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
		if err != nil {
			t.Fatal(err)
		}
		<-g.Reached()
		if n := releaseAll(h.eng); n != 0 {
			t.Fatalf("released a session with a running turn (%d)", n)
		}
		g.Release()
		if out, err := s.Wait(ctxT(t), adm.TurnID); err != nil || out.Status != engine.StatusCompleted {
			t.Fatalf("turn: %+v %v", out, err)
		}
		if n := releaseAll(h.eng); n != 1 {
			t.Fatalf("released %d after the turn, want 1", n)
		}
	})
	t.Run("approval open", func(t *testing.T) {
		h := newHarness(t, func(c *engine.Config) { c.Policy.Approver = askAll{} })
		h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo a"}`}}), openaitest.Text("ok"))
		s := h.stored()
		sub := s.Subscribe(s.LastSeq())
		adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
		if err != nil {
			t.Fatal(err)
		}
		req := next(t, sub, engine.EvRequestOpen).Data.(engine.Request)
		sub.Close() // the open request alone must pin it
		if n := releaseAll(h.eng); n != 0 {
			t.Fatalf("released a session with an open approval (%d)", n)
		}
		if err := s.Answer(req.ID, map[string]any{"choice": engine.ChoiceOnce}); err != nil {
			t.Fatal(err)
		}
		if out, err := s.Wait(ctxT(t), adm.TurnID); err != nil || out.Status != engine.StatusCompleted {
			t.Fatalf("turn: %+v %v", out, err)
		}
		if n := releaseAll(h.eng); n != 1 {
			t.Fatalf("released %d after the turn, want 1", n)
		}
	})
	t.Run("approved for the session", func(t *testing.T) {
		// "Allow for this session" lives only in the live object: releasing would forget it.
		h := newHarness(t, nil)
		h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"git push --force origin x"}`}}), openaitest.Text("ok"))
		s := h.stored()
		sub := s.Subscribe(s.LastSeq())
		adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
		if err != nil {
			t.Fatal(err)
		}
		req := next(t, sub, engine.EvRequestOpen).Data.(engine.Request)
		if err := s.Answer(req.ID, map[string]any{"choice": engine.ChoiceSession}); err != nil {
			t.Fatal(err)
		}
		s.Wait(ctxT(t), adm.TurnID)
		sub.Close()
		if n := releaseAll(h.eng); n != 0 {
			t.Fatalf("released a session holding session approvals (%d)", n)
		}
	})
	t.Run("background process", func(t *testing.T) {
		h := newHarness(t, nil)
		h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"sleep 60","background":true}`}}), openaitest.Text("started"))
		s := h.stored()
		if out := h.run(s, "start it"); out.Status != engine.StatusCompleted {
			t.Fatalf("outcome %+v", out)
		}
		procs := s.Processes().List()
		if len(procs) != 1 {
			t.Fatalf("processes: %d", len(procs))
		}
		if n := releaseAll(h.eng); n != 0 {
			t.Fatalf("released a session with a running background process (%d)", n)
		}
		if err := procs[0].Stop(); err != nil {
			t.Fatal(err)
		}
		<-procs[0].Done
		if n := releaseAll(h.eng); n != 1 {
			t.Fatalf("released %d after the process exited, want 1", n)
		}
	})
	t.Run("tool state", func(t *testing.T) {
		// State a tool cannot rebuild from the transcript is memory-only: the session stays.
		h := newHarness(t, func(c *engine.Config) { c.Tools.Add(scratchTool{}) })
		h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "scratch", Args: []string{`{}`}}), openaitest.Text("noted"))
		s := h.stored()
		if out := h.run(s, "note it"); out.Status != engine.StatusCompleted {
			t.Fatalf("outcome %+v", out)
		}
		if n := releaseAll(h.eng); n != 0 {
			t.Fatalf("released a session holding memory-only tool state (%d)", n)
		}
	})
	t.Run("steer held", func(t *testing.T) {
		h := newHarness(t, nil)
		s := h.stored()
		if _, err := s.SteerOrHold("for the next turn"); err != nil {
			t.Fatal(err)
		}
		if n := releaseAll(h.eng); n != 0 {
			t.Fatalf("released a session holding a steer (%d)", n)
		}
	})
	t.Run("lazy and never prompted", func(t *testing.T) {
		h := newHarness(t, nil)
		if _, err := h.eng.Create(ctxT(t), engine.CreateOptions{Source: "test", Lazy: true}); err != nil {
			t.Fatal(err)
		}
		if n := releaseAll(h.eng); n != 0 {
			t.Fatalf("released a session that exists only in memory (%d)", n)
		}
	})
}

// stored creates a session with a store record and no turn yet.
func (h *harness) stored() *engine.Session {
	h.t.Helper()
	s := h.create()
	if !s.Stored() {
		h.t.Fatal("created session not stored")
	}
	return s
}

// TestReleaseIdleHammer races Open+Submit against a releaser that lets go of every idle
// session as soon as it can. Every prompt runs exactly once, and a held object stays the
// session's one object: nothing is refused because of a release.
func TestReleaseIdleHammer(t *testing.T) {
	t.Parallel()
	const sessions, prompts = 4, 6
	h := newHarness(t, nil)
	for range sessions * prompts {
		h.srv.Enqueue(openaitest.Text("ok"))
	}
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = h.stored().ID()
	}
	stop := make(chan struct{})
	var releaser sync.WaitGroup
	releaser.Add(1)
	released := 0
	go func() {
		defer releaser.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			released += h.eng.ReleaseIdle(0, nil)
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for w, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- submitAll(ctxT(t), h.eng, id, w, prompts)
		}()
	}
	wg.Wait()
	close(stop)
	releaser.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d releases during the run", released)
	for w, id := range ids {
		s, err := h.eng.Open(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		var users []string
		for _, r := range mustRows(t, s) {
			if r.Role == "user" {
				users = append(users, r.Content)
			}
		}
		want := make([]string, prompts)
		for i := range want {
			want[i] = fmt.Sprintf("w%d-%d", w, i)
		}
		if strings.Join(users, ",") != strings.Join(want, ",") {
			t.Fatalf("session %s user rows %v, want %v", id, users, want)
		}
	}
}

// submitAll submits n prompts to session id in order, each through Open; every other prompt
// goes to the first object opened, which the releaser may have let go of meanwhile.
func submitAll(ctx context.Context, e *engine.Engine, id string, w, n int) error {
	first, err := e.Open(ctx, id)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	for i := 0; i < n; i++ {
		s := first
		if i%2 == 1 {
			if s, err = e.Open(ctx, id); err != nil {
				return fmt.Errorf("open: %w", err)
			}
		}
		adm, err := s.Submit(ctx, engine.Prompt{Text: fmt.Sprintf("w%d-%d", w, i)})
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		if adm.Status != engine.AdmitStarted {
			return fmt.Errorf("admission %+v", adm)
		}
		out, err := s.Wait(ctx, adm.TurnID)
		if err != nil || out.Status != engine.StatusCompleted {
			return fmt.Errorf("turn %s: %+v %v", adm.TurnID, out, err)
		}
		if s != first {
			return errors.New("Open returned another object while the first one was held")
		}
	}
	return nil
}

// scratchTool keeps a value in the session's tool state that nothing can restore.
type scratchTool struct{}

func (scratchTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "scratch", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}
func (scratchTool) Call(_ context.Context, _ tool.Call, env *tool.Env) (tool.Result, error) {
	env.State.Update("scratch", func(any) any { return 1 })
	return tool.Result{Content: "ok"}, nil
}

// TestReleaseRestoresTodoList: the todo list is rebuilt from the transcript, so a session that
// keeps one is released like any other, and after it is loaded again a merge continues the
// list it had (also what a restart needs).
func TestReleaseRestoresTodoList(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "todo", Args: []string{`{"todos":[{"id":"1","content":"plan","status":"completed"},{"id":"2","content":"build","status":"pending"}]}`}}),
		openaitest.Text("planned"),
	)
	s := h.stored()
	if out := h.run(s, "plan it"); out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	if n := releaseAll(h.eng); n != 1 {
		t.Fatalf("released %d, want the session with a todo list", n)
	}
	again, err := h.eng.Open(context.Background(), s.ID())
	if err != nil || again != s {
		t.Fatalf("reopen: %v (same object %v)", err, again == s)
	}
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "todo", Args: []string{`{"merge":true,"todos":[{"id":"2","status":"in_progress"},{"id":"3","content":"ship","status":"pending"}]}`}}),
		openaitest.Text("going"),
	)
	if out := h.run(again, "go on"); out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	rows := mustRows(t, again)
	var last string
	for _, r := range rows {
		if r.Role == "tool" && r.ToolName == "todo" {
			last = r.Content
		}
	}
	for _, want := range []string{`"id":"1","content":"plan","status":"completed"`, `"id":"2","content":"build","status":"in_progress"`, `"id":"3","content":"ship","status":"pending"`} {
		if !strings.Contains(last, want) {
			t.Fatalf("merged list after reload lacks %s: %s", want, last)
		}
	}
}

// TestWaitAfterRelease: a turn that ended and whose session was released before its Wait
// still reports its outcome through the held handle (the outcome is not lost with the
// journal).
func TestWaitAfterRelease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(openaitest.Text("done"))
	s := h.stored()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
	if err != nil || adm.Status != engine.AdmitStarted {
		t.Fatalf("submit: %+v %v", adm, err)
	}
	if err := s.WaitIdle(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := releaseAll(h.eng); n != 1 {
		t.Fatalf("released %d, want 1", n)
	}
	out, err := s.Wait(ctxT(t), adm.TurnID)
	if err != nil || out.Status != engine.StatusCompleted || out.Text != "done" {
		t.Fatalf("wait after release: %+v %v", out, err)
	}
}
