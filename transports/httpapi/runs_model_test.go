package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A listed model on POST /v1/runs switches the session's model when the run starts, as chat
// completions do; hermes-agent (or no model) keeps the session's current one.
func TestRunModelSwitchesSession(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("one"), openaitest.Text("two"), openaitest.Text("three"))
	steps := []struct{ body, wantCall, wantRun string }{
		{`{"input":"a","session_id":"sm"}`, "fake-agent", "openai:fake-agent"},
		{`{"input":"b","session_id":"sm","model":"openai:other"}`, "other", "openai:other"},
		{`{"input":"c","session_id":"sm","model":"hermes-agent"}`, "other", "openai:other"},
	}
	for i, st := range steps {
		id := startRun(t, tg, st.body)
		tg.events(t, id, "").until("run.completed")
		var call struct {
			Model string `json:"model"`
		}
		reqs := tg.fake.Requests()
		if len(reqs) != i+1 || json.Unmarshal(reqs[i].Body, &call) != nil || call.Model != st.wantCall {
			t.Fatalf("step %d: %d model calls, the last for %q; want %q", i, len(reqs), call.Model, st.wantCall)
		}
		if got := runStatus(t, tg, id); got["model"] != st.wantRun {
			t.Fatalf("step %d: the run reports model %v, want %s", i, got["model"], st.wantRun)
		}
	}
	r := tg.do(t, "GET", "/api/sessions/sm", "", nil)
	var sess struct {
		Session struct {
			Model string `json:"model"`
		} `json:"session"`
	}
	if err := json.Unmarshal(r.body, &sess); r.status != 200 || err != nil || sess.Session.Model != "openai:other" {
		t.Fatalf("session after the switch: %d %s", r.status, r.body)
	}
}
