package engine

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// gatedProvider answers each call with its text once the test lets it (release), or at once
// when it is not gated. It counts the calls it got, so a test can tell which engine ran a turn.
type gatedProvider struct {
	mu      sync.Mutex
	calls   int
	gated   bool
	reached chan string   // the last user message of each gated call
	release chan struct{} // one receive per gated call
}

func newGated() *gatedProvider {
	return &gatedProvider{reached: make(chan string, 16), release: make(chan struct{}, 16)}
}

func (p *gatedProvider) gate(on bool) {
	p.mu.Lock()
	p.gated = on
	p.mu.Unlock()
}

func (p *gatedProvider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func (p *gatedProvider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		p.mu.Lock()
		p.calls++
		gated := p.gated
		p.mu.Unlock()
		last := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		if gated {
			p.reached <- last
			select {
			case <-p.release:
			case <-ctx.Done():
				yield(model.Chunk{}, context.Cause(ctx))
				return
			}
		}
		yield(model.Chunk{Text: "answer to " + last}, nil)
	}
}

type fixedBusy string

func (f fixedBusy) BusyInput(context.Context, policy.BusyInput) (policy.BusyDecision, error) {
	return policy.BusyDecision{Mode: string(f)}, nil
}

// leaseEngine is one "process" on the shared store.
func leaseEngine(t *testing.T, st store.Store, p *gatedProvider, mut func(*Config)) *Engine {
	t.Helper()
	cfg := Config{Store: st, Providers: map[string]model.Provider{"p": p}, DefaultModel: "p:m", Cwd: t.TempDir()}
	if mut != nil {
		mut(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// reachedCall waits until the provider got a gated call and returns its prompt.
func reachedCall(t *testing.T, p *gatedProvider) string {
	t.Helper()
	select {
	case s := <-p.reached:
		return s
	case <-time.After(60 * time.Second):
		t.Fatal("the model was never called")
		return ""
	}
}

// contents lists the session's active rows as "role:content".
func contents(t *testing.T, st store.Store, id string) []string {
	t.Helper()
	rows, err := st.Rows(context.Background(), id, store.RowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Role+":"+r.Content)
	}
	return out
}

// waitEvent reads the session's events from seq since until one satisfies ok.
func waitEvent(t *testing.T, s *Session, since uint64, ok func(Event) bool) Event {
	t.Helper()
	for ev, err := range s.Events(waitCtx(t), since) {
		if err != nil {
			t.Fatalf("waiting for an event: %v", err)
		}
		if ok(ev) {
			return ev
		}
	}
	t.Fatal("events ended")
	return Event{}
}

// TestLeaseBusyAcrossEngines: two engines on one store prompt one session while a turn runs
// in the first; exactly one engine runs turns, and the second gets the busy policy's answer.
func TestLeaseBusyAcrossEngines(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{policy.Queue, policy.Steer, policy.Interrupt, policy.Reject} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			st := memstore.New()
			pa, pb := newGated(), newGated()
			busy := func(c *Config) { c.Policy.Busy = fixedBusy(mode) }
			ea, eb := leaseEngine(t, st, pa, busy), leaseEngine(t, st, pb, busy)
			ctx := waitCtx(t)
			sa, err := ea.Create(ctx, CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pa.gate(true)
			first, err := sa.Submit(ctx, Prompt{Text: "first"})
			if err != nil || first.Status != AdmitStarted {
				t.Fatalf("first submit: %+v %v", first, err)
			}
			reachedCall(t, pa)
			sb, err := eb.Open(ctx, sa.ID())
			if err != nil {
				t.Fatal(err)
			}
			adm, err := sb.Submit(ctx, Prompt{Text: "second"})
			if err != nil {
				t.Fatalf("second submit through the other engine: %v", err)
			}
			want := map[string]string{policy.Queue: AdmitQueued, policy.Steer: AdmitSteered, policy.Interrupt: AdmitQueued, policy.Reject: AdmitRejected}[mode]
			if adm.Status != want || adm.Interrupted != (mode == policy.Interrupt) {
				t.Fatalf("admission %+v, want status %s (interrupted %v)", adm, want, mode == policy.Interrupt)
			}
			if mode == policy.Queue && adm.QueuedCount != 1 {
				t.Fatalf("queued count %d, want 1", adm.QueuedCount)
			}
			if mode == policy.Steer && adm.SteerID == "" {
				t.Fatalf("steered without a steer id: %+v", adm)
			}
			pa.gate(false)
			if mode != policy.Interrupt {
				pa.release <- struct{}{} // the first call answers
			}
			out, err := sa.Wait(ctx, first.TurnID)
			if err != nil {
				t.Fatal(err)
			}
			pa.release <- struct{}{} // for a follow-up that was gated before the gate opened
			switch mode {
			case policy.Interrupt:
				if out.Status != StatusCancelled {
					t.Fatalf("interrupted turn: %+v", out)
				}
			case policy.Steer:
				if out.Status != StatusCompleted || out.PendingSteer != "second" {
					t.Fatalf("steered turn: %+v, want completed with pending steer %q", out, "second")
				}
			default:
				if out.Status != StatusCompleted {
					t.Fatalf("first turn: %+v", out)
				}
			}
			if err := sa.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			rows := contents(t, st, sa.ID())
			wantRows := map[string][]string{
				policy.Queue:     {"user:first", "assistant:answer to first", "user:second", "assistant:answer to second"},
				policy.Steer:     {"user:first", "assistant:answer to first"},
				policy.Interrupt: {"user:first", "user:second", "assistant:answer to second"},
				policy.Reject:    {"user:first", "assistant:answer to first"},
			}[mode]
			if strings.Join(rows, "|") != strings.Join(wantRows, "|") {
				t.Fatalf("rows %q, want %q", rows, wantRows)
			}
			if n := pb.Calls(); n != 0 {
				t.Fatalf("the second engine called its model %d times; only the holder runs turns", n)
			}
		})
	}
}

// TestLeaseAnswerAcrossEngines: an approval raised in one engine is answered through another.
func TestLeaseAnswerAcrossEngines(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ea, eb := leaseEngine(t, st, newGated(), nil), leaseEngine(t, st, newGated(), nil)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A request like the ones a tool opens, raised in a turn of the first engine.
	sa.mu.Lock()
	turn := sa.newTurnLocked("ask", "test", trace.SpanContext{})
	sa.mu.Unlock()
	h, err := sa.hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub := sa.Subscribe(sa.LastSeq())
	defer sub.Close()
	answered := make(chan map[string]any, 1)
	go func() {
		a, err := sa.ask(turn.ctx, turn.id, KindApproval, map[string]any{"command": "rm -rf build"}, time.Minute)
		if err != nil {
			t.Errorf("ask: %v", err)
		}
		answered <- a
	}()
	var req Request
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == EvRequestOpen {
			req = ev.Data.(Request)
			break
		}
	}
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Answer(req.ID, map[string]any{"choice": "bogus"}); !errors.Is(err, ErrInvalidAnswer) {
		t.Fatalf("a malformed answer through the other engine: %v, want ErrInvalidAnswer", err)
	}
	if err := sb.Answer(req.ID, map[string]any{"choice": ChoiceOnce}); err != nil {
		t.Fatalf("answer through the other engine: %v", err)
	}
	if a := <-answered; a["choice"] != ChoiceOnce {
		t.Fatalf("the asking tool got %v", a)
	}
	if err := sb.Answer(req.ID, map[string]any{"choice": ChoiceOnce}); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("a second answer: %v, want ErrUnknownRequest", err)
	}
	sa.abandonTurn(turn)
	h.unpin()
}

// TestLeaseTakeover: a holder that stops renewing loses the session to the next engine that
// needs it; the newcomer records the takeover, its turn runs, and the stale holder's turn
// stops failed — at its next write (fenced by the store) or its next renewal (refused).
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"fenced write", "refused renewal"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			st := memstore.New()
			pa, pb := newGated(), newGated()
			var mu sync.Mutex
			var tookOver []Takeover
			short := func(c *Config) { c.Leases.TTL = 300 * time.Millisecond }
			leaseErrs := make(chan Event, 16) // the stale holder's error events (its journal may drop them with its log)
			ea := leaseEngine(t, st, pa, func(c *Config) {
				short(c)
				c.OnEvent = func(ev Event) {
					if info, ok := ev.Data.(ErrorInfo); ok && ev.Type == EvError && info.Code == "lease" {
						leaseErrs <- ev
					}
				}
			})
			eb := leaseEngine(t, st, pb, func(c *Config) {
				short(c)
				c.OnTakeover = func(_ context.Context, tk Takeover) {
					mu.Lock()
					tookOver = append(tookOver, tk)
					mu.Unlock()
				}
			})
			ctx := waitCtx(t)
			sa, err := ea.Create(ctx, CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pa.gate(true)
			first, err := sa.Submit(ctx, Prompt{Text: "first"})
			if err != nil {
				t.Fatal(err)
			}
			reachedCall(t, pa)
			ea.lmu.Lock()
			ha := ea.leases[sa.ID()]
			ea.lmu.Unlock()
			ha.paused.Store(true) // the holder hangs: no more renewals

			sb, err := eb.Open(ctx, sa.ID())
			if err != nil {
				t.Fatal(err)
			}
			since := sb.LastSeq()
			// Sent while the first engine still holds the session: it waits in the inbox
			// until the lease expires, and then this engine takes the session and runs it.
			adm, err := sb.Submit(ctx, Prompt{Text: "next"})
			if err != nil || adm.Status != AdmitStarted {
				t.Fatalf("submit after the holder hung: %+v %v", adm, err)
			}
			ev := waitEvent(t, sb, since, func(ev Event) bool { return ev.Type == EvTakeover })
			tk := ev.Data.(Takeover)
			if tk.PreviousOwner != ea.LeaseOwner() || tk.Owner != eb.LeaseOwner() || tk.Generation <= tk.PreviousGeneration ||
				tk.Outcome != OutcomeRestartUnknown || tk.TurnID != first.TurnID {
				t.Fatalf("takeover %+v (first turn %s)", tk, first.TurnID)
			}
			mu.Lock()
			n := len(tookOver)
			mu.Unlock()
			if n != 1 {
				t.Fatalf("OnTakeover called %d times, want 1", n)
			}
			outB, err := sb.Wait(ctx, adm.TurnID)
			if err != nil || outB.Status != StatusCompleted {
				t.Fatalf("the newcomer's turn: %+v %v", outB, err)
			}

			if how == "fenced write" {
				pa.release <- struct{}{} // the stale holder's answer arrives and is written: refused
			} else {
				ha.paused.Store(false) // its next renewal is refused: it stops at once
			}
			outA, err := sa.Wait(ctx, first.TurnID)
			if err != nil {
				t.Fatal(err)
			}
			if outA.Status != StatusFailed || outA.ExitReason != reasonLease {
				t.Fatalf("stale holder's turn: %+v, want failed with %s", outA, reasonLease)
			}
			if how == "fenced write" && !strings.Contains(outA.Error, store.ErrFenced.Error()) {
				t.Fatalf("stale holder's error %q does not name the fence", outA.Error)
			}
			select {
			case ev := <-leaseErrs:
				if ev.TurnID != first.TurnID {
					t.Fatalf("lease error event of turn %s, want %s", ev.TurnID, first.TurnID)
				}
			default:
				t.Fatal("no lease error event for the stale holder's turn")
			}
			rows := contents(t, st, sa.ID())
			want := []string{"user:first", "user:next", "assistant:answer to next"}
			if strings.Join(rows, "|") != strings.Join(want, "|") {
				t.Fatalf("rows %q, want %q (nothing of the stale holder after the takeover)", rows, want)
			}
			if pb.Calls() != 1 {
				t.Fatalf("the newcomer called its model %d times, want 1", pb.Calls())
			}
			// The stale holder's handle is usable again: its next prompt is served (by the
			// holder of the moment, whichever engine that is) and answered.
			if err := sb.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			pa.gate(false)
			again, err := sa.Submit(ctx, Prompt{Text: "again"})
			if err != nil || again.Status != AdmitStarted {
				t.Fatalf("next prompt through the stale engine: %+v %v", again, err)
			}
		})
	}
}

// TestLeaseReleasedWhenIdle: the lease is held during a turn and given back after it, so
// another engine then runs the next turn itself.
func TestLeaseReleasedWhenIdle(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb := newGated(), newGated()
	ea, eb := leaseEngine(t, st, pa, nil), leaseEngine(t, st, pb, nil)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pa.gate(true)
	adm, err := sa.Submit(ctx, Prompt{Text: "one"})
	if err != nil {
		t.Fatal(err)
	}
	reachedCall(t, pa)
	ls, err := st.ListLeases(ctx)
	if err != nil || len(ls) != 1 || ls[0].Owner != ea.LeaseOwner() {
		t.Fatalf("leases during the turn: %+v %v", ls, err)
	}
	pa.gate(false)
	pa.release <- struct{}{}
	if _, err := sa.Wait(ctx, adm.TurnID); err != nil {
		t.Fatal(err)
	}
	// Given back once idle: watch the store until no lease is left.
	sub, err := st.Watch(ctx, store.Interest{Sessions: []string{sa.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for {
		ls, err := st.ListLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		select {
		case <-sub.C():
			sub.Take()
		case <-ctx.Done():
			t.Fatalf("lease never released: %+v", ls)
		}
	}
	if _, err := st.GetKV(ctx, markerPrefix+sa.ID()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("held marker after a clean release: %v", err)
	}
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	since := sb.LastSeq()
	out, err := sb.Submit(ctx, Prompt{Text: "two"})
	if err != nil || out.Status != AdmitStarted {
		t.Fatalf("%+v %v", out, err)
	}
	if _, err := sb.Wait(ctx, out.TurnID); err != nil {
		t.Fatal(err)
	}
	if pb.Calls() != 1 {
		t.Fatalf("second engine model calls %d, want 1", pb.Calls())
	}
	evs, _ := sb.EventsSince(since)
	for _, ev := range evs {
		if ev.Type == EvTakeover {
			t.Fatalf("a clean release looked like a takeover: %+v", ev)
		}
	}
}
