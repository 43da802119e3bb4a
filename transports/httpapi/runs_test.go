package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

type runFrame struct {
	id   int
	data map[string]any
}

// runStream reads a run event stream frame by frame.
type runStream struct {
	t    *testing.T
	res  *http.Response
	br   *bufio.Reader
	tail []string // comment lines seen
}

func (tg *target) events(t *testing.T, runID, lastID string) *runStream {
	t.Helper()
	req, _ := http.NewRequest("GET", tg.base+"/v1/runs/"+runID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return &runStream{t: t, res: res, br: bufio.NewReader(res.Body)}
}

// next returns the next frame with data, or ok=false at the end of the stream.
func (rs *runStream) next() (runFrame, bool) {
	rs.t.Helper()
	var f runFrame
	has := false
	for {
		line, err := rs.br.ReadString('\n')
		if err == io.EOF && line == "" {
			return f, false
		}
		if err != nil {
			rs.t.Fatal(err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if has {
				return f, true
			}
		case strings.HasPrefix(line, ":"):
			rs.tail = append(rs.tail, line)
		case strings.HasPrefix(line, "retry: "):
		case strings.HasPrefix(line, "id: "):
			f.id, _ = strconv.Atoi(strings.TrimPrefix(line, "id: "))
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f.data); err != nil {
				rs.t.Fatalf("%v: %q", err, line)
			}
			has = true
		default:
			rs.t.Fatalf("unexpected line %q", line)
		}
	}
}

func (rs *runStream) until(name string) []runFrame {
	rs.t.Helper()
	var out []runFrame
	for {
		f, ok := rs.next()
		if !ok {
			rs.t.Fatalf("stream ended before %s: %v", name, out)
		}
		out = append(out, f)
		if f.data["event"] == name {
			return out
		}
	}
}

func startRun(t *testing.T, tg *target, body string) string {
	t.Helper()
	r := tg.do(t, "POST", "/v1/runs", body, nil)
	m := decode(t, r)
	id, _ := m["run_id"].(string)
	if r.status != 202 || m["status"] != "started" || !strings.HasPrefix(id, "run_") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	return id
}

func TestRunApprovalAndReplay(t *testing.T) {
	tg := newTarget(t, nil)
	if err := os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	tg.fake.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}),
		openaitest.Text("kept it"),
	)
	id := startRun(t, tg, `{"input":"clean up"}`)
	rs := tg.events(t, id, "")
	if ct := rs.res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content-type %q", ct)
	}
	frames := rs.until("approval.request")
	req := frames[len(frames)-1].data
	if req["command"] != "rm -r build" || req["request_id"] == "" {
		t.Fatalf("approval.request %v", req)
	}
	st := decode(t, tg.do(t, "GET", "/v1/runs/"+id, "", nil))
	if st["status"] != "waiting_for_approval" || st["approval"].(map[string]any)["request_id"] != req["request_id"] {
		t.Fatalf("status %v", st)
	}
	envelope(t, tg.do(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"maybe"}`, nil), 400, "invalid_approval_choice")
	a := decode(t, tg.do(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`, nil))
	if a["resolved"] != float64(1) || a["choice"] != "deny" {
		t.Fatalf("approval %v", a)
	}
	frames = append(frames, rs.until("run.completed")...)
	if _, ok := rs.next(); ok || len(rs.tail) == 0 || rs.tail[len(rs.tail)-1] != ": stream closed" {
		t.Fatalf("stream did not close after the terminal event: %v", rs.tail)
	}
	for i, f := range frames {
		if f.id != i+1 || f.data["sequence_number"] != float64(i+1) || f.data["run_id"] != id {
			t.Fatalf("frame %d: id %d %v", i, f.id, f.data)
		}
	}
	done := frames[len(frames)-1].data
	if done["output"] != "kept it" || done["completed"] != true || done["partial"] != false {
		t.Fatalf("run.completed %v", done)
	}
	if _, err := os.Stat(filepath.Join(tg.cwd, "build")); err != nil {
		t.Fatalf("denied command ran: %v", err)
	}
	st = decode(t, tg.do(t, "GET", "/v1/runs/"+id, "", nil))
	if st["status"] != "completed" || st["output"] != "kept it" {
		t.Fatalf("status %v", st)
	}
	// Replay after id 2: the same frames from 3 on.
	rs2 := tg.events(t, id, "2")
	var replay []runFrame
	for f, ok := rs2.next(); ok; f, ok = rs2.next() {
		replay = append(replay, f)
	}
	if len(replay) != len(frames)-2 || replay[0].id != 3 || replay[len(replay)-1].data["event"] != "run.completed" {
		t.Fatalf("replay %v", replay)
	}
	for i, f := range replay {
		want, _ := json.Marshal(frames[i+2].data)
		got, _ := json.Marshal(f.data)
		if f.id != frames[i+2].id || string(got) != string(want) {
			t.Fatalf("replayed frame %d: %s, want %s", f.id, got, want)
		}
	}
	// Nothing left to replay on a finished run: 204 stops an EventSource.
	if rs3 := tg.events(t, id, strconv.Itoa(len(frames))); rs3.res.StatusCode != 204 {
		t.Fatalf("status %d", rs3.res.StatusCode)
	}
	envelope(t, tg.do(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"once"}`, nil), 409, "approval_not_pending")
	envelope(t, tg.do(t, "POST", "/v1/runs/"+id+"/steer", `{"input":"more"}`, nil), 409, "run_not_accepting_steer")
	if st := decode(t, tg.do(t, "POST", "/v1/runs/"+id+"/stop", "", nil)); st["status"] != "completed" {
		t.Fatalf("stop on a finished run: %v", st)
	}
}

func TestRunSteerAndStop(t *testing.T) {
	tg := newTarget(t, nil)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	tg.fake.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Gate: gate})
	id := startRun(t, tg, `{"input":[{"role":"user","content":"earlier"},{"role":"assistant","content":"ok"},{"role":"user","content":"go"}]}`)
	<-gate.Reached()
	tg.events(t, id, "").until("run.started") // steer is accepted from run.started on
	s := decode(t, tg.do(t, "POST", "/v1/runs/"+id+"/steer", `{"text":"focus on tests"}`, nil))
	if s["accepted"] != true {
		t.Fatalf("steer %v", s)
	}
	envelope(t, tg.do(t, "POST", "/v1/runs/"+id+"/steer", `{"text":"  "}`, nil), 400, "invalid_steer_input")
	if st := decode(t, tg.do(t, "POST", "/v1/runs/"+id+"/stop", "", nil)); st["status"] != "stopping" {
		t.Fatalf("stop %v", st)
	}
	frames := tg.events(t, id, "").until("run.cancelled")
	names := []string{}
	for _, f := range frames {
		names = append(names, f.data["event"].(string))
	}
	// The steer never reached a tool boundary: the log has no run.steered, and the stopped
	// run hands the steer back. A stop is a status, not an event: the log shows its outcome.
	if names[0] != "run.started" || strings.Contains(strings.Join(names, ","), "run.steered") || strings.Contains(strings.Join(names, ","), "run.stopping") {
		t.Fatalf("events %v", names)
	}
	last := frames[len(frames)-1].data
	if last["interrupted"] != true || last["completed"] != false || last["pending_steer"] != "focus on tests" {
		t.Fatalf("run.cancelled %v", last)
	}
	if st := decode(t, tg.do(t, "GET", "/v1/runs/"+id, "", nil)); st["status"] != "cancelled" {
		t.Fatalf("status %v", st)
	}
	if b := tg.fake.Requests()[0].Body; !strings.Contains(string(b), "earlier") {
		t.Fatalf("history missing: %s", b)
	}
}

func TestRunErrors(t *testing.T) {
	tg := newTarget(t, nil)
	envelope(t, tg.do(t, "GET", "/v1/runs/run_nope", "", nil), 404, "run_not_found")
	envelope(t, tg.do(t, "GET", "/v1/runs/run_nope/events", "", nil), 404, "run_not_found")
	envelope(t, tg.do(t, "POST", "/v1/runs/run_nope/stop", "", nil), 404, "run_not_found")
	envelope(t, tg.do(t, "POST", "/v1/runs", `{}`, nil), 400, "missing_input")
	envelope(t, tg.do(t, "POST", "/v1/runs", `{"input":"x","session_id":"a/b"}`, nil), 400, "invalid_session_id")
	if len(tg.fake.Requests()) != 0 {
		t.Fatal("a refused run reached the model")
	}
}

func TestConcurrencyCap(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) { o.MaxConcurrent = 1 })
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	tg.fake.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Gate: gate}, openaitest.Text("later"))
	id := startRun(t, tg, `{"input":"hold"}`)
	<-gate.Reached()
	r := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "hi"), nil)
	e := envelope(t, r, 429, "rate_limit_exceeded")
	if e["type"] != "rate_limit_error" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("%v %v", e, r.header)
	}
	gate.Release()
	tg.events(t, id, "").until("run.completed")
	// The slot is given back before the terminal event is published.
	if r := tg.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "hi"), nil); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestRunIdempotencyKey(t *testing.T) {
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("once"))
	body := `{"input":"do it once"}`
	k := map[string]string{"Idempotency-Key": "key-1"}
	r1 := tg.do(t, "POST", "/v1/runs", body, k)
	r2 := tg.do(t, "POST", "/v1/runs", body, k)
	a, b := decode(t, r1), decode(t, r2)
	if r1.status != 202 || r2.status != 202 || a["run_id"] != b["run_id"] || a["replayed"] != false || b["replayed"] != true || r2.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("%s / %s %v", r1.body, r2.body, r2.header)
	}
	tg.events(t, a["run_id"].(string), "").until("run.completed")
	if n := len(tg.fake.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	envelope(t, tg.do(t, "POST", "/v1/runs", `{"input":"something else"}`, k), 409, "idempotency_key_conflict")
	envelope(t, tg.do(t, "POST", "/v1/runs", body, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}), 400, "invalid_idempotency_key")
}

// Shutdown interrupts a running run and an open event stream instead of waiting for them.
func TestShutdownInterruptsRuns(t *testing.T) {
	tg := newTarget(t, nil)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	tg.fake.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Gate: gate})
	id := startRun(t, tg, `{"input":"hold"}`)
	<-gate.Reached()
	rs := tg.events(t, id, "")
	rs.until("run.started")
	sess, ok := tg.eng.Live(id)
	if !ok {
		t.Fatal("run session not live")
	}
	if err := tg.shutdown(); err != nil {
		t.Fatal(err)
	}
	for ev, err := range sess.Events(t.Context(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := ev.Data.(engine.Outcome); ok {
			if !o.Interrupted {
				t.Fatalf("outcome %+v", o)
			}
			break
		}
	}
}
