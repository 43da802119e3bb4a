package gateway_test

import (
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A steer acknowledged while the model streams, then an interrupt before any tool boundary:
// the steer comes back as pending_steer on the interrupted message.complete instead of being
// lost.
func TestGatewaySteerBeforeStopIsPending(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		g := openaitest.NewGate()
		tg.srv.Enqueue(openaitest.Response{Text: []string{"working ", "on it"}, FaultAt: 1, Gate: g})
		from := len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "long job"})
		<-g.Reached()
		if r := call(t, c, "session.steer", map[string]any{"session_id": sid, "text": "use the staging DB"}); r["status"] != "queued" {
			t.Fatalf("steer: %v", r)
		}
		call(t, c, "session.interrupt", map[string]any{"session_id": sid})
		g.Release()
		e, _ := waitType(t, c, from, sid, "message.complete")
		p := payload(t, e)
		if p["status"] != "interrupted" || p["pending_steer"] != "use the staging DB" {
			t.Fatalf("message.complete: %v", p)
		}
	})
}
