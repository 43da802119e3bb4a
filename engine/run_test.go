package engine_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
)

// drain reads f to its end and returns the events and the final error (nil at io.EOF).
func drain(t *testing.T, f *engine.Follow) ([]engine.Event, error) {
	t.Helper()
	var evs []engine.Event
	for ev, err := range f.Events(ctxT(t)) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// outcomeOf is the outcome carried by the last event, which must be a message.complete.
func outcomeOf(t *testing.T, evs []engine.Event) engine.Outcome {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	last := evs[len(evs)-1]
	out, ok := last.Data.(engine.Outcome)
	if last.Type != engine.EvMessageComplete || !ok {
		t.Fatalf("last event is %s %T, not the outcome", last.Type, last.Data)
	}
	return out
}

// TestRunFollowsItsTurn: the events Run yields are exactly the journal's events of the turn
// (and the turn-less ones) from its start to its outcome, none lost, none repeated, in order.
func TestRunFollowsItsTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: args(map[string]any{"command": "echo hi"})}),
		openaitest.Text("all ", "done"),
	)
	s := h.create()
	before := s.LastSeq()
	adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "go"})
	if err != nil || adm.Status != engine.AdmitStarted || f.TurnID() != adm.TurnID {
		t.Fatalf("run: %+v %v", adm, err)
	}
	defer f.Close()
	evs, err := drain(t, f)
	if err != nil {
		t.Fatal(err)
	}
	out := outcomeOf(t, evs)
	if out.Status != engine.StatusCompleted || out.Text != "all done" || out.TurnID != adm.TurnID {
		t.Fatalf("outcome %+v", out)
	}
	if got, ok := f.Outcome(); !ok || got.TurnID != adm.TurnID || !f.Done() {
		t.Fatalf("Outcome() %+v %v, done %v", got, ok, f.Done())
	}
	if _, err := f.Next(ctxT(t)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the outcome: %v", err)
	}
	var want []engine.Event
	for _, ev := range mustEvents(t, s) {
		if ev.Seq <= before {
			continue
		}
		if ev.Seq > evs[len(evs)-1].Seq {
			break
		}
		if ev.TurnID == adm.TurnID || ev.TurnID == "" {
			want = append(want, ev)
		}
	}
	if len(evs) != len(want) {
		for _, e := range want {
			t.Logf("journal %d %s %q", e.Seq, e.Type, e.TurnID)
		}
		for _, e := range evs {
			t.Logf("follow %d %s %q", e.Seq, e.Type, e.TurnID)
		}
		t.Fatalf("got %d events, the journal has %d for the turn", len(evs), len(want))
	}
	var types []engine.EventType
	for i := range evs {
		if evs[i].Seq != want[i].Seq || evs[i].Type != want[i].Type {
			t.Fatalf("event %d: got seq %d %s, want seq %d %s", i, evs[i].Seq, evs[i].Type, want[i].Seq, want[i].Type)
		}
		types = append(types, evs[i].Type)
	}
	for _, must := range []engine.EventType{engine.EvMessageStart, engine.EvToolStart, engine.EvToolComplete, engine.EvMessageDelta} {
		found := false
		for _, ty := range types {
			found = found || ty == must
		}
		if !found {
			t.Fatalf("no %s among %v", must, types)
		}
	}
}

func TestRunBusyRejectedAndSteered(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{policy.Reject, policy.Steer} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := busyHarness(t, mode)
			g := openaitest.NewGate()
			h.srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g})
			s := h.create()
			_, first, err := s.Run(ctxT(t), engine.Prompt{Text: "a"})
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			<-g.Reached()
			adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "b"})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{policy.Reject: engine.AdmitRejected, policy.Steer: engine.AdmitSteered}[mode]
			if adm.Status != want || adm.TurnID != "" {
				t.Fatalf("admission %+v, want %s", adm, want)
			}
			if !f.Done() {
				t.Fatal("a prompt without a turn of its own has nothing to follow")
			}
			if _, err := f.Next(ctxT(t)); !errors.Is(err, io.EOF) {
				t.Fatalf("next: %v", err)
			}
			g.Release()
			evs, err := drain(t, first)
			if err != nil {
				t.Fatal(err)
			}
			if out := outcomeOf(t, evs); out.Status != engine.StatusCompleted {
				t.Fatalf("first turn: %+v", out)
			}
		})
	}
}

// TestRunQueuedFollowsItsTurn: a queued prompt's Follow skips the running turn and yields the
// turn the queue starts with it; an interrupting admission follows that turn too.
func TestRunQueuedFollowsItsTurn(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{policy.Queue, policy.Interrupt} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := busyHarness(t, mode)
			g := openaitest.NewGate()
			h.srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g}, openaitest.Text("second"))
			s := h.create()
			a1, first, err := s.Run(ctxT(t), engine.Prompt{Text: "a"})
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			<-g.Reached()
			adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "b"})
			if err != nil || adm.Status != engine.AdmitQueued || adm.Interrupted != (mode == policy.Interrupt) {
				t.Fatalf("admission %+v %v", adm, err)
			}
			defer f.Close()
			if f.TurnID() != "" {
				t.Fatalf("a queued prompt has no turn yet: %q", f.TurnID())
			}
			g.Release()
			evs, err := drain(t, f)
			if err != nil {
				t.Fatal(err)
			}
			start, ok := evs[0].Data.(engine.TurnStart)
			if evs[0].Type != engine.EvMessageStart || !ok || start.Prompt != "b" {
				t.Fatalf("first event %s %+v, want the follow-up's message.start", evs[0].Type, evs[0].Data)
			}
			out := outcomeOf(t, evs)
			if out.TurnID == a1.TurnID || out.Text != "second" || f.TurnID() != out.TurnID {
				t.Fatalf("outcome %+v (first turn %s)", out, a1.TurnID)
			}
			for _, ev := range evs {
				if ev.TurnID == a1.TurnID {
					t.Fatalf("an event of the running turn was yielded: %s", ev.Type)
				}
			}
			fevs, err := drain(t, first)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus := map[string]string{policy.Queue: engine.StatusCompleted, policy.Interrupt: engine.StatusCancelled}[mode]
			if o := outcomeOf(t, fevs); o.Status != wantStatus || o.TurnID != a1.TurnID {
				t.Fatalf("first outcome %+v, want %s", o, wantStatus)
			}
		})
	}
}

func TestRunQueuedThenDropped(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, policy.Queue)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g})
	s := h.create()
	_, first, err := s.Run(ctxT(t), engine.Prompt{Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	<-g.Reached()
	adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "b"})
	if err != nil || adm.Status != engine.AdmitQueued {
		t.Fatalf("admission %+v %v", adm, err)
	}
	defer f.Close()
	s.Interrupt("user") // drops the queue
	g.Release()
	if evs, err := drain(t, f); !errors.Is(err, engine.ErrQueueDropped) || len(evs) != 0 {
		t.Fatalf("dropped prompt: %d events, %v", len(evs), err)
	}
	evs, err := drain(t, first)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(t, evs); o.Status != engine.StatusCancelled {
		t.Fatalf("first outcome %+v", o)
	}
}

// TestRunFollowQueueChains: with FollowQueue, the Follow goes on into the turn the queue
// starts after its own, and ends with that turn's outcome.
func TestRunFollowQueueChains(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, policy.Queue)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g}, openaitest.Text("second"))
	s := h.create()
	adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "a", FollowQueue: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	<-g.Reached()
	if a2, err := s.Submit(ctxT(t), engine.Prompt{Text: "b"}); err != nil || a2.Status != engine.AdmitQueued {
		t.Fatalf("queue: %+v %v", a2, err)
	}
	g.Release()
	var outs []engine.Outcome
	var starts []string
	for ev, err := range f.Events(ctxT(t)) {
		if err != nil {
			t.Fatal(err)
		}
		switch d := ev.Data.(type) {
		case engine.Outcome:
			outs = append(outs, d)
		case engine.TurnStart:
			starts = append(starts, d.Prompt)
		}
	}
	if len(outs) != 2 || outs[0].TurnID != adm.TurnID || outs[1].Text != "second" || len(starts) != 2 || starts[1] != "b" {
		t.Fatalf("outcomes %+v, starts %v", outs, starts)
	}
}

// TestRunClientGoesAway: a cancelled ctx ends Next, not the turn; Follow.Interrupt stops the
// turn, and the Follow still reads its outcome.
func TestRunClientGoesAway(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"slow"}, FaultAt: 1, Gate: g})
	defer g.Release()
	s := h.create()
	_, f, err := s.Run(ctxT(t), engine.Prompt{Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	<-g.Reached()
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	for { // what was read already comes first, then the context's error
		ev, err := f.Next(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("next on a cancelled context: %v", err)
			}
			break
		}
		if ev.Type == engine.EvMessageComplete {
			t.Fatal("the turn ended on its own")
		}
	}
	if st := s.Status(); st != engine.StatusWorking {
		t.Fatalf("a reader going away must not stop the turn: %s", st)
	}
	if !f.Interrupt("the client went away") {
		t.Fatal("Interrupt did not find the running turn")
	}
	evs, err := drain(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(t, evs); o.Status != engine.StatusCancelled || !strings.Contains(o.ExitReason, "(the client went away)") {
		t.Fatalf("outcome %+v", o)
	}
	if f.Interrupt("again") {
		t.Fatal("Interrupt after the outcome must do nothing")
	}
}

// TestRunInterruptOnlyItsTurn: a Follow's Interrupt leaves another turn alone.
func TestRunInterruptOnlyItsTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Text("one"), openaitest.Response{Text: []string{"two"}, FaultAt: 1, Gate: g})
	s := h.create()
	_, f, err := s.Run(ctxT(t), engine.Prompt{Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := drain(t, f)
	if err != nil || outcomeOf(t, evs).Status != engine.StatusCompleted {
		t.Fatalf("first: %v", err)
	}
	a2, f2, err := s.Run(ctxT(t), engine.Prompt{Text: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	<-g.Reached()
	if f.Interrupt("stale") {
		t.Fatal("the first Follow interrupted the second turn")
	}
	g.Release()
	evs, err = drain(t, f2)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(t, evs); o.Status != engine.StatusCompleted || o.TurnID != a2.TurnID {
		t.Fatalf("second: %+v", o)
	}
}

// TestRunSessionClosedMidTurn: closing the session ends the turn cancelled; the Follow reads
// that outcome last, and a Run on the closed session is refused.
func TestRunSessionClosedMidTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"slow"}, FaultAt: 1, Gate: g})
	defer g.Release()
	s := h.create()
	_, f, err := s.Run(ctxT(t), engine.Prompt{Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	<-g.Reached()
	closed := make(chan error, 1)
	go func() { closed <- s.Close(ctxT(t), "bye") }()
	evs, err := drain(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(t, evs); o.Status != engine.StatusCancelled {
		t.Fatalf("outcome %+v", o)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Run(ctxT(t), engine.Prompt{Text: "b"}); !errors.Is(err, engine.ErrSessionClosed) {
		t.Fatalf("run on a closed session: %v", err)
	}
}

// TestRunSessionClosedWhileQueued: a queued prompt whose session closes before its turn ends
// with ErrSessionClosed, not a hang.
func TestRunSessionClosedWhileQueued(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, policy.Queue)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"slow"}, FaultAt: 1, Gate: g})
	defer g.Release()
	s := h.create()
	_, first, err := s.Run(ctxT(t), engine.Prompt{Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	<-g.Reached()
	// Close interrupts the turn, which drops the queue: either way the Follow ends.
	adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "b"})
	if err != nil || adm.Status != engine.AdmitQueued {
		t.Fatalf("admission %+v %v", adm, err)
	}
	defer f.Close()
	if err := s.Close(ctxT(t), "bye"); err != nil {
		t.Fatal(err)
	}
	if _, err := drain(t, f); !errors.Is(err, engine.ErrQueueDropped) && !errors.Is(err, engine.ErrSessionClosed) {
		t.Fatalf("queued prompt on a closed session: %v", err)
	}
}

// TestRunOnReleasedHandle: a handle the engine released while idle runs a prompt as it is;
// Open of the id returns that same object.
func TestRunOnReleasedHandle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(openaitest.Text("one"), openaitest.Text("two"))
	s := h.create()
	if out := h.run(s, "first"); out.Status != engine.StatusCompleted {
		t.Fatalf("first: %+v", out)
	}
	if n := releaseAll(h.eng); n != 1 || !s.Released() {
		t.Fatalf("released %d", n)
	}
	adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "second"})
	if err != nil || adm.Status != engine.AdmitStarted {
		t.Fatalf("run on a released handle: %+v %v", adm, err)
	}
	defer f.Close()
	evs, err := drain(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(t, evs); o.Text != "two" {
		t.Fatalf("outcome %+v", o)
	}
	if evs[0].Seq != 1 && evs[0].Type != engine.EvStatus {
		t.Fatalf("the revived journal restarts: first event seq %d %s", evs[0].Seq, evs[0].Type)
	}
	if live, ok := h.eng.Live(s.ID()); !ok || live != s {
		t.Fatal("the revived handle is not the live object")
	}
	if s2, err := h.eng.Open(ctxT(t), s.ID()); err != nil || s2 != s {
		t.Fatalf("Open: same=%v %v", s2 == s, err)
	}
	var users []string
	for _, r := range mustRows(t, s) {
		if r.Role == "user" {
			users = append(users, r.Content)
		}
	}
	if len(users) != 2 || users[0] != "first" || users[1] != "second" {
		t.Fatalf("user rows %v", users)
	}
}

// TestRunSubmitErrorsAdmitNothing: an error is Submit's, and there is no Follow.
func TestRunSubmitErrorsAdmitNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.create()
	if _, f, err := s.Run(ctxT(t), engine.Prompt{Text: "  "}); !errors.Is(err, engine.ErrEmptyPrompt) || f != nil {
		t.Fatalf("empty prompt: %v %v", f, err)
	}
	adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "/model"})
	if err != nil || adm.Status != engine.AdmitCommand || !f.Done() {
		t.Fatalf("command: %+v %v", adm, err)
	}
	f.Close()
}

// TestRunNextBatchStopsAtEachOutcome: NextBatch hands out what is available, one turn per
// batch, and the batches together are what Next would yield.
func TestRunNextBatchStopsAtEachOutcome(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, policy.Queue)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"a", "b", "c"}, FaultAt: 2, Gate: g}, openaitest.Text("d", "e"))
	s := h.create()
	_, f, err := s.Run(ctxT(t), engine.Prompt{Text: "one", FollowQueue: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	<-g.Reached()
	if adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "two"}); err != nil || adm.Status != engine.AdmitQueued {
		t.Fatalf("queue: %+v %v", adm, err)
	}
	g.Release()
	var all []engine.Event
	outcomes := 0
	for outcomes < 2 {
		batch, err := f.NextBatch(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		turn := ""
		for i, ev := range batch {
			if ev.TurnID != "" && turn != "" && ev.TurnID != turn {
				t.Fatalf("batch mixes turns %s and %s", turn, ev.TurnID)
			}
			if ev.TurnID != "" {
				turn = ev.TurnID
			}
			if ev.Type == engine.EvMessageComplete {
				outcomes++
				if i != len(batch)-1 {
					t.Fatal("an outcome is not last in its batch")
				}
			}
		}
		all = append(all, batch...)
	}
	if _, err := f.NextBatch(ctxT(t), nil); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last outcome: %v", err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatalf("events out of order or repeated: seq %d after %d", all[i].Seq, all[i-1].Seq)
		}
	}
}

// TestRunInLine: a prompt admitted in line waits behind the running turn and the busy
// policy's follow-up, is not dropped by an interrupt, and starts when they are done.
func TestRunInLine(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, policy.Queue)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g}, openaitest.Text("in line"))
	s := h.create()
	_, first, err := s.Run(ctxT(t), engine.Prompt{Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	<-g.Reached()
	type result struct {
		adm engine.Admission
		f   *engine.Follow
		err error
	}
	got := make(chan result, 1)
	go func() {
		adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "b", InLine: true})
		got <- result{adm, f, err}
	}()
	waitInLine(t, s, 1)
	// A second prompt in line that gives up before its turn comes never runs.
	gaveUp := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctxT(t))
	go func() {
		_, _, err := s.Run(ctx, engine.Prompt{Text: "never", InLine: true})
		gaveUp <- err
	}()
	waitInLine(t, s, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a prompt that left the line: %v", err)
	}
	s.Interrupt("user") // cancels the first turn; the prompt in line stays
	g.Release()
	r := <-got
	if r.err != nil || r.adm.Status != engine.AdmitStarted {
		t.Fatalf("in line: %+v %v", r.adm, r.err)
	}
	defer r.f.Close()
	evs, err := drain(t, r.f)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(t, evs); o.Text != "in line" || o.TurnID != r.adm.TurnID {
		t.Fatalf("outcome %+v", o)
	}
	if evs[0].Type != engine.EvMessageStart {
		t.Fatalf("the follow of a prompt in line starts with its turn, not %s", evs[0].Type)
	}
	fevs, err := drain(t, first)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(t, fevs); o.Status != engine.StatusCancelled {
		t.Fatalf("first: %+v", o)
	}
	var users []string
	for _, row := range mustRows(t, s) {
		if row.Role == "user" {
			users = append(users, row.Content)
		}
	}
	if strings.Join(users, ",") != "a,b" {
		t.Fatalf("user rows %v", users)
	}
}

// TestRunInLineAfterFollowUp: the busy policy's follow-up runs before the prompts in line.
func TestRunInLineAfterFollowUp(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, policy.Queue)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g}, openaitest.Text("follow-up"), openaitest.Text("in line"))
	s := h.create()
	if _, err := s.Submit(ctxT(t), engine.Prompt{Text: "a"}); err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	got := make(chan error, 1)
	var f *engine.Follow
	go func() {
		var err error
		_, f, err = s.Run(ctxT(t), engine.Prompt{Text: "c", InLine: true})
		got <- err
	}()
	waitInLine(t, s, 1)
	if adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "b"}); err != nil || adm.Status != engine.AdmitQueued {
		t.Fatalf("follow-up: %+v %v", adm, err)
	}
	g.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := drain(t, f); err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, row := range mustRows(t, s) {
		if row.Role == "user" {
			users = append(users, row.Content)
		}
	}
	if strings.Join(users, ",") != "a,b,c" {
		t.Fatalf("user rows %v", users)
	}
}

// TestRunClaim: a durable admission's Claim is called once its turn comes (not while another
// turn runs), with that turn's id and before its user row is written; a Claim that refuses
// gives the turn back unstarted and the next prompt in line goes on.
func TestRunClaim(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, policy.Queue)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g}, openaitest.Text("claimed"))
	s := h.create()
	if _, err := s.Submit(ctxT(t), engine.Prompt{Text: "a"}); err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	refused := errors.New("not queued any more")
	type claim struct {
		turnID string
		users  int
	}
	claims := make(chan claim, 2)
	users := func() int {
		n := 0
		for _, row := range mustRows(t, s) {
			if row.Role == "user" {
				n++
			}
		}
		return n
	}
	type result struct {
		adm engine.Admission
		f   *engine.Follow
		err error
	}
	gotB, gotC := make(chan result, 1), make(chan result, 1)
	go func() {
		adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "b", Claim: func(_ context.Context, turnID string) error {
			claims <- claim{turnID, users()}
			return refused
		}})
		gotB <- result{adm, f, err}
	}()
	waitInLine(t, s, 1)
	go func() {
		adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "c", Claim: func(_ context.Context, turnID string) error {
			claims <- claim{turnID, users()}
			return nil
		}})
		gotC <- result{adm, f, err}
	}()
	waitInLine(t, s, 2)
	select {
	case c := <-claims:
		t.Fatalf("claimed while another turn runs: %+v", c)
	default:
	}
	g.Release()
	if r := <-gotB; !errors.Is(r.err, refused) {
		t.Fatalf("a refused claim: %+v %v", r.adm, r.err)
	}
	if c := <-claims; c.turnID == "" || c.users != 1 {
		t.Fatalf("first claim %+v", c)
	}
	r := <-gotC
	if r.err != nil || r.adm.Status != engine.AdmitStarted {
		t.Fatalf("claimed: %+v %v", r.adm, r.err)
	}
	defer r.f.Close()
	if c := <-claims; c.turnID != r.adm.TurnID || c.users != 1 {
		t.Fatalf("second claim %+v, turn %s", c, r.adm.TurnID)
	}
	evs, err := drain(t, r.f)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(t, evs); o.Text != "claimed" {
		t.Fatalf("outcome %+v", o)
	}
	var texts []string
	for _, row := range mustRows(t, s) {
		if row.Role == "user" {
			texts = append(texts, row.Content)
		}
	}
	if strings.Join(texts, ",") != "a,c" {
		t.Fatalf("user rows %v", texts)
	}
}

// TestRunInLineRefusedOnClose: closing the session refuses the prompts in line.
func TestRunInLineRefusedOnClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"slow"}, FaultAt: 1, Gate: g})
	defer g.Release()
	s := h.create()
	if _, err := s.Submit(ctxT(t), engine.Prompt{Text: "a"}); err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	got := make(chan error, 1)
	go func() {
		_, _, err := s.Run(ctxT(t), engine.Prompt{Text: "b", InLine: true})
		got <- err
	}()
	waitInLine(t, s, 1)
	if err := s.Close(ctxT(t), "bye"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, engine.ErrSessionClosed) {
		t.Fatalf("a prompt in line on a closed session: %v", err)
	}
}

// waitInLine polls until n prompts wait in the session's line.
func waitInLine(t *testing.T, s *engine.Session, n int) {
	t.Helper()
	ctx := ctxT(t)
	for s.Snapshot().InLine != n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d prompts in line, want %d", s.Snapshot().InLine, n)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestRunLaggedReaderGetsTheOutcome: a reader that fell out of the journal window reads the
// events in between back from the session's stored event log, and ends with the turn's outcome.
func TestRunLaggedReaderGetsTheOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	deltas := make([]string, 64)
	for i := range deltas {
		deltas[i] = "x"
	}
	h.srv.Enqueue(openaitest.Text(deltas...))
	s := h.create()
	engine.SetJournalWindow(s, 8)
	adm, f, err := s.Run(ctxT(t), engine.Prompt{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := s.Wait(ctxT(t), adm.TurnID); err != nil {
		t.Fatal(err)
	}
	evs, err := drain(t, f)
	if err != nil {
		t.Fatal(err)
	}
	deltas = deltas[:0]
	for _, e := range evs {
		if e.Type == engine.EvMessageDelta {
			deltas = append(deltas, e.Text)
		}
	}
	if len(deltas) != 64 {
		t.Fatalf("a reader out of the window got %d of the 64 deltas back from the store", len(deltas))
	}
	if o := outcomeOf(t, evs); o.TurnID != adm.TurnID || o.Text != strings.Repeat("x", 64) {
		t.Fatalf("outcome %+v", o)
	}
}
