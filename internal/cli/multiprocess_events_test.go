package cli

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// TestEventsAcrossGatewayProcesses: a turn runs in one `hermes gateway` process; a client of a
// second gateway process on the same home attaches to the session mid-turn with
// session.events.since and receives the rest of the turn live, every event under the seq the
// first process's client saw it; after the turn, session.events.since from the start through
// the second process replays what the first process's client saw.
func TestEventsAcrossGatewayProcesses(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	srv := openaitest.New(t)
	gate := openaitest.NewGate()
	srv.Enqueue(openaitest.Response{Text: []string{"streamed ", "across ", "two ", "processes"}, FaultAt: 3, Gate: gate})
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=k"}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	call := func(c *gwclient.Client, method string, params any) map[string]any {
		t.Helper()
		var out map[string]any
		if err := c.CallInto(ctx, method, params, &out); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return out
	}
	a, b := gatewayProcess(t, cwd, env), gatewayProcess(t, cwd, env)
	created := call(a, "session.create", map[string]any{})
	sid, stored := created["session_id"].(string), created["stored_session_id"].(string)
	if r := call(a, "prompt.submit", map[string]any{"session_id": sid, "text": "hi"}); r["status"] != "streaming" {
		t.Fatalf("prompt: %v", r)
	}
	select {
	case <-gate.Reached():
	case <-ctx.Done():
		t.Fatal("the turn never reached the model")
	}
	// Mid-turn (the session is stored with its first prompt): some of the turn is stored, the
	// rest is still to come.
	bsid := call(b, "session.resume", map[string]any{"session_id": stored})["session_id"].(string)
	attach := call(b, "session.events.since", map[string]any{"session_id": bsid, "last_seen": 0})
	gate.Release()

	_, ia, err := a.WaitType(ctx, 0, sid, "message.complete")
	if err != nil {
		t.Fatalf("the turn in the first process: %v", err)
	}
	_, ib, err := b.WaitType(ctx, 0, bsid, "message.complete")
	if err != nil {
		t.Fatalf("the turn through the second process: %v", err)
	}
	bySeq := map[uint64]gwclient.Event{}
	first := ^uint64(0)
	for _, e := range a.Events()[:ia+1] {
		if e.SessionID == sid && e.Seq > 0 {
			bySeq[e.Seq] = e
			first = min(first, e.Seq)
		}
	}
	var text strings.Builder
	live := 0
	for _, e := range b.Events()[:ib+1] {
		if e.SessionID != bsid || e.Seq < first {
			continue
		}
		want, ok := bySeq[e.Seq]
		// The turn's own events carry the same payload; a session.info is rendered with what
		// the rendering process knows of the session, so only its type is compared.
		samePayload := string(want.Payload) == string(e.Payload) || !strings.HasPrefix(e.Type, "message.")
		if !ok || want.Type != e.Type || !samePayload {
			t.Fatalf("seq %d through the second process is %s %s, the first process's client saw %s %s",
				e.Seq, e.Type, e.Payload, want.Type, want.Payload)
		}
		if e.Type == "message.delta" {
			var d struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(e.Payload, &d)
			text.WriteString(d.Text)
		}
		live++
	}
	replayed := attach["events"].([]any)
	if live == 0 {
		t.Fatalf("no live event through the second process (replay at attach: %d events)", len(replayed))
	}
	if got := text.String(); !strings.HasSuffix("streamed across two processes", got) || got == "" {
		t.Fatalf("deltas through the second process spell %q", got)
	}

	// After the turn: the whole turn from the start, through the second process.
	since := call(b, "session.events.since", map[string]any{"session_id": bsid, "last_seen": 0})
	evs := since["events"].([]any)
	var lastSeq uint64
	for _, raw := range evs {
		lastSeq = max(lastSeq, uint64(raw.(map[string]any)["seq"].(float64)))
	}
	// The first process's client sees the events after message.complete too (the session idle).
	if _, _, err := a.WaitEvent(ctx, 0, func(e gwclient.Event) bool { return e.SessionID == sid && e.Seq == lastSeq }); err != nil {
		t.Fatalf("the first process's client never saw seq %d: %v", lastSeq, err)
	}
	for _, e := range a.Events() {
		if e.SessionID == sid && e.Seq > 0 {
			bySeq[e.Seq] = e
		}
	}
	var complete bool
	for _, raw := range evs {
		m := raw.(map[string]any)
		seq := uint64(m["seq"].(float64))
		if seq < first {
			continue // before the first process's client attached (the session's creation)
		}
		want, ok := bySeq[seq]
		if !ok || want.Type != m["type"] {
			t.Fatalf("replayed seq %d is %v, the first process's client saw %s", seq, m["type"], want.Type)
		}
		complete = complete || m["type"] == "message.complete"
	}
	if !complete || since["truncated"] == true {
		t.Fatalf("events.since after the turn: %d events, truncated %v, message.complete %v", len(evs), since["truncated"], complete)
	}
	if got := len(srv.Requests()); got != 1 {
		t.Fatalf("model calls %d, want 1 (the turn runs in one process)", got)
	}
}

// gatewayProcess starts `hermes gateway` over stdio with env and returns its client, closed
// (and the process stopped) when the test ends.
func gatewayProcess(t *testing.T, cwd string, env []string) *gwclient.Client {
	t.Helper()
	cmd := hermesCmd(t, cwd, env, "gateway")
	cmd.Stderr = os.Stderr
	c, err := gwclient.Stdio(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
