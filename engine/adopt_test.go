package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/tool"
)

// callThenText asks for the mark tool until the turn has a tool result, then answers.
type callThenText struct{}

func (callThenText) Stream(_ context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			yield(model.Chunk{Text: "done: " + last.Content, FinishReason: "stop"}, nil)
			return
		}
		yield(model.Chunk{ToolCalls: []model.ToolCallDelta{{Index: 0, ID: "call_mark", Name: "mark", Arguments: `{"n":1}`}}, FinishReason: "tool_calls"}, nil)
	}
}

// markTool counts its runs: a side effect that must happen at most once per approved call.
type markTool struct{ runs atomic.Int32 }

func (*markTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "mark", Description: "marks", Parameters: []byte(`{"type":"object"}`)}
}

func (m *markTool) Call(context.Context, tool.Call, *tool.Env) (tool.Result, error) {
	m.runs.Add(1)
	return tool.Result{Content: "marked"}, nil
}

type askEverything struct{}

func (askEverything) Approve(context.Context, policy.ApprovalInput) (policy.ApprovalDecision, error) {
	return policy.ApprovalDecision{Decision: policy.Ask, Reason: "ask"}, nil
}

// adopter agrees (or not) and hands over the adopted turn's Follow.
type adopter struct {
	agree   bool
	mu      sync.Mutex
	asked   []Takeover
	follows chan *Follow
}

func (a *adopter) Adopt(_ context.Context, tk Takeover) bool {
	a.mu.Lock()
	a.asked = append(a.asked, tk)
	a.mu.Unlock()
	return a.agree
}

func (a *adopter) Adopted(_ *Session, f *Follow) { a.follows <- f }

func adoptEngine(t *testing.T, st store.Store, mark *markTool, a *adopter) *Engine {
	t.Helper()
	e, err := New(Config{Store: st, Providers: map[string]model.Provider{"p": callThenText{}}, DefaultModel: "p:m", Cwd: t.TempDir(),
		Tools: tool.NewRegistry(mark), Policy: policy.Set{Approver: askEverything{}}, ApprovalTimeout: time.Minute,
		Leases: LeaseConfig{TTL: 300 * time.Millisecond}, Adopter: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// parkAndHang starts a turn on ea that parks at the mark tool's approval, then hangs ea's
// holder (no more renewals, as a process stopped or cut off): it returns the session, the turn
// and the open request.
func parkAndHang(t *testing.T, ctx context.Context, ea *Engine, st store.Store) (*Session, string, Request) {
	t.Helper()
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := sa.Submit(ctx, Prompt{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	q := waitEvent(t, sa, 0, func(ev Event) bool { return ev.Type == EvRequestOpen }).Data.(Request)
	// The checkpoint: the call is stored before the person is asked.
	if got := strings.Join(contents(t, st, sa.ID()), "|"); got != "user:go|assistant:" {
		t.Fatalf("rows while waiting for the approval: %q", got)
	}
	ea.lmu.Lock()
	ea.leases[sa.ID()].paused.Store(true)
	ea.lmu.Unlock()
	return sa, adm.TurnID, q
}

// takeOver has s's engine take the session's lease as soon as the hung holder's expires.
func takeOver(t *testing.T, ctx context.Context, s *Session) {
	t.Helper()
	for {
		held, err := s.Adopt(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if held {
			return
		}
		time.Sleep(50 * time.Millisecond) // polls the lease's expiry
	}
}

// TestAdoptParkedApproval: a turn waiting for an approval in a process that went away is
// adopted by the process that takes the session over: the same request is open again, the
// answer given there runs the tool exactly once and the turn completes; the old holder, back,
// writes nothing.
func TestAdoptParkedApproval(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	markA, markB := &markTool{}, &markTool{}
	ea := adoptEngine(t, st, markA, nil)
	ab := &adopter{agree: true, follows: make(chan *Follow, 1)}
	eb := adoptEngine(t, st, markB, ab)
	ctx := waitCtx(t)
	sa, turnID, q := parkAndHang(t, ctx, ea, st)

	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	since := sb.LastSeq()
	takeOver(t, ctx, sb)
	var f *Follow
	select {
	case f = <-ab.follows:
	case <-ctx.Done():
		t.Fatal("the adopted turn was not handed over")
	}
	defer f.Close()
	tk := waitEvent(t, sb, since, func(ev Event) bool { return ev.Type == EvTakeover }).Data.(Takeover)
	if !tk.Adopted || tk.TurnID != turnID || tk.Outcome != "" || tk.Owner != eb.LeaseOwner() {
		t.Fatalf("takeover %+v, want turn %s adopted", tk, turnID)
	}
	again := waitEvent(t, sb, since, func(ev Event) bool { return ev.Type == EvRequestOpen }).Data.(Request)
	if again.ID != q.ID || !again.Deadline.Equal(q.Deadline) || again.Payload["call_id"] != "call_mark" {
		t.Fatalf("request opened again %+v, want %+v", again, q)
	}
	if err := sb.Answer(q.ID, map[string]any{"choice": ChoiceOnce}); err != nil {
		t.Fatal(err)
	}
	var out *Outcome
	for {
		ev, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("following the adopted turn: %v", err)
		}
		if ev.Type == EvMessageStart {
			t.Fatal("an adopted turn starts again")
		}
		if o, ok := ev.Data.(Outcome); ok && ev.Type == EvMessageComplete {
			out = &o
			break
		}
	}
	if out.TurnID != turnID || out.Status != StatusCompleted || out.Text != "done: marked" {
		t.Fatalf("adopted turn's outcome %+v", out)
	}

	// The old holder comes back: its renewal is refused, its turn stops, no tool ran there.
	ea.lmu.Lock()
	ea.leases[sa.ID()].paused.Store(false)
	ea.lmu.Unlock()
	outA, err := sa.Wait(ctx, turnID)
	if err != nil {
		t.Fatal(err)
	}
	if outA.ExitReason != reasonLease {
		t.Fatalf("the old holder's turn: %+v, want %s", outA, reasonLease)
	}
	if markA.runs.Load() != 0 || markB.runs.Load() != 1 {
		t.Fatalf("tool runs: old holder %d, adopter %d; want 0 and 1", markA.runs.Load(), markB.runs.Load())
	}
	want := "user:go|assistant:|tool:marked|assistant:done: marked"
	if got := strings.Join(contents(t, st, sa.ID()), "|"); got != want {
		t.Fatalf("transcript %q, want %q", got, want)
	}
}

// TestAdoptRefused: without the Adopter's consent the parked turn is restart-unknown, as
// before: its request stays closed and the tool never runs.
func TestAdoptRefused(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	markA, markB := &markTool{}, &markTool{}
	ea := adoptEngine(t, st, markA, nil)
	ab := &adopter{agree: false, follows: make(chan *Follow, 1)}
	eb := adoptEngine(t, st, markB, ab)
	ctx := waitCtx(t)
	sa, turnID, q := parkAndHang(t, ctx, ea, st)
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	since := sb.LastSeq()
	takeOver(t, ctx, sb)
	tk := waitEvent(t, sb, since, func(ev Event) bool { return ev.Type == EvTakeover }).Data.(Takeover)
	if tk.Adopted || tk.Outcome != OutcomeRestartUnknown || tk.TurnID != turnID {
		t.Fatalf("takeover %+v, want restart-unknown", tk)
	}
	ab.mu.Lock()
	n := len(ab.asked)
	ab.mu.Unlock()
	if n != 1 {
		t.Fatalf("the adopter was asked %d times, want 1", n)
	}
	if err := sb.Answer(q.ID, map[string]any{"choice": ChoiceOnce}); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("answer to the request of a restart-unknown turn: %v", err)
	}
	if markA.runs.Load()+markB.runs.Load() != 0 {
		t.Fatal("a tool ran without an approval")
	}
}

// TestFollowReadsOnAfterWindowRestart: a Follow of a turn another process runs reads on when
// the journal restarts its window (this process took the session's lease over and forgot the
// events it had numbered past the stored log), instead of ending with ErrLagged.
func TestFollowReadsOnAfterWindowRestart(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	e := leaseEngine(t, st, newGated(), nil)
	ctx := waitCtx(t)
	s, err := e.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &Follow{s: s, sub: s.Subscribe(s.LastSeq()), remote: "turn_elsewhere"}
	defer f.Close()
	s.j.mu.Lock()
	s.j.log.epoch++ // what own does when it takes over a log that moved on without this journal
	s.j.wakeLocked()
	s.j.mu.Unlock()
	s.j.append(Event{Type: EvMessageDelta, TurnID: "turn_elsewhere", Text: "hi"})
	s.j.append(Event{Type: EvMessageComplete, TurnID: "turn_elsewhere", Data: Outcome{TurnID: "turn_elsewhere", Status: StatusCompleted}})
	var got []EventType
	for {
		ev, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, ev.Type)
	}
	if len(got) != 2 || got[0] != EvMessageDelta || got[1] != EvMessageComplete {
		t.Fatalf("events %v", got)
	}
}

// TestClaimCarriesTheFence: a prompt's Claim gets the lease generation its turn runs under in
// its context, so a run records it even when the stored lease has just expired (a process
// stopped for a while) and is being renewed.
func TestClaimCarriesTheFence(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	e := leaseEngine(t, st, newGated(), nil)
	ctx := waitCtx(t)
	s, err := e.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got store.SessionFence
	adm, err := s.Submit(ctx, Prompt{Text: "go", Claim: func(ctx context.Context, turnID string) error {
		got, _ = store.FenceOf(ctx)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(ctx, adm.TurnID); err != nil {
		t.Fatal(err)
	}
	l, err := st.ListLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gen uint64
	for _, x := range l {
		if x.SessionID == s.ID() {
			gen = x.Generation
		}
	}
	if got.SessionID != s.ID() || got.Generation == 0 || (gen != 0 && got.Generation != gen) {
		t.Fatalf("claim saw fence %+v, lease generation %d", got, gen)
	}
}

// flakyRows fails the next append of rows with the store unreachable, having applied it or not.
type flakyRows struct {
	store.Store
	calls   atomic.Int32
	failAt  int32 // the append that fails (1-based)
	applied bool
}

func (f *flakyRows) AppendRows(ctx context.Context, id string, fence store.Fence, rows []store.Row) ([]store.Row, error) {
	if f.calls.Add(1) == f.failAt {
		if f.applied {
			if _, err := f.Store.AppendRows(ctx, id, fence, rows); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%w: connection reset", store.ErrUnavailable)
	}
	return f.Store.AppendRows(ctx, id, fence, rows)
}

// TestCheckpointThroughAnOutage: the checkpoint before an approval survives a moment of the
// store being unreachable: the call is still asked about, and the transcript has its rows once,
// whether the failed attempt landed or not.
func TestCheckpointThroughAnOutage(t *testing.T) {
	t.Parallel()
	for _, applied := range []bool{false, true} {
		st := &flakyRows{Store: memstore.New(), applied: applied, failAt: 2} // the user row, then the checkpoint
		mark := &markTool{}
		e := adoptEngine(t, st, mark, nil)
		ctx := waitCtx(t)
		s, err := e.Create(ctx, CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		since := s.LastSeq()
		adm, err := s.Submit(ctx, Prompt{Text: "go"})
		if err != nil {
			t.Fatal(err)
		}
		q := waitEvent(t, s, since, func(ev Event) bool { return ev.Type == EvRequestOpen }).Data.(Request)
		if n := st.calls.Load(); !applied && n < 3 || applied && n != 2 {
			t.Fatalf("applied=%v: %d appends before the request", applied, n)
		}
		if err := s.Answer(q.ID, map[string]any{"choice": ChoiceOnce}); err != nil {
			t.Fatal(err)
		}
		out, err := s.Wait(ctx, adm.TurnID)
		if err != nil || out.Status != StatusCompleted || mark.runs.Load() != 1 {
			t.Fatalf("applied=%v: turn %+v %v, tool runs %d", applied, out, err, mark.runs.Load())
		}
		want := "user:go|assistant:|tool:marked|assistant:done: marked"
		if got := strings.Join(contents(t, st, s.ID()), "|"); got != want {
			t.Fatalf("applied=%v: transcript %q, want %q", applied, got, want)
		}
	}
}
