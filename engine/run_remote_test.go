package engine

import (
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// TestRunFollowsTurnOfLeaseHolder: a prompt sent through an engine while another engine holds
// the session's lease (idle, not yet given back) starts its turn in the holder; the sender's
// Follow reads that turn's events to its outcome instead of ending at once.
func TestRunFollowsTurnOfLeaseHolder(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb := newGated(), newGated()
	ea, eb := leaseEngine(t, st, pa, nil), leaseEngine(t, st, pb, nil)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sa.hold(ctx) // the holder keeps the lease while idle
	if err != nil || h == nil {
		t.Fatalf("hold: %v %v", h, err)
	}
	defer h.unpin()
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	adm, f, err := sb.Run(ctx, Prompt{Text: "through b"})
	if err != nil || adm.Status != AdmitStarted {
		t.Fatalf("run through the other engine: %+v %v", adm, err)
	}
	defer f.Close()
	sawOwn := false
	for {
		ev, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		if ev.TurnID == adm.TurnID && ev.Type != EvMessageComplete {
			sawOwn = true
		}
	}
	out, ok := f.Outcome()
	if !ok || out.TurnID != adm.TurnID || out.Status != StatusCompleted || out.Text != "answer to through b" || !sawOwn {
		t.Fatalf("outcome %+v %v (events of the turn seen: %v)", out, ok, sawOwn)
	}
	if pa.Calls() != 1 || pb.Calls() != 0 {
		t.Fatalf("model calls: holder %d, sender %d; the holder runs the turn", pa.Calls(), pb.Calls())
	}
}

// TestRunFollowsOwnTurnAfterTakingOver: the session's holder died elsewhere (another host, so
// only its lease's expiry tells), and the engine a prompt was sent through takes the session
// over and serves the prompt itself. The takeover event (about the dead holder's turn) comes
// before the prompt's own turn and must not end its Follow with the dead turn's outcome.
func TestRunFollowsOwnTurnAfterTakingOver(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pb := newGated()
	eb := leaseEngine(t, st, pb, nil)
	ctx := waitCtx(t)
	if _, err := st.CreateSession(ctx, store.Session{ID: "taken", Model: "p:m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendRows(ctx, "taken", store.Fence{}, []store.Row{{Role: "user", Content: "before", TurnID: "dead-turn", Time: time.Now().UTC()}}); err != nil {
		t.Fatal(err)
	}
	ghost := "elsewhere.example:4242:serve:ghost"
	l, err := st.AcquireLease(ctx, "taken", ghost, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	mark, _ := json.Marshal(leaseMarker{Owner: ghost, Generation: l.Generation})
	if err := st.PutKV(ctx, markerPrefix+"taken", mark); err != nil {
		t.Fatal(err)
	}
	sb, err := eb.Open(ctx, "taken")
	if err != nil {
		t.Fatal(err)
	}
	adm, f, err := sb.Run(ctx, Prompt{Text: "after"})
	if err != nil || adm.Status != AdmitStarted {
		t.Fatalf("run: %+v %v", adm, err)
	}
	defer f.Close()
	for {
		_, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
	}
	out, ok := f.Outcome()
	if !ok || out.TurnID != adm.TurnID || out.Status != StatusCompleted || out.Text != "answer to after" {
		t.Fatalf("outcome %+v %v, want the prompt's own completed turn %s", out, ok, adm.TurnID)
	}
	if pb.Calls() != 1 {
		t.Fatalf("model calls %d, want 1", pb.Calls())
	}
}

// TestRunFollowsTurnAfterRemoteInterrupt: a prompt sent through an engine while another engine
// runs the session's turn, under the interrupt busy mode: the holder interrupts its turn and
// runs the prompt next; the sender's Follow reads that turn to its answer, as a local Run of an
// interrupting prompt does, instead of ending at once with no outcome.
func TestRunFollowsTurnAfterRemoteInterrupt(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb := newGated(), newGated()
	busy := func(c *Config) { c.Policy.Busy = fixedBusy("interrupt") }
	ea, eb := leaseEngine(t, st, pa, busy), leaseEngine(t, st, pb, busy)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pa.gate(true)
	first, fa, err := sa.Run(ctx, Prompt{Text: "first", FollowQueue: true})
	if err != nil || first.Status != AdmitStarted {
		t.Fatalf("first prompt: %+v %v", first, err)
	}
	defer fa.Close()
	if got := reachedCall(t, pa); got != "first" {
		t.Fatalf("model called with %q", got)
	}
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	adm, f, err := sb.Run(ctx, Prompt{Text: "second", FollowQueue: true})
	if err != nil || adm.Status != AdmitQueued || !adm.Interrupted {
		t.Fatalf("interrupting prompt through the other engine: %+v %v", adm, err)
	}
	defer f.Close()
	for {
		if _, err := fa.Next(ctx); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("first follow: %v", err)
		}
	}
	if out, ok := fa.Outcome(); !ok || out.Status != StatusCancelled {
		t.Fatalf("interrupted turn's outcome %+v %v", out, ok)
	}
	if got := reachedCall(t, pa); got != "second" {
		t.Fatalf("model called with %q", got)
	}
	pa.release <- struct{}{}
	for {
		if _, err := f.Next(ctx); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("follow through the other engine: %v", err)
		}
	}
	out, ok := f.Outcome()
	if !ok || out.Status != StatusCompleted || out.Text != "answer to second" {
		t.Fatalf("outcome of the interrupting prompt %+v %v", out, ok)
	}
	if pb.Calls() != 0 {
		t.Fatalf("the sender's model was called %d times; the holder runs the turn", pb.Calls())
	}
}

// TestRunFollowsQueuedTurnOfRemoteHolder: a prompt sent through an engine while another engine
// runs the session's turn, under the queue busy mode: the holder queues it as the follow-up and
// runs it once its turn ends; the sender's Follow reads that follow-up turn to its answer, as a
// local Run of a queued prompt does, instead of ending at once with no outcome.
func TestRunFollowsQueuedTurnOfRemoteHolder(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb := newGated(), newGated()
	busy := func(c *Config) { c.Policy.Busy = fixedBusy("queue") }
	ea, eb := leaseEngine(t, st, pa, busy), leaseEngine(t, st, pb, busy)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pa.gate(true)
	first, fa, err := sa.Run(ctx, Prompt{Text: "first"})
	if err != nil || first.Status != AdmitStarted {
		t.Fatalf("first prompt: %+v %v", first, err)
	}
	defer fa.Close()
	if got := reachedCall(t, pa); got != "first" {
		t.Fatalf("model called with %q", got)
	}
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	adm, f, err := sb.Run(ctx, Prompt{Text: "second"})
	if err != nil || adm.Status != AdmitQueued || adm.Interrupted {
		t.Fatalf("queued prompt through the other engine: %+v %v", adm, err)
	}
	defer f.Close()
	pa.release <- struct{}{} // the first turn answers; the holder starts the follow-up
	if got := reachedCall(t, pa); got != "second" {
		t.Fatalf("model called with %q", got)
	}
	pa.release <- struct{}{}
	var turn string
	for {
		ev, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("follow through the other engine: %v", err)
		}
		if ev.TurnID == first.TurnID {
			t.Fatalf("the follow yielded an event of the turn the prompt queued behind: %+v", ev)
		}
		if ev.TurnID != "" && turn == "" {
			turn = ev.TurnID
		}
	}
	out, ok := f.Outcome()
	if !ok || out.Status != StatusCompleted || out.Text != "answer to second" || out.TurnID != turn {
		t.Fatalf("outcome of the queued prompt %+v %v (turn followed %q)", out, ok, turn)
	}
	if pb.Calls() != 0 {
		t.Fatalf("the sender's model was called %d times; the holder runs the turn", pb.Calls())
	}
}

// TestRunQueuedRemoteDropped: a prompt queued by the holder and then dropped by an interrupt
// before it ran ends the sender's Follow with ErrQueueDropped, as locally.
func TestRunQueuedRemoteDropped(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb := newGated(), newGated()
	busy := func(c *Config) { c.Policy.Busy = fixedBusy("queue") }
	ea, eb := leaseEngine(t, st, pa, busy), leaseEngine(t, st, pb, busy)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pa.gate(true)
	first, err := sa.Submit(ctx, Prompt{Text: "first"})
	if err != nil || first.Status != AdmitStarted {
		t.Fatalf("first prompt: %+v %v", first, err)
	}
	if got := reachedCall(t, pa); got != "first" {
		t.Fatalf("model called with %q", got)
	}
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	adm, f, err := sb.Run(ctx, Prompt{Text: "second"})
	if err != nil || adm.Status != AdmitQueued {
		t.Fatalf("queued prompt through the other engine: %+v %v", adm, err)
	}
	defer f.Close()
	if !sa.Interrupt("user") {
		t.Fatal("no turn to interrupt")
	}
	for {
		_, err := f.Next(ctx)
		if errors.Is(err, ErrQueueDropped) {
			break
		}
		if err != nil {
			t.Fatalf("follow of the dropped prompt ended with %v, want ErrQueueDropped", err)
		}
	}
	if pa.Calls() != 1 || pb.Calls() != 0 {
		t.Fatalf("model calls %d/%d, want 1/0", pa.Calls(), pb.Calls())
	}
}

// TestRunFollowOfARemoteTurnEndsAtItsTakeover: a prompt sent through one engine runs on the
// session's lease holder; the holder then hangs past its lease and a third engine takes the
// session over. The takeover event names the followed turn (it is the newest row's), and the
// Follow ends there, restart-unknown, rather than taking it for one more event of the turn and
// waiting for a message.complete that will never come.
func TestRunFollowOfARemoteTurnEndsAtItsTakeover(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb, pc := newGated(), newGated(), newGated()
	short := func(c *Config) { c.Leases.TTL = 300 * time.Millisecond }
	ea, eb, ec := leaseEngine(t, st, pa, short), leaseEngine(t, st, pb, short), leaseEngine(t, st, pc, short)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sa.hold(ctx)
	if err != nil || h == nil {
		t.Fatalf("hold: %v %v", h, err)
	}
	defer h.unpin()
	pa.gate(true)
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	adm, f, err := sb.Run(ctx, Prompt{Text: "through b"})
	if err != nil || adm.Status != AdmitStarted {
		t.Fatalf("run through the other engine: %+v %v", adm, err)
	}
	defer f.Close()
	reachedCall(t, pa) // the turn runs on the holder
	ea.lmu.Lock()
	ha := ea.leases[sa.ID()]
	ea.lmu.Unlock()
	ha.paused.Store(true) // the holder hangs: no more renewals

	sc, err := ec.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	admC, err := sc.Submit(ctx, Prompt{Text: "through c"}) // waits for the lease, then takes it
	if err != nil || admC.Status != AdmitStarted {
		t.Fatalf("submit through the third engine: %+v %v", admC, err)
	}
	for {
		ev, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		if ev.TurnID != "" && ev.TurnID != adm.TurnID {
			t.Fatalf("the follow of %s passed on an event of turn %s: %s", adm.TurnID, ev.TurnID, ev.Type)
		}
	}
	out, ok := f.Outcome()
	if !ok || out.TurnID != adm.TurnID || out.Status != StatusFailed || out.ExitReason != OutcomeRestartUnknown {
		t.Fatalf("outcome %+v %v, want the turn failed restart-unknown", out, ok)
	}
	pa.release <- struct{}{}
}
