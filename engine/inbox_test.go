package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine/store/memstore"
)

// waitFor polls cond (a store read) until it holds; the deadline is generous.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestInboxWithdrawAcrossEngines: a request open in one engine is withdrawn through another,
// and the asking tool sees the withdraw with its reason.
func TestInboxWithdrawAcrossEngines(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ea, eb := leaseEngine(t, st, newGated(), nil), leaseEngine(t, st, newGated(), nil)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa.mu.Lock()
	turn := sa.newTurnLocked("ask", "test", trace.SpanContext{})
	sa.mu.Unlock()
	h, err := sa.hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub := sa.Subscribe(sa.LastSeq())
	defer sub.Close()
	asked := make(chan error, 1)
	go func() {
		_, err := sa.ask(turn.ctx, turn.id, KindApproval, map[string]any{"command": "rm -rf build"}, time.Minute)
		asked <- err
	}()
	var req Request
	for req.ID == "" {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == EvRequestOpen {
			req = ev.Data.(Request)
		}
	}
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Withdraw("no-such-request", "client left"); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("withdrawing an unknown request through the other engine: %v, want ErrUnknownRequest", err)
	}
	if err := sb.Withdraw(req.ID, "client left"); err != nil {
		t.Fatalf("withdraw through the other engine: %v", err)
	}
	select {
	case err := <-asked:
		if !errors.Is(err, ErrRequestWithdrawn) || !strings.Contains(err.Error(), "client left") {
			t.Fatalf("the asking tool got %v, want ErrRequestWithdrawn with the reason", err)
		}
	case <-ctx.Done():
		t.Fatal("the asking tool never saw the withdraw")
	}
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == EvRequestCancel {
			if c := ev.Data.(RequestCancel); c.ID != req.ID || c.Reason != "client left" {
				t.Fatalf("request cancel %+v, want request %s withdrawn for %q", c, req.ID, "client left")
			}
			break
		}
	}
	if err := sb.Withdraw(req.ID, "again"); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("a second withdraw: %v, want ErrUnknownRequest", err)
	}
	sa.abandonTurn(turn)
	h.unpin()
}

// TestInboxStaleRecordsRemoved: a command whose sender is long gone is dropped unexecuted by
// the next holder, and a reply nobody fetched is removed; a reply still in use stays.
func TestInboxStaleRecordsRemoved(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ea := leaseEngine(t, st, newGated(), nil)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sid := sa.ID()
	old := time.Now().Add(-time.Hour)
	id := func(at time.Time, n int) string { return fmt.Sprintf("%016x-%s-%08d", at.UnixNano(), "deadbeef", n) }
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutKV(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	// A prompt sent an hour ago by a process that died before anyone took it.
	staleCmd := id(old, 1)
	put(inboxPrefix(sid)+staleCmd, inboxCommand{ID: staleCmd, Kind: "submit", Reply: replyPrefix(sid) + staleCmd,
		Prompt: &Prompt{Text: "stale"}, Deadline: old.Add(30 * time.Second)})
	// Replies whose senders gave up or died: one with its deadline, one of an earlier build
	// (no deadline: its id's time counts).
	orphan, legacy := id(old, 2), id(old, 3)
	put(replyPrefix(sid)+orphan, inboxReply{Interrupted: true, Deadline: old.Add(30 * time.Second)})
	put(replyPrefix(sid)+legacy, inboxReply{Interrupted: true})
	// A reply its sender is still about to fetch.
	fresh := id(time.Now(), 4)
	put(replyPrefix(sid)+fresh, inboxReply{Interrupted: true, Deadline: time.Now().Add(time.Hour)})

	adm, err := sa.Submit(ctx, Prompt{Text: "now"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Wait(ctx, adm.TurnID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stale records to be removed", func() bool {
		cmds, err := st.ListKV(ctx, inboxPrefix(sid))
		if err != nil {
			t.Fatal(err)
		}
		replies, err := st.ListKV(ctx, replyPrefix(sid))
		if err != nil {
			t.Fatal(err)
		}
		_, orphanLeft := replies[replyPrefix(sid)+orphan]
		_, legacyLeft := replies[replyPrefix(sid)+legacy]
		return len(cmds) == 0 && !orphanLeft && !legacyLeft
	})
	if _, err := st.GetKV(ctx, replyPrefix(sid)+fresh); err != nil {
		t.Fatalf("a reply still in use was removed: %v", err)
	}
	if err := sa.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	rows := strings.Join(contents(t, st, sid), "|")
	if want := "user:now|assistant:answer to now"; rows != want {
		t.Fatalf("rows %q, want %q: the stale prompt must not run", rows, want)
	}
}

// TestInboxInLineOrder: prompts in line forwarded from two engines to the holder of the
// session join its line in the order they were sent, and their turns run in that order.
func TestInboxInLineOrder(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb, pc := newGated(), newGated(), newGated()
	long := func(c *Config) { // the holder is paused a moment below
		c.Leases.TTL, c.Leases.InboxTimeout = 2*time.Minute, 2*time.Minute
	}
	ea, eb, ec := leaseEngine(t, st, pa, long), leaseEngine(t, st, pb, long), leaseEngine(t, st, pc, long)
	ctx := waitCtx(t)
	sa, err := ea.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sid := sa.ID()
	pa.gate(true)
	first, err := sa.Submit(ctx, Prompt{Text: "first"})
	if err != nil || first.Status != AdmitStarted {
		t.Fatalf("first submit: %+v %v", first, err)
	}
	reachedCall(t, pa)
	senders := make([]*Session, 2)
	for i, e := range []*Engine{eb, ec} {
		if senders[i], err = e.Open(ctx, sid); err != nil {
			t.Fatal(err)
		}
	}
	// The holder looks at its inbox only once every prompt but the last is stored, so it
	// finds them all at once.
	h := sa.held.Load()
	h.paused.Store(true)
	const n = 6
	type result struct {
		i   int
		adm Admission
		err error
	}
	results := make(chan result, n)
	submit := func(i int) {
		go func() {
			adm, err := senders[i%2].Submit(ctx, Prompt{Text: fmt.Sprintf("p%d", i), InLine: true})
			results <- result{i, adm, err}
		}()
	}
	for i := range n - 1 {
		submit(i)
		waitFor(t, fmt.Sprintf("prompt %d in the inbox", i), func() bool {
			cmds, err := st.ListKV(ctx, inboxPrefix(sid))
			if err != nil {
				t.Fatal(err)
			}
			return len(cmds) == i+1
		})
	}
	h.paused.Store(false)
	submit(n - 1) // its arrival wakes the holder
	// Once the holder took them all (while the first turn runs), they keep its lease until
	// each has its turn; a command still in the inbox when the holder goes idle would be
	// served by the next holder (a sender).
	waitFor(t, "the holder to take every prompt", func() bool {
		cmds, err := st.ListKV(ctx, inboxPrefix(sid))
		if err != nil {
			t.Fatal(err)
		}
		return len(cmds) == 0
	})
	pa.gate(false)
	pa.release <- struct{}{}
	for range n {
		r := <-results
		if r.err != nil || r.adm.Status != AdmitStarted {
			t.Fatalf("prompt %d in line: %+v %v", r.i, r.adm, r.err)
		}
	}
	if err := sa.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"user:first", "assistant:answer to first"}
	for i := range n {
		want = append(want, fmt.Sprintf("user:p%d", i), fmt.Sprintf("assistant:answer to p%d", i))
	}
	if rows := contents(t, st, sid); strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	if pb.Calls()+pc.Calls() != 0 {
		t.Fatal("a sender ran a turn; only the holder runs turns")
	}
}

// The inbox ids order by sending time; an id's time is what an id of an earlier build's
// record is judged by.
func TestInboxSentAt(t *testing.T) {
	at := time.Unix(0, 1_700_000_000_123_456_789)
	got, ok := inboxSentAt(fmt.Sprintf("%016x-abcd1234-ef", at.UnixNano()))
	if !ok || !got.Equal(at) {
		t.Fatalf("inboxSentAt = %v, %v; want %v", got, ok, at)
	}
	if _, ok := inboxSentAt("not-an-id"); ok {
		t.Fatal("inboxSentAt read a time from a malformed id")
	}
}
