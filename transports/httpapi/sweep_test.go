package httpapi_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// releaseSoon makes every idle API session eligible for release at the next sweep.
func releaseSoon(o *httpapi.Options) { o.SessionIdleRelease = time.Nanosecond }

func (tg *target) live(id string) bool {
	_, ok := tg.eng.Live(id)
	return ok
}

func TestSweepReleasesChatSessionAndNextRequestContinues(t *testing.T) {
	tg := newTarget(t, releaseSoon)
	tg.fake.Enqueue(openaitest.Text("answer one"), openaitest.Text("answer two"))
	hdr := map[string]string{httpapi.HeaderSessionID: "swept-chat"}
	chat := func(text string) resp {
		t.Helper()
		r := tg.do(t, "POST", "/v1/chat/completions", `{"model":"openai:fake-agent","messages":[{"role":"user","content":"`+text+`"}]}`, hdr)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return r
	}
	chat("question one")
	other, err := tg.eng.Create(context.Background(), engine.CreateOptions{Source: "tui"})
	if err != nil {
		t.Fatal(err)
	}

	tg.srv.SweepIdle()
	if tg.live("swept-chat") {
		t.Fatal("the idle chat session is still live after a sweep")
	}
	if !tg.live(other.ID()) {
		t.Fatal("the sweep released a session another surface created")
	}

	if r := chat("question two"); !bytes.Contains(r.body, []byte("answer two")) {
		t.Fatalf("second answer: %s", r.body)
	}
	reqs := tg.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests: %d", len(reqs))
	}
	for _, want := range []string{"question one", "answer one", "question two"} {
		if !bytes.Contains(reqs[1].Body, []byte(want)) {
			t.Fatalf("the continued conversation lacks %q: %s", want, reqs[1].Body)
		}
	}
}

func TestSweepKeepsRunningAndQueuedRuns(t *testing.T) {
	tg := newTarget(t, releaseSoon)
	g := openaitest.NewGate()
	tg.fake.Enqueue(openaitest.Response{Text: []string{"first ", "run"}, FaultAt: 2, Gate: g}, openaitest.Text("second run"), openaitest.Text("third run"))
	first := startRun(t, tg, `{"input":"one","session_id":"swept-runs"}`)
	second := startRun(t, tg, `{"input":"two","session_id":"swept-runs"}`)
	<-g.Reached()

	tg.srv.SweepIdle()
	if !tg.live("swept-runs") {
		t.Fatal("a session with a running run was released")
	}
	g.Release()
	tg.events(t, first, "").until("run.completed")
	tg.events(t, second, "").until("run.completed")

	// Settled: the session goes at a sweep once the FIFO's worker has let go of the last run
	// (it does so just after publishing the terminal event), and a later run continues it.
	for deadline := time.Now().Add(10 * time.Second); tg.srv.SweepIdle() == 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the idle session is still live after its runs settled")
		}
	}
	if tg.live("swept-runs") {
		t.Fatal("a sweep released something, but not the idle session")
	}
	third := startRun(t, tg, `{"input":"three","session_id":"swept-runs"}`)
	tg.events(t, third, "").until("run.completed")
	reqs := tg.fake.Requests()
	for _, want := range []string{"one", "first run", "two", "second run", "three"} {
		if !bytes.Contains(reqs[2].Body, []byte(`"`+want+`"`)) {
			t.Fatalf("the third run's model request lacks %q: %s", want, reqs[2].Body)
		}
	}
}

func TestSweepKeepsResponsesChain(t *testing.T) {
	tg := newTarget(t, releaseSoon)
	tg.fake.Enqueue(openaitest.Text("Paris"), openaitest.Text("about 2 million"))
	r := tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "capital of France?"}), nil)
	first := decode(t, r)
	sid := r.header.Get(httpapi.HeaderSessionID)
	if r.status != 200 || sid == "" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	tg.srv.SweepIdle()
	if tg.live(sid) {
		t.Fatal("the responses session is still live after a sweep")
	}
	r = tg.do(t, "POST", "/v1/responses", respBody(t, map[string]any{"input": "population?", "previous_response_id": first["id"]}), nil)
	if second := decode(t, r); r.status != 200 || second["output_text"] != "about 2 million" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if b := tg.fake.Requests()[1].Body; !bytes.Contains(b, []byte("capital of France?")) || !bytes.Contains(b, []byte("Paris")) {
		t.Fatalf("the chain lost its history across the release: %s", b)
	}
}

func TestSweepDisabled(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) { o.SessionIdleRelease = -1 })
	tg.fake.Enqueue(openaitest.Text("kept"))
	hdr := map[string]string{httpapi.HeaderSessionID: "never-swept"}
	if r := tg.do(t, "POST", "/v1/chat/completions", `{"model":"openai:fake-agent","messages":[{"role":"user","content":"hi"}]}`, hdr); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if n := tg.srv.SweepIdle(); n != 0 || !tg.live("never-swept") {
		t.Fatalf("a disabled sweep released %d sessions", n)
	}
}
