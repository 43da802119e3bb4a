package httpapi_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// host is one store directory that servers are started on, one after another, like a
// process that restarts; the fake model outlives them.
type host struct {
	dir  string
	cwd  string
	fake *openaitest.Server
	eng  func(*engine.Config)
}

func newHost(t *testing.T) *host {
	return &host{dir: t.TempDir(), cwd: t.TempDir(), fake: openaitest.New(t)}
}

// life is one server on the host's store.
type life struct {
	*target
	// crash stops the server as a killed process would leave the store: the store is closed
	// first, so nothing the server does on its way down reaches it.
	crash func()
	// stop is a clean shutdown.
	stop func()
}

func (h *host) start(t *testing.T) *life {
	t.Helper()
	st, err := badgerstore.Open(h.dir, badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: h.fake.URL(), MaxRetries: -1})},
		DefaultModel: "openai:fake-agent",
		Tools:        tool.NewRegistry(builtin.Defaults(dangerCheck)...),
		Cwd:          h.cwd,
		// One engine at a time on the store, and a crash that cannot release what it holds:
		// without leases the next life takes the session at once (with them, after their TTL).
		Leases: engine.LeaseConfig{Off: true},
	}
	if h.eng != nil {
		h.eng(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(eng, gateway.Options{})
	srv, err := httpapi.New(eng, gw, httpapi.Options{APIKey: testKey, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	down := func(crash bool) {
		if crash {
			st.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
		gw.Close()
		eng.Close()
		if !crash {
			if err := st.Close(); err != nil {
				t.Errorf("store close: %v", err)
			}
		}
	}
	var once sync.Once
	l := &life{target: &target{t: t, base: "http://" + ln.Addr().String(), fake: h.fake, eng: eng, cwd: h.cwd, srv: srv}}
	l.crash = func() { once.Do(func() { down(true) }) }
	l.stop = func() { once.Do(func() { down(false) }) }
	t.Cleanup(l.stop)
	return l
}

func runStatus(t *testing.T, tg *target, id string) map[string]any {
	t.Helper()
	r := tg.do(t, "GET", "/v1/runs/"+id, "", nil)
	if r.status != 200 {
		t.Fatalf("GET run %s: %d %s", id, r.status, r.body)
	}
	return decode(t, r)
}

// allEvents reads a run's stream to its end.
func allEvents(t *testing.T, tg *target, id, lastID string) []runFrame {
	t.Helper()
	rs := tg.events(t, id, lastID)
	if rs.res.StatusCode != 200 {
		t.Fatalf("events of %s: status %d", id, rs.res.StatusCode)
	}
	var out []runFrame
	for f, ok := rs.next(); ok; f, ok = rs.next() {
		out = append(out, f)
	}
	if len(rs.tail) == 0 || rs.tail[len(rs.tail)-1] != ": stream closed" {
		t.Fatalf("stream of %s did not end with its closing comment: %v", id, rs.tail)
	}
	return out
}

func eventNames(fs []runFrame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.data["event"].(string))
	}
	return out
}

func resolveBody(admission string, generation any) string {
	g := ""
	switch v := generation.(type) {
	case float64:
		g = strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		g = v
	}
	return `{"admission_id":"` + admission + `","execution_generation":` + g + `}`
}

// crashMidRun starts a run on session "s1" that holds the model mid-stream, queues a second
// run behind it, and crashes the server. It returns the two run ids and what GET reported for
// the first while it was running.
func crashMidRun(t *testing.T, h *host) (first, queued string, running map[string]any) {
	t.Helper()
	a := h.start(t)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	h.fake.Enqueue(openaitest.Response{Text: []string{"half", "way"}, FaultAt: 2, Gate: gate})
	first = startRun(t, a.target, `{"input":"long job","session_id":"s1"}`)
	<-gate.Reached()
	// The model may be called before run.started is published: the stream's event, not the
	// gate, says the run is running.
	a.events(t, first, "").until("run.started")
	running = runStatus(t, a.target, first)
	if running["status"] != "running" || running["execution_generation"] != float64(1) || !strings.HasPrefix(running["admission_id"].(string), "adm_") {
		t.Fatalf("running run %v", running)
	}
	queued = startRun(t, a.target, `{"input":"next job","session_id":"s1"}`)
	if st := runStatus(t, a.target, queued); st["status"] != "queued" || st["execution_generation"] != float64(0) {
		t.Fatalf("second run on a busy session %v", st)
	}
	a.crash()
	return first, queued, running
}

// The acceptance path: a run the server was executing when it died is restart-unknown after
// the restart and blocks its session's FIFO until resolved with its exact admission.
func TestRunRestartUnknownBlocksSessionUntilResolved(t *testing.T) {
	h := newHost(t)
	first, queued, before := crashMidRun(t, h)
	calls := len(h.fake.Requests())

	b := h.start(t)
	st := runStatus(t, b.target, first)
	if st["status"] != "unknown" || st["restart_unknown"] != true || st["admission_id"] != before["admission_id"] ||
		st["execution_generation"] != before["execution_generation"] || st["session_id"] != "s1" || st["error"] == "" {
		t.Fatalf("after restart %v (before %v)", st, before)
	}
	evs := allEvents(t, b.target, first, "")
	// The log is derived from the store: the run's start, what its turn stored before the
	// crash, and run.unknown.
	names := eventNames(evs)
	if len(names) < 2 || names[0] != "run.started" || names[len(names)-1] != "run.unknown" || evs[len(evs)-1].data["admission_id"] != before["admission_id"] {
		t.Fatalf("events of the unknown run %v", evs)
	}
	// An id beyond the log of a run that is over: the reader gets it from the start.
	if evs := allEvents(t, b.target, first, "40"); len(evs) != len(names) || evs[len(evs)-1].data["event"] != "run.unknown" {
		t.Fatalf("reconnect across the restart %v", evs)
	}

	// The FIFO holds: the run queued before the crash and one admitted now both wait.
	h.fake.Enqueue(openaitest.Text("next done"), openaitest.Text("third done"))
	third := startRun(t, b.target, `{"input":"third job","session_id":"s1"}`)
	for _, id := range []string{queued, third} {
		if st := runStatus(t, b.target, id); st["status"] != "queued" {
			t.Fatalf("run %s behind an unknown run: %v", id, st)
		}
	}

	// Refusals: nothing about them moves the FIFO.
	adm, gen := before["admission_id"].(string), before["execution_generation"].(float64)
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", resolveBody(adm, gen+1), nil), 409, "admission_mismatch")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", resolveBody("adm_other", gen), nil), 409, "admission_mismatch")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", resolveBody(adm, `"1"`), nil), 400, "invalid_type")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", resolveBody(adm, "1.5"), nil), 400, "invalid_type")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", `{"admission_id":"`+adm+`"}`, nil), 400, "missing_execution_generation")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", `{"execution_generation":1}`, nil), 400, "missing_admission_id")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", `not json`, nil), 400, "invalid_json")
	envelope(t, b.do(t, "POST", "/v1/runs/run_nope/resolve-unknown", resolveBody(adm, gen), nil), 404, "run_not_found")
	envelope(t, b.do(t, "POST", "/v1/runs/"+queued+"/resolve-unknown", resolveBody(adm, gen), nil), 409, "run_not_unknown")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/steer", `{"input":"hello?"}`, nil), 409, "run_not_accepting_steer")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/stop", ``, nil), 409, "run_not_active")
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/approval", `{"choice":"once"}`, nil), 409, "approval_not_pending")
	if st := runStatus(t, b.target, queued); st["status"] != "queued" {
		t.Fatalf("a refused resolution moved the queue: %v", st)
	}
	if n := len(h.fake.Requests()); n != calls {
		t.Fatalf("the model was called %d times while the session was blocked", n-calls)
	}

	r := b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", resolveBody(adm, gen), nil)
	res := decode(t, r)
	if r.status != 200 || res["status"] != "interrupted" || res["resolved"] != true || res["admission_id"] != adm {
		t.Fatalf("resolve %d %s", r.status, r.body)
	}
	st = runStatus(t, b.target, first)
	if st["status"] != "interrupted" || st["interrupted"] != true || st["completed"] != false || st["restart_unknown"] != nil {
		t.Fatalf("resolved run %v", st)
	}
	if evs := allEvents(t, b.target, first, strconv.Itoa(len(names))); len(evs) != 1 || evs[0].data["event"] != "run.interrupted" || evs[0].data["interrupted"] != true {
		t.Fatalf("events after the resolution %v", evs)
	}
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", resolveBody(adm, gen), nil), 409, "run_not_unknown")

	// The FIFO moves on, in admission order.
	for id, want := range map[string]string{queued: "next done", third: "third done"} {
		evs := allEvents(t, b.target, id, "")
		last := evs[len(evs)-1].data
		if last["event"] != "run.completed" || last["output"] != want {
			t.Fatalf("run %s: %v", id, eventNames(evs))
		}
	}
	reqs := h.fake.Requests()
	if len(reqs) != calls+2 || !strings.Contains(string(reqs[calls].Body), "next job") || !strings.Contains(string(reqs[calls+1].Body), "third job") {
		t.Fatalf("model calls after the resolution: %d", len(reqs)-calls)
	}
	if st := runStatus(t, b.target, queued); st["execution_generation"] != float64(1) {
		t.Fatalf("generation of a run started after a restart %v", st)
	}

	// Settled runs stay settled across another restart.
	b.stop()
	c := h.start(t)
	for id, want := range map[string]string{first: "interrupted", queued: "completed", third: "completed"} {
		if st := runStatus(t, c.target, id); st["status"] != want {
			t.Fatalf("run %s after a clean restart: %v", id, st)
		}
	}
	// Its log is derived again from the store: the same events under the same ids.
	if evs := allEvents(t, c.target, first, ""); len(evs) != len(names)+1 || evs[len(evs)-1].data["event"] != "run.interrupted" {
		t.Fatalf("events of a settled run after a restart %v", evs)
	}
}

// Two resolutions racing on the same unknown run: the compare-and-set lets exactly one win.
func TestRunResolveUnknownRace(t *testing.T) {
	h := newHost(t)
	first, queued, before := crashMidRun(t, h)
	h.fake.Enqueue(openaitest.Text("after"))
	b := h.start(t)
	body := resolveBody(before["admission_id"].(string), before["execution_generation"])
	const n = 8
	codes := make(chan int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes <- b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", body, nil).status
		}()
	}
	close(start)
	wg.Wait()
	close(codes)
	won, lost := 0, 0
	for c := range codes {
		switch c {
		case 200:
			won++
		case 409:
			lost++
		default:
			t.Fatalf("status %d", c)
		}
	}
	if won != 1 || lost != n-1 {
		t.Fatalf("%d resolutions won, %d lost", won, lost)
	}
	evs := allEvents(t, b.target, queued, "")
	if last := evs[len(evs)-1].data; last["event"] != "run.completed" || last["output"] != "after" {
		t.Fatalf("queued run %v", eventNames(evs))
	}
	if evs := allEvents(t, b.target, first, ""); len(evs) < 2 || evs[len(evs)-2].data["event"] != "run.unknown" || evs[len(evs)-1].data["event"] != "run.interrupted" || strings.Count(strings.Join(eventNames(evs), ","), "run.interrupted") != 1 {
		t.Fatalf("the unknown run settled more than once: %v", eventNames(evs))
	}
}

// A clean shutdown settles what it interrupts (the running run and the ones queued behind
// it) as interrupted, ends their streams with that event, and leaves nothing unknown.
func TestRunCleanShutdownSettlesEverything(t *testing.T) {
	h := newHost(t)
	a := h.start(t)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	h.fake.Enqueue(openaitest.Response{Text: []string{"half", "way"}, FaultAt: 2, Gate: gate})
	first := startRun(t, a.target, `{"input":"long job","session_id":"s1"}`)
	<-gate.Reached()
	queued := startRun(t, a.target, `{"input":"next job","session_id":"s1"}`)
	rs1, rs2 := a.events(t, first, ""), a.events(t, queued, "")
	rs1.until("run.started")
	rs2.until("run.queued")
	a.stop()
	for _, rs := range []*runStream{rs1, rs2} {
		f := rs.until("run.interrupted")
		if last := f[len(f)-1].data; last["interrupted"] != true || last["completed"] != false {
			t.Fatalf("terminal event %v", last)
		}
		if _, ok := rs.next(); ok || rs.tail[len(rs.tail)-1] != ": stream closed" {
			t.Fatalf("stream went on after the terminal event: %v", rs.tail)
		}
	}
	calls := len(h.fake.Requests())
	b := h.start(t)
	for _, id := range []string{first, queued} {
		if st := runStatus(t, b.target, id); st["status"] != "interrupted" || st["interrupted"] != true {
			t.Fatalf("run %s after a clean shutdown: %v", id, st)
		}
	}
	envelope(t, b.do(t, "POST", "/v1/runs/"+first+"/resolve-unknown", resolveBody("x", 1.0), nil), 409, "run_not_unknown")
	// The session is free: a new run starts at once.
	h.fake.Enqueue(openaitest.Text("fresh"))
	id := startRun(t, b.target, `{"input":"again","session_id":"s1"}`)
	if f := b.events(t, id, "").until("run.completed"); f[len(f)-1].data["output"] != "fresh" {
		t.Fatalf("%v", f)
	}
	if n := len(h.fake.Requests()); n != calls+1 {
		t.Fatalf("%d model calls after the restart, want 1", n-calls)
	}
}

// A run admitted but not started when the process died is still admitted: it runs after the
// restart, once (its generation becomes 1).
func TestRunQueuedBeforeCrashRunsAfterRestart(t *testing.T) {
	h := newHost(t)
	a := h.start(t)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	// A gateway-style turn holds the session, so the run stays queued.
	sess, err := a.eng.Create(t.Context(), engine.CreateOptions{ID: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	h.fake.Enqueue(openaitest.Response{Text: []string{"x"}, FaultAt: 1, Gate: gate})
	if adm, err := sess.Submit(t.Context(), engine.Prompt{Text: "busy"}); err != nil || adm.Status != engine.AdmitStarted {
		t.Fatalf("%+v %v", adm, err)
	}
	<-gate.Reached()
	id := startRun(t, a.target, `{"input":"wait for it","session_id":"s2"}`)
	if st := runStatus(t, a.target, id); st["status"] != "queued" {
		t.Fatalf("%v", st)
	}
	a.crash()
	h.fake.Enqueue(openaitest.Text("ran"))
	b := h.start(t)
	evs := allEvents(t, b.target, id, "")
	if names := eventNames(evs); names[0] != "run.started" || names[len(names)-1] != "run.completed" || evs[len(evs)-1].data["output"] != "ran" {
		t.Fatalf("%v", names)
	}
	if st := runStatus(t, b.target, id); st["execution_generation"] != float64(1) {
		t.Fatalf("%v", st)
	}
}

// Idempotency-Key replays come from the store: they hold across a restart, per key and body.
func TestRunIdempotencyAcrossRestart(t *testing.T) {
	h := newHost(t)
	a := h.start(t)
	h.fake.Enqueue(openaitest.Text("once"))
	body, k := `{"input":"do it once"}`, map[string]string{"Idempotency-Key": "restart-key"}
	r1 := a.do(t, "POST", "/v1/runs", body, k)
	id := decode(t, r1)["run_id"].(string)
	a.events(t, id, "").until("run.completed")
	a.crash()

	b := h.start(t)
	r2 := b.do(t, "POST", "/v1/runs", body, k)
	m := decode(t, r2)
	if r2.status != 202 || m["run_id"] != id || m["replayed"] != true || m["status"] != "completed" || r2.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("%d %s %v", r2.status, r2.body, r2.header)
	}
	envelope(t, b.do(t, "POST", "/v1/runs", `{"input":"another thing"}`, k), 409, "idempotency_key_conflict")
	// The same body with another session key is another request.
	envelope(t, b.do(t, "POST", "/v1/runs", body, map[string]string{"Idempotency-Key": "restart-key", "X-Hermes-Session-Key": "agent:other"}), 409, "idempotency_key_conflict")
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	if st := runStatus(t, b.target, id); st["output"] != "once" {
		t.Fatalf("%v", st)
	}
}

// A queued run can be stopped before it starts: it is cancelled and never reaches the model.
func TestRunStopWhileQueued(t *testing.T) {
	h := newHost(t)
	a := h.start(t)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	h.fake.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Gate: gate}, openaitest.Text("third"))
	first := startRun(t, a.target, `{"input":"hold","session_id":"s3"}`)
	<-gate.Reached()
	second := startRun(t, a.target, `{"input":"never","session_id":"s3"}`)
	third := startRun(t, a.target, `{"input":"after","session_id":"s3"}`)
	st := decode(t, a.do(t, "POST", "/v1/runs/"+second+"/stop", "", nil))
	if st["status"] != "cancelled" || st["interrupted"] != true {
		t.Fatalf("stop while queued %v", st)
	}
	envelope(t, a.do(t, "POST", "/v1/runs/"+second+"/steer", `{"input":"x"}`, nil), 409, "run_not_accepting_steer")
	gate.Release()
	a.events(t, first, "").until("run.completed")
	if f := a.events(t, third, "").until("run.completed"); f[len(f)-1].data["output"] != "third" {
		t.Fatalf("%v", f)
	}
	for _, rq := range h.fake.Requests() {
		if strings.Contains(string(rq.Body), "never") {
			t.Fatal("a run stopped while queued reached the model")
		}
	}
	if evs := allEvents(t, a.target, second, ""); eventNames(evs)[len(evs)-1] != "run.cancelled" {
		t.Fatalf("%v", eventNames(evs))
	}
}

// A steer that arrives after the model's final answer has no tool boundary to land at: it
// comes back as pending_steer on the terminal event and the status.
func TestRunSteerAfterFinalAnswerIsPending(t *testing.T) {
	tg := newTarget(t, nil)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	tg.fake.Enqueue(openaitest.Response{Text: []string{"final ", "answer"}, FaultAt: 2, Gate: gate})
	id := startRun(t, tg, `{"input":"answer me"}`)
	<-gate.Reached()
	// The model being called does not mean the run was published as running yet: steer is
	// accepted from run.started on.
	tg.events(t, id, "").until("run.started")
	if s := decode(t, tg.do(t, "POST", "/v1/runs/"+id+"/steer", `{"input":"also mention tests"}`, nil)); s["accepted"] != true {
		t.Fatalf("steer %v", s)
	}
	gate.Release()
	f := tg.events(t, id, "").until("run.completed")
	last := f[len(f)-1].data
	if last["pending_steer"] != "also mention tests" || last["completed"] != true || last["output"] != "final answer" {
		t.Fatalf("run.completed %v", last)
	}
	if st := runStatus(t, tg, id); st["pending_steer"] != "also mention tests" {
		t.Fatalf("status %v", st)
	}
	envelope(t, tg.do(t, "POST", "/v1/runs/"+id+"/steer", `{"input":"late"}`, nil), 409, "run_not_accepting_steer")
}

// A turn that runs out of iterations fails with the reason, never completed.
func TestRunIterationBudgetFails(t *testing.T) {
	h := newHost(t)
	h.eng = func(c *engine.Config) { c.MaxIterations = 1 }
	a := h.start(t)
	h.fake.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo one"}`}}), openaitest.Text("summary"))
	id := startRun(t, a.target, `{"input":"loop"}`)
	f := a.events(t, id, "").until("run.failed")
	last := f[len(f)-1].data
	if reason, _ := last["turn_exit_reason"].(string); !strings.HasPrefix(reason, "max_iterations_reached(1/1)") || last["completed"] != false || last["error"] == "" {
		t.Fatalf("run.failed %v", last)
	}
	if st := runStatus(t, a.target, id); st["status"] != "failed" || st["turn_exit_reason"] != last["turn_exit_reason"] {
		t.Fatalf("status %v", st)
	}
}

// The capabilities advertise resolve-unknown and durable Idempotency-Keys.
func TestRunCapabilitiesAdvertiseResolution(t *testing.T) {
	tg := newTarget(t, nil)
	caps := decode(t, tg.do(t, "GET", "/v1/capabilities", "", nil))
	feats := caps["features"].(map[string]any)
	idem, _ := feats["run_idempotency"].(map[string]any)
	if feats["run_unknown_resolution"] != true || idem["durable"] != true || idem["retention_seconds"] != float64(86400) {
		t.Fatalf("features %v", feats)
	}
	eps := caps["endpoints"].(map[string]any)
	if ep, _ := eps["run_resolve"].(map[string]any); ep["path"] != "/v1/runs/{run_id}/resolve-unknown" || ep["method"] != "POST" {
		t.Fatalf("endpoints %v", eps)
	}
}
