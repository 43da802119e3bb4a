package httpapi_test

import (
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// Reading sessions (the list a UI polls, one session's resource) is not activity: it must not
// keep an idle session from being released.
func TestSessionReadsDoNotKeepSessionsLive(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) { o.SessionIdleRelease = -1 }) // sweeps by hand only
	tg.fake.Enqueue(openaitest.Text("answer"))
	r := tg.do(t, "POST", "/v1/chat/completions", `{"model":"openai:fake-agent","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{httpapi.HeaderSessionID: "read-only-traffic"})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// The session's last use is the turn. The reads below come later; a release that demands
	// less idleness than the time since the turn must still take it. (Only a stall longer than
	// the margin between the two durations could let an unfixed server pass; nothing can make
	// a fixed one fail.)
	const sinceTurn, idleFor = 400 * time.Millisecond, 200 * time.Millisecond
	time.Sleep(sinceTurn)
	for _, path := range []string{"/api/sessions", "/api/sessions/read-only-traffic"} {
		if r := tg.do(t, "GET", path, "", nil); r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	if n := tg.eng.ReleaseIdle(idleFor, nil); n != 1 || tg.live("read-only-traffic") {
		t.Fatalf("released %d; the session idle since its turn is still live: reads counted as activity", n)
	}
}
