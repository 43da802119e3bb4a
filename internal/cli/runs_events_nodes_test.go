//go:build unix

package cli

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// sseFrame is one event of a run's stream: its id and its data.
type sseFrame struct {
	id   int
	data map[string]any
}

// runStreamFrom opens a run's event stream on p after Last-Event-ID after ("": from the start)
// and sends its frames on the returned channel until the stream ends; the test closes it.
func runStreamFrom(t *testing.T, p *restartProc, runID, after string) (<-chan sseFrame, func()) {
	t.Helper()
	req, _ := http.NewRequest("GET", p.base+"/v1/runs/"+runID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		res.Body.Close()
		t.Fatalf("events of %s: %d", runID, res.StatusCode)
	}
	out := make(chan sseFrame, 256)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				f.id, _ = strconv.Atoi(v)
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				_ = json.Unmarshal([]byte(v), &f.data)
				out <- f
				f = sseFrame{}
			}
		}
	}()
	return out, func() { res.Body.Close() }
}

// until reads frames until one named name, and returns them all.
func until(t *testing.T, frames <-chan sseFrame, name string) []sseFrame {
	t.Helper()
	var got []sseFrame
	timeout := time.After(60 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("the stream ended before %s: %v", name, names(got))
			}
			got = append(got, f)
			if f.data["event"] == name {
				return got
			}
		case <-timeout:
			t.Fatalf("no %s: %v", name, names(got))
		}
	}
}

func names(fs []sseFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i], _ = f.data["event"].(string)
	}
	return out
}

// A run executing in one `hermes serve` is followed, steered and stopped through another on
// the same home: the second's event stream has the first's events (deltas, tool events,
// the steer as the turn took it) under the same ids, a reader that moves from one to the other
// with Last-Event-ID gets exactly the rest, and a steer and a stop sent to the second reach
// the turn in the first.
func TestRunEventsSteerStopThroughAnotherServe(t *testing.T) {
	t.Setenv(envStoreProcess, "on")
	home, cwd := t.TempDir(), t.TempDir()
	ready := filepath.Join(t.TempDir(), "ready")
	model := openaitest.New(t)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	model.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_wait", Name: "terminal", Args: []string{`{"command":"until [ -f ` + ready + ` ]; do sleep 0.02; done; echo waited"}`}}),
		openaitest.Response{Text: []string{"half", "way"}, FaultAt: 2, Gate: gate},
	)
	a := serveHome(t, home, cwd, model.URL())
	b := serveHome(t, home, cwd, model.URL())
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"wait, then answer","session_id":"across"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	id := adm["run_id"].(string)

	fromA, closeA := runStreamFrom(t, a, id, "")
	defer closeA()
	fromB, closeB := runStreamFrom(t, b, id, "")
	seenB := until(t, fromB, "tool.started")
	// A steer through B reaches the turn running in A (its tool is still waiting).
	if code, res := b.call(t, "POST", "/v1/runs/"+id+"/steer", `{"text":"mention the file"}`); code != 200 || res["accepted"] != true {
		t.Fatalf("steer through B: %d %v\nA: %s\nB: %s", code, res, a.logs.String(), b.logs.String())
	}
	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	<-gate.Reached()
	seenB = append(seenB, until(t, fromB, "message.delta")...)
	closeB()
	last := seenB[len(seenB)-1].id

	// The reader moves to A after the last id it saw; the run is stopped through B.
	rest, closeRest := runStreamFrom(t, a, id, strconv.Itoa(last))
	defer closeRest()
	if code, res := b.call(t, "POST", "/v1/runs/"+id+"/stop", ""); code != 200 || res["status"] != "stopping" {
		t.Fatalf("stop through B: %d %v\nA: %s", code, res, a.logs.String())
	}
	tail := until(t, rest, "run.cancelled")
	all := until(t, fromA, "run.cancelled")

	moved := append(append([]sseFrame(nil), seenB...), tail...)
	if len(moved) != len(all) {
		t.Fatalf("B then A: %v\nA alone: %v", names(moved), names(all))
	}
	for i := range all {
		x, _ := json.Marshal(all[i].data)
		y, _ := json.Marshal(moved[i].data)
		if all[i].id != i+1 || moved[i].id != all[i].id || string(x) != string(y) {
			t.Fatalf("event %d: A %d %s, B then A %d %s", i, all[i].id, x, moved[i].id, y)
		}
	}
	got := strings.Join(names(all), ",")
	for _, want := range []string{"run.started", "tool.started", "tool.completed", "run.steered", "message.delta", "run.cancelled"} {
		if !strings.Contains(got, want) {
			t.Fatalf("no %s in %s", want, got)
		}
	}
	if end := all[len(all)-1].data; end["interrupted"] != true || !strings.HasPrefix(end["turn_exit_reason"].(string), "interrupted_") {
		t.Fatalf("terminal event %v", end)
	}
	if reqs := model.Requests(); len(reqs) < 2 || !strings.Contains(string(reqs[1].Body), "mention the file") {
		t.Fatalf("the steer did not reach the model: %d requests", len(reqs))
	}
	// A reader of B from the start, now the run is over, gets the same log.
	fromB2, closeB2 := runStreamFrom(t, b, id, "")
	defer closeB2()
	again := until(t, fromB2, "run.cancelled")
	if len(again) != len(all) {
		t.Fatalf("B after the end: %v\nA: %v", names(again), names(all))
	}
	for i := range all {
		x, _ := json.Marshal(all[i].data)
		y, _ := json.Marshal(again[i].data)
		if again[i].id != all[i].id || string(x) != string(y) {
			t.Fatalf("event %d: A %s, B %s", i, x, y)
		}
	}
	for _, p := range []*restartProc{a, b} {
		if st := p.waitStatus(t, id, "cancelled"); st["interrupted"] != true {
			t.Fatalf("run after the stop: %v", st)
		}
	}
}

// A `hermes serve` that first hears of a run after it settled elsewhere (started later, or
// restarted) serves the same log as the process that ran it, so a reader that moves there with
// Last-Event-ID gets exactly the rest.
func TestRunEventsOfASettledRunInALaterServe(t *testing.T) {
	t.Setenv(envStoreProcess, "on")
	home, cwd := t.TempDir(), t.TempDir()
	model := openaitest.New(t)
	model.Enqueue(openaitest.Text("one ", "two ", "three"))
	a := serveHome(t, home, cwd, model.URL())
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"count","session_id":"later"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	id := adm["run_id"].(string)
	fromA, closeA := runStreamFrom(t, a, id, "")
	all := until(t, fromA, "run.completed")
	closeA()
	if len(all) < 5 {
		t.Fatalf("log on A: %v", names(all))
	}

	b := serveHome(t, home, cwd, model.URL())
	for _, after := range []int{0, 2, len(all) - 1} {
		from, closeFrom := runStreamFrom(t, b, id, strconv.Itoa(after))
		got := until(t, from, "run.completed")
		closeFrom()
		if len(got) != len(all)-after {
			t.Fatalf("B after %d: %v; A: %v", after, names(got), names(all))
		}
		for i, f := range got {
			x, _ := json.Marshal(all[after+i].data)
			y, _ := json.Marshal(f.data)
			if f.id != after+i+1 || string(x) != string(y) {
				t.Fatalf("B after %d, event %d: %d %s; A: %s", after, i, f.id, y, x)
			}
		}
	}
}
