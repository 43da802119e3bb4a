package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/homestore"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// envLeaseKillRounds sets the rounds of TestLeaseHolderKillRounds (CI runs 20; default 2).
const envLeaseKillRounds = "HERMES_LEASE_KILL_ROUNDS"

// TestLeaseHolderKillRounds: kill -9 of the process holding a session's lease, mid-turn, round
// after round on one home (badger through its store process). Two `hermes serve` share the
// home: B lives through every round; each round starts a fresh A, which admits a run on the
// session, takes the session's lease, asks for an approval that is answered, streams half an
// answer and is killed while it waits for the rest; a second run was admitted through A before
// the kill. Then, through B: the killed run is restart-unknown with its admission, the queued
// run is still there and runs once the unknown one is resolved (B took the lease over and
// logged a session.takeover naming A), and everything acknowledged before the kill is there:
// every user row, the answered approval's tool result, every event A's WebSocket client
// received and A stored (same seq, same type, same text), every run admitted. No seq is ever
// reused: an event A's client received that A had not stored yet is gone with A, and B numbers
// its events past it (a gap, which a client resuming through B reads across).
func TestLeaseHolderKillRounds(t *testing.T) {
	rounds := 2
	if v := os.Getenv(envLeaseKillRounds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of rounds", envLeaseKillRounds, v)
		}
		rounds = n
	}
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	model := openaitest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	b := serveHome(t, home, cwd, model.URL())
	st, err := homestore.Dial(ctx, homestore.ClientOptions{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	bc := dialGateway(t, ctx, b)

	const sid = "lease-kill"
	type admitted struct{ run, want string }
	var (
		runs                    []admitted
		userRows, toolRows      []string // contents / call ids acknowledged so far
		eventsChecked, rowsSeen int
		unstored                int    // events A's client received that A had not stored yet
		lastSeq                 uint64 // the last seq A's client received, last round
		maxGap                  uint64 // the most seqs left unused by a takeover
		toUnknown, toNext       []time.Duration
		perRound                []time.Duration
	)
	for r := range rounds {
		began := time.Now()
		// Every wait of a round is bounded: a round that hangs fails instead.
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
		if err := os.MkdirAll(cwd+"/build", 0o755); err != nil {
			t.Fatal(err)
		}
		// The session's lease was given back by the last round's turn runner: A takes it.
		waitLease(t, rctx, st, sid, func(l store.Lease, held bool) bool { return !held })
		logEnd, err := st.LastEventSeq(rctx, sid)
		if err != nil && !errors.Is(err, store.ErrNotFound) { // none before the first round
			t.Fatal(err)
		}
		a := serveHome(t, home, cwd, model.URL())
		gate := openaitest.NewGate()
		callID := fmt.Sprintf("call_rm_%d", r)
		model.Enqueue(
			openaitest.ToolCalls(openaitest.Call{ID: callID, Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}),
			openaitest.Response{Text: []string{fmt.Sprintf("half-%d ", r), "never"}, FaultAt: 2, Gate: gate},
		)
		prompt := fmt.Sprintf("round %d: clean up", r)
		code, adm := a.call(t, "POST", "/v1/runs", `{"input":"`+prompt+`","session_id":"`+sid+`"}`)
		if code != 202 {
			t.Fatalf("round %d: admission %d %v", r, code, adm)
		}
		first := adm["run_id"].(string)
		userRows = append(userRows, prompt)

		running := a.waitStatus(t, first, "waiting_for_approval")
		code, ans := a.call(t, "POST", "/v1/runs/"+first+"/approval", `{"choice":"deny"}`)
		if code != 200 || ans["choice"] != "deny" {
			t.Fatalf("round %d: approval %d %v", r, code, ans)
		}
		toolRows = append(toolRows, callID)
		// A's WebSocket client attaches once the approval is answered (a client attached over
		// /api/ws that does not answer server requests has an open approval withdrawn): its
		// replay holds the turn's events from the start, then it follows live.
		ac := dialGateway(t, rctx, a)
		var res map[string]any
		if err := ac.CallInto(rctx, "session.resume", map[string]any{"session_id": sid}, &res); err != nil {
			t.Fatalf("round %d: session.resume through A: %v", r, err)
		}
		asid := res["session_id"].(string)
		if err := ac.CallInto(rctx, "session.events.since", map[string]any{"session_id": asid, "last_seen": 0}, &res); err != nil {
			t.Fatalf("round %d: session.events.since through A: %v", r, err)
		}
		seen := map[uint64]gwclient.Event{}
		for _, raw := range res["events"].([]any) {
			var e gwclient.Event
			b, _ := json.Marshal(raw)
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			seen[e.Seq] = e
		}

		// A second run, admitted through A while the first runs: queued behind it.
		code, adm2 := a.call(t, "POST", "/v1/runs", `{"input":"round `+strconv.Itoa(r)+`: next","session_id":"`+sid+`"}`)
		if code != 202 {
			t.Fatalf("round %d: second admission %d %v", r, code, adm2)
		}
		second := adm2["run_id"].(string)
		userRows = append(userRows, "round "+strconv.Itoa(r)+": next")
		holder := waitLease(t, rctx, st, sid, func(l store.Lease, held bool) bool { return held })
		if pid := ":" + strconv.Itoa(a.cmd.Process.Pid) + ":"; !strings.Contains(holder.Owner, pid) {
			t.Fatalf("round %d: the session's lease is %s's, not A's (pid %s)", r, holder.Owner, pid)
		}
		select {
		case <-gate.Reached():
		case <-rctx.Done():
			t.Fatalf("round %d: the run never reached its second model call:\n%s", r, a.logs.String())
		}
		half := func(e gwclient.Event) bool {
			return e.Type == "message.delta" && strings.Contains(string(e.Payload), fmt.Sprintf("half-%d", r))
		}
		// The half answer reaches A's client in its replay or live, whichever came first.
		if !slices.ContainsFunc(slices.Collect(maps.Values(seen)), half) {
			if _, _, err := ac.WaitEvent(rctx, 0, func(e gwclient.Event) bool { return e.SessionID == asid && half(e) }); err != nil {
				t.Fatalf("round %d: A's client never saw the half answer: %v", r, err)
			}
		}
		// Killed as soon as its client has the half answer: events it received may not be
		// stored yet (the log is written in group commits).
		for _, e := range ac.Events() {
			if e.SessionID == asid && e.Seq > 0 {
				seen[e.Seq] = e
			}
		}

		a.kill(t)
		killed := time.Now()
		gate.Release()
		ac.Close()

		model.Enqueue(openaitest.Text("next ", fmt.Sprintf("done-%d", r)))
		unknown := b.waitStatus(t, first, "unknown")
		toUnknown = append(toUnknown, time.Since(killed))
		if unknown["restart_unknown"] != true || unknown["admission_id"] != running["admission_id"] || unknown["execution_generation"] != float64(1) {
			t.Fatalf("round %d: the killed run through B: %v (before the kill: %v)", r, unknown, running)
		}
		if _, rec := b.call(t, "GET", "/v1/runs/"+second, ""); rec["status"] != "queued" {
			t.Fatalf("round %d: the run admitted before the kill, through B: %v", r, rec)
		}
		right := `{"admission_id":"` + running["admission_id"].(string) + `","execution_generation":1}`
		if code, res := b.call(t, "POST", "/v1/runs/"+first+"/resolve-unknown", right); code != 200 || res["status"] != "interrupted" {
			t.Fatalf("round %d: resolution %d %v", r, code, res)
		}
		if ev := b.terminalEvent(t, second); ev["event"] != "run.completed" || ev["output"] != fmt.Sprintf("next done-%d", r) {
			t.Fatalf("round %d: the next run through B ended with %v:\n%s", r, ev, b.logs.String())
		}
		toNext = append(toNext, time.Since(killed))
		runs = append(runs, admitted{first, "interrupted"}, admitted{second, "completed"})

		// B took the lease over from A and logged it so.
		last := slices.Max(slices.Collect(maps.Keys(seen)))
		lastSeq = last
		takeover, tkSeq, tkGen := findTakeover(t, rctx, st, sid, logEnd)
		if takeover == nil || !strings.Contains(takeover.PreviousOwner, ":"+strconv.Itoa(a.cmd.Process.Pid)+":") || takeover.Outcome != "restart_unknown" || takeover.TurnID == "" || tkGen <= holder.Generation {
			t.Fatalf("round %d: no session.takeover from A (pid %d, lease generation %d) in the log: %+v (generation %d)", r, a.cmd.Process.Pid, holder.Generation, takeover, tkGen)
		}
		// The takeover is the first event B wrote, numbered past every seq A could have
		// published (reserved in its lease's marker): the log A left ends before it, maybe
		// with a gap in between, and never under a seq A's client already has.
		storedByA := lastStoredBefore(t, rctx, st, sid, logEnd, tkSeq)
		if tkSeq <= last {
			t.Fatalf("round %d: B numbered the takeover %d, not past the seq %d A's client received", r, tkSeq, last)
		}
		maxGap = max(maxGap, tkSeq-storedByA-1)

		// Every event A's client received is in the log, through B, under the same seq.
		var bres map[string]any
		var bsid string
		if err := bc.CallInto(rctx, "session.resume", map[string]any{"session_id": sid}, &bres); err != nil {
			t.Fatalf("round %d: session.resume through B: %v", r, err)
		}
		bsid = bres["session_id"].(string)
		from := slices.Min(slices.Collect(maps.Keys(seen)))
		if err := bc.CallInto(rctx, "session.events.since", map[string]any{"session_id": bsid, "last_seen": from - 1}, &bres); err != nil {
			t.Fatalf("round %d: session.events.since through B: %v", r, err)
		}
		logged := map[uint64]gwclient.Event{}
		for _, raw := range bres["events"].([]any) {
			var e gwclient.Event
			b, _ := json.Marshal(raw)
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			logged[e.Seq] = e
		}
		for seq := from; seq <= last; seq++ {
			want, ok := seen[seq]
			if !ok {
				continue // not rendered to clients (an open request is listed apart)
			}
			got, ok := logged[seq]
			if seq > storedByA {
				// Sent to A's clients before its group commit stored it, and gone with A: the
				// seq stays unused (B numbers past it), so no client sees it name another event.
				if ok {
					t.Fatalf("round %d: seq %d reused: A's client received %s %s, the log through B has %s %s",
						r, seq, want.Type, want.Payload, got.Type, got.Payload)
				}
				unstored++
				continue
			}
			samePayload := string(want.Payload) == string(got.Payload) || !strings.HasPrefix(want.Type, "message.")
			if !ok || got.Type != want.Type || !samePayload {
				t.Fatalf("round %d: seq %d: A's client received %s %s before the kill; the log through B has %s %s (found %v)",
					r, seq, want.Type, want.Payload, got.Type, got.Payload, ok)
			}
			eventsChecked++
		}

		// A client of A's resuming through B from the last seq it received (perhaps one the
		// log never got) reads on from B's first event, across the gap, with no reset.
		var gres map[string]any
		if err := bc.CallInto(rctx, "session.events.since", map[string]any{"session_id": bsid, "last_seen": last}, &gres); err != nil {
			t.Fatalf("round %d: session.events.since %d through B: %v", r, last, err)
		}
		var after []uint64
		for seq := range logged {
			if seq > last {
				after = append(after, seq)
			}
		}
		slices.Sort(after)
		var resumed []uint64 // B may have logged more since: the replay starts the same
		for _, raw := range gres["events"].([]any) {
			resumed = append(resumed, uint64(raw.(map[string]any)["seq"].(float64)))
		}
		if gres["truncated"] != false || len(after) == 0 || len(resumed) < len(after) || !slices.Equal(resumed[:len(after)], after) {
			t.Fatalf("round %d: resuming after seq %d through B: truncated %v, seqs %v, want them to start with %v", r, last, gres["truncated"], resumed, after)
		}

		// Every acknowledged row, of this round and the ones before, through B.
		_, msgs := b.call(t, "GET", "/api/sessions/"+sid+"/messages?limit=1000", "")
		contents, calls := map[string]bool{}, map[string]bool{}
		for _, raw := range msgs["data"].([]any) {
			m := raw.(map[string]any)
			if c, ok := m["content"].(string); ok && m["role"] == "user" {
				contents[c] = true
			}
			if id, ok := m["tool_call_id"].(string); ok && m["role"] == "tool" {
				calls[id] = true
			}
		}
		for _, c := range userRows {
			if !contents[c] {
				t.Fatalf("round %d: acknowledged user row %q lost", r, c)
			}
		}
		for _, id := range toolRows {
			if !calls[id] {
				t.Fatalf("round %d: the result of approved-on call %s lost", r, id)
			}
		}
		rowsSeen += len(userRows) + len(toolRows)
		perRound = append(perRound, time.Since(began))
		rcancel()
	}

	// Every run admitted in any round settled as it should, as B reports it.
	for _, ad := range runs {
		if _, rec := b.call(t, "GET", "/v1/runs/"+ad.run, ""); rec["status"] != ad.want {
			t.Fatalf("run %s at the end: %v, want %s", ad.run, rec, ad.want)
		}
	}
	b.term(t)
	t.Logf("lease holder kill -9: %d rounds, %d turns (%d killed mid-turn); acknowledged and found: %d rows (%d row checks), the log up to seq %d (%d event checks), %d runs; %d events reached A's client unstored (lost with it, their seqs never reused; largest gap %d seqs); kill to restart-unknown %s, kill to the next turn completed %s; per round %s",
		rounds, 2*rounds, rounds, len(userRows)+len(toolRows), rowsSeen, lastSeq, eventsChecked, len(runs), unstored, maxGap, spread(toUnknown), spread(toNext), spread(perRound))
}

// dialGateway connects a gateway client to p's /api/ws, closed when the test ends.
func dialGateway(t *testing.T, ctx context.Context, p *restartProc) *gwclient.Client {
	t.Helper()
	c, err := gwclient.DialWS(ctx, "ws"+strings.TrimPrefix(p.base, "http")+"/api/ws", http.Header{"Authorization": {"Bearer " + testAPIKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitLease waits (60 s at most) until the session's lease, as the store lists it, satisfies ok.
func waitLease(t *testing.T, ctx context.Context, st store.Store, sid string, ok func(l store.Lease, held bool) bool) store.Lease {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ls, err := st.ListLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var l store.Lease
		held := false
		for _, x := range ls {
			if x.SessionID == sid {
				l, held = x, true
			}
		}
		if ok(l, held) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: lease %+v (held %v) never became what was waited for", sid, l, held)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// takeoverRecord is the payload of a stored session.takeover event.
type takeoverRecord struct {
	PreviousOwner string `json:"previous_owner"`
	TurnID        string `json:"turn_id"`
	Outcome       string `json:"outcome"`
}

// findTakeover returns the newest session.takeover stored in the session's log after seq, with
// its seq and the lease generation that wrote it.
func findTakeover(t *testing.T, ctx context.Context, st store.Store, sid string, after uint64) (tk *takeoverRecord, seq, gen uint64) {
	t.Helper()
	for {
		evs, err := st.EventsSince(ctx, sid, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return tk, seq, gen
		}
		for _, e := range evs {
			if e.Type == "session.takeover" {
				tk = &takeoverRecord{}
				if err := json.Unmarshal(e.Data, tk); err != nil {
					t.Fatal(err)
				}
				seq, gen = e.Seq, e.Generation
			}
		}
		after = evs[len(evs)-1].Seq
	}
}

// lastStoredBefore returns the seq of the last event stored in the session's log before seq
// before (after: where to start looking).
func lastStoredBefore(t *testing.T, ctx context.Context, st store.Store, sid string, after, before uint64) uint64 {
	t.Helper()
	last := after
	for {
		evs, err := st.EventsSince(ctx, sid, last, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Seq >= before {
				return last
			}
			last = e.Seq
		}
		if len(evs) == 0 {
			return last
		}
	}
}

// spread formats the median and the slowest of ds.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %v max %v", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
