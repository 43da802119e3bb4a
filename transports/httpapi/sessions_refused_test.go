package httpapi_test

import (
	"bytes"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// A session chat refused because every turn slot is taken leaves nothing behind: its
// system_message must not reach the transcript (a retry would add it again).
func TestSessionChatRefusedLeavesNoSystemRow(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) { o.MaxConcurrent = 1 })
	g := openaitest.NewGate()
	tg.fake.Enqueue(openaitest.Response{Text: []string{"slow ", "answer"}, FaultAt: 2, Gate: g})
	for _, id := range []string{"slot-holder", "refused"} {
		if r := tg.do(t, "POST", "/api/sessions", `{"id":"`+id+`"}`, nil); r.status != 201 {
			t.Fatalf("create %s: %d %s", id, r.status, r.body)
		}
	}
	run := startRun(t, tg, `{"input":"take the slot","session_id":"slot-holder"}`)
	<-g.Reached()

	r := tg.do(t, "POST", "/api/sessions/refused/chat", `{"input":"hello","system_message":"answer in French"}`, nil)
	if r.status != 429 {
		t.Fatalf("chat with every slot taken: %d %s", r.status, r.body)
	}
	g.Release()
	tg.events(t, run, "").until("run.completed")

	m := tg.do(t, "GET", "/api/sessions/refused/messages", "", nil)
	if m.status != 200 {
		t.Fatalf("messages: %d %s", m.status, m.body)
	}
	if bytes.Contains(m.body, []byte("answer in French")) {
		t.Fatalf("a refused request left its system message in the transcript: %s", m.body)
	}
}
