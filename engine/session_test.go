package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/tool"
)

func busyHarness(t *testing.T, mode string) *harness {
	return newHarness(t, func(c *engine.Config) { c.Policy.Busy = policy.Defaults{BusyMode: mode} })
}

func TestBusyInterrupt(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, "interrupt")
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"slow"}, FaultAt: 1, Gate: g}, openaitest.Text("second answer"))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	first, _ := s.Submit(ctxT(t), engine.Prompt{Text: "first"})
	<-g.Reached()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "second"})
	if err != nil || adm.Status != engine.AdmitQueued || !adm.Interrupted {
		t.Fatalf("busy submit: %+v %v", adm, err)
	}
	out, _ := s.Wait(ctxT(t), first.TurnID)
	g.Release()
	if out.Status != engine.StatusCancelled {
		t.Fatalf("first: %+v", out)
	}
	next(t, sub, engine.EvMessageComplete)
	start := next(t, sub, engine.EvMessageStart).Data.(engine.TurnStart)
	if start.Prompt != "second" {
		t.Fatalf("drained prompt: %+v", start)
	}
	if out := next(t, sub, engine.EvMessageComplete).Data.(engine.Outcome); out.Text != "second answer" {
		t.Fatalf("second: %+v", out)
	}
}

func TestBusyQueueMerges(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, "queue")
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"one"}, FaultAt: 1, Gate: g}, openaitest.Text("two"))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	s.Submit(ctxT(t), engine.Prompt{Text: "a"})
	<-g.Reached()
	for i, p := range []string{"b", "c"} {
		if adm, err := s.Submit(ctxT(t), engine.Prompt{Text: p}); err != nil || adm.Status != engine.AdmitQueued || adm.Interrupted || adm.QueuedCount != i+1 {
			t.Fatalf("queue %s: %+v %v", p, adm, err)
		}
	}
	if q := s.Queued(); q != "b\n\nc" {
		t.Fatalf("merged slot: %q", q)
	}
	if snap := s.Snapshot(); snap.Queued != "b\n\nc" || snap.Inflight == nil || snap.Inflight.Prompt != "a" {
		t.Fatalf("snapshot: %+v", snap)
	}
	g.Release()
	if out := next(t, sub, engine.EvMessageComplete).Data.(engine.Outcome); out.Status != engine.StatusCompleted || out.Text != "one" {
		t.Fatalf("first: %+v", out)
	}
	if st := next(t, sub, engine.EvMessageStart).Data.(engine.TurnStart); st.Prompt != "b\n\nc" {
		t.Fatalf("drained: %+v", st)
	}
	next(t, sub, engine.EvMessageComplete)
	if err := s.WaitIdle(ctxT(t)); err != nil || s.Queued() != "" {
		t.Fatal("queue not drained")
	}
}

func TestBusySteerAndInterruptDropsQueue(t *testing.T) {
	t.Parallel()
	h := busyHarness(t, "steer")
	g := openaitest.NewGate()
	h.srv.Enqueue(
		openaitest.Response{Calls: []openaitest.Call{{Name: "terminal", Args: []string{`{"command":"echo hi"}`}}}, FaultAt: 1, Gate: g},
		openaitest.Text("done"),
	)
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	first, _ := s.Submit(ctxT(t), engine.Prompt{Text: "a"})
	<-g.Reached()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "use printf"})
	if err != nil || adm.Status != engine.AdmitSteered || adm.SteerID == "" {
		t.Fatalf("steer mode: %+v %v", adm, err)
	}
	// A client-side queue drain is never steered.
	if adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "later", Queued: true}); adm.Status != engine.AdmitQueued {
		t.Fatalf("queued:true: %+v", adm)
	}
	// A truncating submit is never absorbed by the busy policy.
	one := 0
	if _, err := s.Submit(ctxT(t), engine.Prompt{Text: "x", Truncate: &engine.Truncate{BeforeUserOrdinal: &one, Confirm: true}}); !errors.Is(err, engine.ErrBusy) {
		t.Fatalf("truncating submit while busy: %v", err)
	}
	g.Release()
	sd := next(t, sub, engine.EvSteerDelivered).Data.(engine.SteerDelivered)
	if len(sd.IDs) != 1 || sd.IDs[0] != adm.SteerID || sd.Text != "use printf" {
		t.Fatalf("delivered: %+v", sd)
	}
	s.Interrupt("") // drops the queued "later"
	out, _ := s.Wait(ctxT(t), first.TurnID)
	if s.Queued() != "" || out.Status != engine.StatusCancelled {
		t.Fatalf("interrupt must cancel the turn and discard the queued prompt: %+v", out)
	}
}

func TestBusyPolicyFailureFallsBackToDefault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.Policy.Busy = failingBusy{} })
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"x"}, FaultAt: 1, Gate: g}, openaitest.Text("y"))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	s.Submit(ctxT(t), engine.Prompt{Text: "a"})
	<-g.Reached()
	adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "b"})
	g.Release()
	if adm.Status != engine.AdmitQueued || !adm.Interrupted {
		t.Fatalf("fallback must be interrupt: %+v", adm)
	}
	pd := next(t, sub, engine.EvPolicyDecision).Data.(engine.PolicyDecision)
	if pd.Hook != "busy_input" || pd.Error == "" || pd.Decision != "interrupt" {
		t.Fatalf("audit: %+v", pd)
	}
}

type failingBusy struct{}

func (failingBusy) BusyInput(context.Context, policy.BusyInput) (policy.BusyDecision, error) {
	return policy.BusyDecision{}, errors.New("script exploded")
}

type askAll struct{}

func (askAll) Approve(context.Context, policy.ApprovalInput) (policy.ApprovalDecision, error) {
	return policy.ApprovalDecision{Decision: policy.Ask, Reason: "ask everything"}, nil
}

type failingApprover struct{}

func (failingApprover) Approve(context.Context, policy.ApprovalInput) (policy.ApprovalDecision, error) {
	return policy.ApprovalDecision{}, errors.New("hook timed out")
}

func TestApprovalTimeoutDenies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.ApprovalTimeout = 50 * time.Millisecond })
	h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"git reset --hard"}`}}), openaitest.Text("ok"))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	h.run(s, "go")
	rc := next(t, sub, engine.EvRequestCancel).Data.(engine.RequestCancel)
	if rc.Reason != "timeout" || rc.Kind != "approval" {
		t.Fatalf("cancel: %+v", rc)
	}
	tc := next(t, sub, engine.EvToolComplete).Data.(engine.ToolComplete)
	if !tc.Blocked || !strings.Contains(tc.Result.Content, "Silence is not consent") {
		t.Fatalf("timeout must deny: %+v", tc)
	}
}

func TestApprovalWithdrawAndAnswers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.Policy.Approver = askAll{} })
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo a"}`}}),
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo b"}`}}),
		openaitest.Text("ok"),
	)
	s := h.create()
	subA, subB := s.Subscribe(0), s.Subscribe(0)
	defer subA.Close()
	defer subB.Close()
	adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
	reqA := next(t, subA, engine.EvRequestOpen).Data.(engine.Request)
	reqB := next(t, subB, engine.EvRequestOpen).Data.(engine.Request)
	if reqA.ID != reqB.ID || len(s.Snapshot().OpenRequests) != 1 || s.Status() != engine.StatusWaiting {
		t.Fatalf("both subscribers see one open request: %v %v", reqA, reqB)
	}
	if err := s.Answer(reqA.ID, map[string]any{"choice": "maybe"}); !errors.Is(err, engine.ErrInvalidAnswer) {
		t.Fatalf("invalid choice: %v", err)
	}
	if err := s.Answer("req_nope", map[string]any{"choice": "once"}); !errors.Is(err, engine.ErrUnknownRequest) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := s.Withdraw(reqA.ID, "client cannot answer approvals"); err != nil {
		t.Fatal(err)
	}
	tc := next(t, subA, engine.EvToolComplete).Data.(engine.ToolComplete)
	if !tc.Blocked || !strings.Contains(tc.Result.Content, "client cannot answer approvals") {
		t.Fatalf("withdraw must deny: %+v", tc)
	}
	req2 := next(t, subA, engine.EvRequestOpen).Data.(engine.Request)
	if err := s.Answer(req2.ID, map[string]any{"choice": "once"}); err != nil { // answered via the other subscriber's view
		t.Fatal(err)
	}
	if err := s.Answer(req2.ID, map[string]any{"choice": "deny"}); !errors.Is(err, engine.ErrUnknownRequest) {
		t.Fatalf("second answer must lose: %v", err)
	}
	tc = next(t, subB, engine.EvToolComplete).Data.(engine.ToolComplete)
	tc = next(t, subB, engine.EvToolComplete).Data.(engine.ToolComplete)
	if tc.Blocked || !strings.Contains(tc.Result.Content, "b") {
		t.Fatalf("approved call: %+v", tc)
	}
	if out, _ := s.Wait(ctxT(t), adm.TurnID); out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
}

func TestApprovalSessionAndHookFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	call := openaitest.Call{Name: "terminal", Args: []string{`{"command":"git push --force origin x"}`}}
	h.srv.Enqueue(openaitest.ToolCalls(call), openaitest.ToolCalls(call), openaitest.Text("ok"))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
	req := next(t, sub, engine.EvRequestOpen).Data.(engine.Request)
	s.Answer(req.ID, map[string]any{"choice": "session"})
	s.Wait(ctxT(t), adm.TurnID)
	n := 0
	for ev, _ := range s.Events(ctxT(t), 0) {
		if ev.Type == engine.EvRequestOpen {
			n++
		}
		if ev.Type == engine.EvMessageComplete {
			break
		}
	}
	if n != 1 {
		t.Fatalf("a session approval must cover the second call; asked %d times", n)
	}

	h2 := newHarness(t, func(c *engine.Config) { c.Policy.Approver = failingApprover{} })
	h2.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo safe"}`}}), openaitest.Text("ok"))
	s2 := h2.create()
	sub2 := s2.Subscribe(0)
	defer sub2.Close()
	h2.run(s2, "go")
	if tc := next(t, sub2, engine.EvToolComplete).Data.(engine.ToolComplete); !tc.Blocked {
		t.Fatalf("a failed approval hook must deny: %+v", tc)
	}
}

func TestRewind(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.create()
	for i, a := range []string{"A1", "A2", "A3"} {
		h.srv.Enqueue(openaitest.Text(a))
		h.run(s, "Q"+string(rune('1'+i)))
	}
	rows := mustRows(t, s)
	var users []uint64
	for _, r := range rows {
		if r.Role == "user" {
			users = append(users, r.ID)
		}
	}
	ord := func(i int) *int { return &i }
	cases := []struct {
		tr   engine.Truncate
		want error
	}{
		{engine.Truncate{Confirm: true}, engine.ErrTruncateNoTarget},
		{engine.Truncate{BeforeRowID: users[1]}, engine.ErrTruncateConsent},
		{engine.Truncate{BeforeRowID: 999999, Confirm: true}, engine.ErrTruncateStale},
		{engine.Truncate{BeforeRowID: rows[1].ID, Confirm: true}, engine.ErrTruncateStale}, // an assistant row
		{engine.Truncate{BeforeRowID: users[1], BeforeUserOrdinal: ord(2), Confirm: true}, engine.ErrTruncateMismatch},
		{engine.Truncate{BeforeUserOrdinal: ord(1), Confirm: true}, engine.ErrTruncateOrdinal},
		{engine.Truncate{BeforeUserOrdinal: ord(7), Confirm: true}, engine.ErrTruncateStale},
		{engine.Truncate{BeforeRowID: users[0], Confirm: true}, engine.ErrTruncateEmpty},
	}
	for _, c := range cases {
		tr := c.tr
		if _, err := s.Submit(ctxT(t), engine.Prompt{Text: "edit", Truncate: &tr}); !errors.Is(err, c.want) {
			t.Fatalf("%+v: got %v want %v", c.tr, err, c.want)
		}
	}
	if after := mustRows(t, s); len(after) != len(rows) || after[0].ID != rows[0].ID {
		t.Fatal("a refused rewind wrote something")
	}
	h.srv.Enqueue(openaitest.Text("A2'"))
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "Q2 edited", Truncate: &engine.Truncate{BeforeRowID: users[1], BeforeUserOrdinal: ord(1), Confirm: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(adm.Survivors) != 1 || adm.Survivors[0] == users[0] || adm.UserRowID == 0 {
		t.Fatalf("survivors must have fresh ids: %+v (old %v)", adm, users)
	}
	s.Wait(ctxT(t), adm.TurnID)
	var got []string
	for _, r := range mustRows(t, s) {
		got = append(got, r.Content)
	}
	if strings.Join(got, "|") != "Q1|A1|Q2 edited|A2'" {
		t.Fatalf("after rewind: %v", got)
	}
	all, _ := s.History(ctxT(t), store.RowQuery{IncludeArchived: true})
	archived := 0
	for _, r := range all {
		if !r.Active {
			archived++
		}
	}
	if archived < 4 {
		t.Fatalf("dropped rows must be archived, not deleted: %d archived", archived)
	}
	// Regenerate from the very first turn needs the empty-truncate consent.
	h.srv.Enqueue(openaitest.Text("fresh"))
	adm, err = s.Submit(ctxT(t), engine.Prompt{Text: "start over", Truncate: &engine.Truncate{BeforeRowID: adm.Survivors[0], Confirm: true, ConfirmEmpty: true}})
	if err != nil || len(adm.Survivors) != 0 {
		t.Fatalf("empty truncate: %+v %v", adm, err)
	}
	s.Wait(ctxT(t), adm.TurnID)
}

func TestSessionsBranchTitleListClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	s := h.create()
	if err := s.SetTitle(ctx, "Refactor"); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(openaitest.Text("one"), openaitest.Text("two"))
	h.run(s, "first")
	h.run(s, "second")
	rows := mustRows(t, s)
	b, err := h.eng.Branch(ctx, s.ID(), engine.BranchOptions{UptoRowID: rows[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	br := b.Record()
	if br.ParentID != s.ID() || br.ParentKind != "branch" || br.Title != "Refactor #2" {
		t.Fatalf("branch record: %+v", br)
	}
	if bro := mustRows(t, b); len(bro) != 2 || bro[0].Content != "first" || bro[1].Content != "one" {
		t.Fatalf("branch rows: %+v", bro)
	}
	if len(mustRows(t, s)) != 4 {
		t.Fatal("branching changed the parent")
	}
	other := h.create()
	if err := other.SetTitle(ctx, "Refactor"); !errors.Is(err, store.ErrTitleTaken) {
		t.Fatalf("duplicate title: %v", err)
	}
	list, err := h.eng.List(ctx, store.ListOptions{})
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	if err := s.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, engine.Prompt{Text: "x"}); !errors.Is(err, engine.ErrSessionClosed) {
		t.Fatalf("closed: %v", err)
	}
	re, err := h.eng.Open(ctx, s.ID())
	if err != nil || re == s || len(mustRows(t, re)) != 4 {
		t.Fatalf("reopen: %v", err)
	}
	if _, err := h.eng.Open(ctx, "missing"); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestJournalReplayAndFanOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(openaitest.Text("a", "b", "c"))
	s := h.create()
	h.run(s, "go")
	var seqs []uint64
	for ev, err := range s.Events(ctxT(t), 0) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ev.Seq)
		if ev.SessionID != s.ID() {
			t.Fatalf("session id: %+v", ev)
		}
		if ev.Seq == s.LastSeq() {
			break
		}
	}
	for i, q := range seqs {
		if q != uint64(i+1) {
			t.Fatalf("seqs must be 1,2,3…: %v", seqs)
		}
	}
	// Many subscribers from different cursors see the same tail.
	mid := seqs[len(seqs)/2]
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Go(func() {
			sub := s.Subscribe(mid)
			defer sub.Close()
			ev, err := sub.Next(ctxT(t))
			if err != nil || ev.Seq != mid+1 {
				t.Errorf("resume from %d: %+v %v", mid, ev, err)
			}
		})
	}
	wg.Wait()
	evs, ok := s.EventsSince(mid)
	if !ok || len(evs) != len(seqs)-int(mid) {
		t.Fatalf("events since: %d %v", len(evs), ok)
	}
}

func TestDelegateSpawnTree(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "delegate_task", Args: []string{`{"goal":"count the files"}`}}),
		openaitest.Text("there are 0 files"),
		openaitest.Text("The sub-agent says: there are 0 files."),
	)
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	out := h.run(s, "delegate it")
	if out.Status != engine.StatusCompleted {
		t.Fatalf("outcome: %+v", out)
	}
	tc := next(t, sub, engine.EvToolComplete).Data.(engine.ToolComplete)
	if tc.Result.Content != "there are 0 files" {
		t.Fatalf("delegate result: %+v", tc.Result)
	}
	tree := h.eng.SpawnTree(s.ID())
	if len(tree.Children) != 1 || tree.Children[0].Goal != "count the files" {
		t.Fatalf("spawn tree: %+v", tree)
	}
	child, err := h.eng.Open(ctxT(t), tree.Children[0].SessionID)
	if err != nil || child.Record().ParentID != s.ID() || child.Record().ParentKind != "delegate" {
		t.Fatalf("child: %+v %v", child.Record(), err)
	}
}

func TestDelegateDepthLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.MaxDelegateDepth = 1 })
	call := openaitest.Call{Name: "delegate_task", Args: []string{`{"goal":"recurse"}`}}
	h.srv.Enqueue(openaitest.ToolCalls(call), openaitest.ToolCalls(call), openaitest.Text("child gave up"), openaitest.Text("parent done"))
	s := h.create()
	out := h.run(s, "go")
	if out.Status != engine.StatusCompleted {
		t.Fatalf("outcome: %+v", out)
	}
	tree := h.eng.SpawnTree(s.ID())
	if len(tree.Children) != 1 || len(tree.Children[0].Children) != 0 {
		t.Fatalf("depth limit not enforced: %+v", tree)
	}
}

// askTool raises a secret and a sudo request through tool.Env.Ask.
type askTool struct{}

func (askTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "ask_secret", Description: "test", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (askTool) Call(ctx context.Context, _ tool.Call, env *tool.Env) (tool.Result, error) {
	a, err := env.Ask(ctx, tool.Question{Kind: engine.KindSecret, Payload: map[string]any{"prompt": "API token"}})
	if err != nil {
		return tool.Errorf("%v", err), nil
	}
	b, err := env.Ask(ctx, tool.Question{Kind: engine.KindSudo, Payload: map[string]any{"prompt": "password"}})
	if err != nil {
		return tool.Errorf("%v", err), nil
	}
	return tool.Result{Content: a["value"].(string) + "/" + b["value"].(string)}, nil
}

func TestSecretAndSudoRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.Tools.Add(askTool{}) })
	h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "ask_secret", Args: []string{`{}`}}), openaitest.Text("ok"))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
	req := next(t, sub, engine.EvRequestOpen).Data.(engine.Request)
	if req.Kind != engine.KindSecret || req.Payload["call_id"] == "" || req.Deadline.IsZero() {
		t.Fatalf("secret request: %+v", req)
	}
	if err := s.Answer(req.ID, map[string]any{"value": 42}); !errors.Is(err, engine.ErrInvalidAnswer) {
		t.Fatalf("wrong type: %v", err)
	}
	s.Answer(req.ID, map[string]any{"value": "tok"})
	req = next(t, sub, engine.EvRequestOpen).Data.(engine.Request)
	if req.Kind != engine.KindSudo {
		t.Fatalf("sudo request: %+v", req)
	}
	s.Answer(req.ID, map[string]any{"value": "pw"})
	if tc := next(t, sub, engine.EvToolComplete).Data.(engine.ToolComplete); tc.Result.Content != "tok/pw" {
		t.Fatalf("result: %+v", tc.Result)
	}
	s.Wait(ctxT(t), adm.TurnID)
}

func TestInterruptParentInterruptsSubagent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := openaitest.NewGate()
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "delegate_task", Args: []string{`{"goal":"think slowly"}`}}),
		openaitest.Response{Text: []string{"child thinking"}, FaultAt: 1, Gate: g},
	)
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "go"})
	info := next(t, sub, engine.EvSubagentStart).Data.(engine.SubagentInfo)
	<-g.Reached()
	child, ok := h.eng.Live(info.ChildID)
	if !ok {
		t.Fatal("child not live")
	}
	if _, err := child.Steer("hurry"); err != nil { // a running sub-agent accepts steer
		t.Fatal(err)
	}
	s.Interrupt("")
	out, _ := s.Wait(ctxT(t), adm.TurnID)
	g.Release()
	done := next(t, sub, engine.EvSubagentDone).Data.(engine.SubagentInfo)
	if out.Status != engine.StatusCancelled || done.Outcome.Status != engine.StatusCancelled {
		t.Fatalf("parent %+v child %+v", out, done.Outcome)
	}
}

func TestLazySessionWritesNothingUntilFirstPrompt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := ctxT(t)
	s, err := h.eng.Create(ctx, engine.CreateOptions{Lazy: true, Title: "Lazy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.GetSession(ctx, s.ID()); !errors.Is(err, store.ErrNotFound) || s.Stored() {
		t.Fatalf("a lazy session was stored: %v", err)
	}
	if _, err := h.eng.Branch(ctx, s.ID(), engine.BranchOptions{}); !errors.Is(err, engine.ErrNothingToBranch) {
		t.Fatalf("branch of an empty session: %v", err)
	}
	other, _ := h.eng.Create(ctx, engine.CreateOptions{})
	if err := other.SetTitle(ctx, "Lazy"); !errors.Is(err, store.ErrTitleTaken) {
		t.Fatalf("a pending title must still be unique: %v", err)
	}
	if _, err := s.SetModel(ctx, "openai:other"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SteerOrHold("keep it short"); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(openaitest.Text("hi"))
	out := h.run(s, "hello")
	rec, err := h.st.GetSession(ctx, s.ID())
	if err != nil || rec.Title != "Lazy" || rec.Model != "openai:other" || rec.RowCount != 2 {
		t.Fatalf("stored on first prompt: %+v %v", rec, err)
	}
	if out.PendingSteer != "keep it short" {
		t.Fatalf("a steer held while idle comes back as pending: %+v", out)
	}
}

func TestCompress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.create()
	if r, err := s.Compress(ctxT(t), ""); err != nil || r.Status != "aborted" {
		t.Fatalf("empty: %+v %v", r, err)
	}
	for _, a := range []string{"A1", "A2", "A3"} {
		h.srv.Enqueue(openaitest.Text(a))
		h.run(s, "Q"+a[1:])
	}
	h.srv.Enqueue(openaitest.Text("User asked Q1 and Q2; answered."))
	r, err := s.Compress(ctxT(t), "answers")
	if err != nil || r.Status != "compressed" || r.Before != 6 || r.After != 3 || r.Removed != 6 {
		t.Fatalf("compress: %+v %v", r, err)
	}
	msgs := h.lastRequestMessages()
	if last := msgs[len(msgs)-1]["content"].(string); !strings.Contains(last, "Focus on: answers") || len(msgs) != 6 {
		t.Fatalf("summary request: %d %v", len(msgs), last)
	}
	var got []string
	for _, row := range mustRows(t, s) {
		got = append(got, row.Role+":"+row.Content)
	}
	if len(got) != 3 || !strings.HasPrefix(got[0], "system:Summary of the earlier conversation:\nUser asked") || got[1] != "user:Q3" || got[2] != "assistant:A3" {
		t.Fatalf("after compress: %q", got)
	}
	h.srv.Enqueue(openaitest.Text("next"))
	if out := h.run(s, "Q4"); out.Status != engine.StatusCompleted {
		t.Fatal(out)
	}
	if msgs := h.lastRequestMessages(); len(msgs) != 5 || msgs[1]["role"] != "system" {
		t.Fatalf("the next turn sees the summary: %v", msgs)
	}
}

func TestFailedBusyHookUsesConfiguredFallback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) {
		c.Policy.Busy = failingBusy{}
		c.Fallback.Busy = policy.NewBusySetting("queue")
	})
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"x"}, FaultAt: 1, Gate: g}, openaitest.Text("y"))
	s := h.create()
	s.Submit(ctxT(t), engine.Prompt{Text: "a"})
	<-g.Reached()
	adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "b"})
	g.Release()
	if adm.Status != engine.AdmitQueued || adm.Interrupted {
		t.Fatalf("the configured queue mode must decide when the hook fails: %+v", adm)
	}
	s.WaitIdle(ctxT(t))
}
