package cli

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// post sends a POST (with an Idempotency-Key when key is set) from any goroutine: failures
// are reported with t.Error.
func (p *restartProc) post(t *testing.T, path, body, key string) (int, string) {
	req, err := http.NewRequest("POST", p.base+path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// waitStatus polls GET /v1/runs/{id} on p until the run has status want (60 s at most).
func (p *restartProc) waitStatus(t *testing.T, id, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, st := p.call(t, "GET", "/v1/runs/"+id, "")
		if st["status"] == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %v, want %s:\n%s", id, st, want, p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two `hermes serve` on one HERMES_HOME share the runs ledger: a run one process executes is
// running (not restart-unknown) for the other, even for a serve started while it runs; a run
// admitted through the second waits in the same FIFO and runs after it; one Idempotency-Key
// sent to both at once admits one run; and when the executing process is killed, the other
// reports its run restart-unknown and exactly one resolution wins.
func TestTwoServesOneHomeRuns(t *testing.T) {
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	home, cwd := t.TempDir(), t.TempDir()
	model := openaitest.New(t)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	model.Enqueue(openaitest.Response{Text: []string{"first ", "done"}, Gate: gate})

	a := serveHome(t, home, cwd, model.URL())
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"long job","session_id":"shared"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	first := adm["run_id"].(string)
	select {
	case <-gate.Reached():
	case <-time.After(60 * time.Second):
		t.Fatalf("the run never reached the model:\n%s", a.logs.String())
	}
	running1 := a.waitStatus(t, first, "running")

	// A second serve starts while the first runs: the run is the first's, not unknown.
	b := serveHome(t, home, cwd, model.URL())
	if _, st := b.call(t, "GET", "/v1/runs/"+first, ""); st["status"] != "running" || st["restart_unknown"] != nil {
		t.Fatalf("a live process's run seen from a second serve: %v", st)
	}
	code, e := b.call(t, "POST", "/v1/runs/"+first+"/resolve-unknown", `{"admission_id":"`+running1["admission_id"].(string)+`","execution_generation":1}`)
	if code != 409 || e["error"].(map[string]any)["code"] != "run_not_unknown" {
		t.Fatalf("resolving a live process's run: %d %v", code, e)
	}

	// A run admitted through the second process queues behind it, in the same FIFO.
	model.Enqueue(openaitest.Text("second ", "done"))
	code, adm2 := b.call(t, "POST", "/v1/runs", `{"input":"next job","session_id":"shared"}`)
	if code != 202 {
		t.Fatalf("second admission %d %v", code, adm2)
	}
	second := adm2["run_id"].(string)
	for _, p := range []*restartProc{a, b} {
		if _, st := p.call(t, "GET", "/v1/runs/"+second, ""); st["status"] != "queued" {
			t.Fatalf("the second run while the first runs: %v", st)
		}
	}
	if n := len(model.Requests()); n != 1 {
		t.Fatalf("%d model calls while the FIFO's head runs, want 1", n)
	}
	gate.Release()
	for _, p := range []*restartProc{a, b} {
		if ev := p.terminalEvent(t, first); ev["event"] != "run.completed" || ev["output"] != "first done" {
			t.Fatalf("first run ended with %v", ev)
		}
		if ev := p.terminalEvent(t, second); ev["event"] != "run.completed" || ev["output"] != "second done" {
			t.Fatalf("second run ended with %v", ev)
		}
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "next job") || !strings.Contains(string(reqs[1].Body), "first done") {
		t.Fatalf("%d model calls; the second must carry the first's answer", len(reqs))
	}

	// One Idempotency-Key sent to both processes at once: one run.
	model.Enqueue(openaitest.Text("keyed"))
	var wg sync.WaitGroup
	bodies := make([]string, 2)
	codes := make([]int, 2)
	for i, p := range []*restartProc{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], bodies[i] = p.post(t, "/v1/runs", `{"input":"once only","session_id":"keyed"}`, "the-key")
		}()
	}
	wg.Wait()
	var ids []string
	replayed := 0
	for i, body := range bodies {
		if codes[i] != 202 {
			t.Fatalf("keyed admission %d %s", codes[i], body)
		}
		_, rest, _ := strings.Cut(body, `"run_id":"`)
		id, _, _ := strings.Cut(rest, `"`)
		ids = append(ids, id)
		if strings.Contains(body, `"replayed":true`) {
			replayed++
		}
	}
	if ids[0] != ids[1] || replayed != 1 {
		t.Fatalf("one key, two processes: %v", bodies)
	}
	if ev := b.terminalEvent(t, ids[0]); ev["event"] != "run.completed" || ev["output"] != "keyed" {
		t.Fatalf("keyed run ended with %v", ev)
	}
	if n := len(model.Requests()); n != 3 {
		t.Fatalf("%d model calls after the keyed admissions, want 3", n)
	}

	// The executing process is killed mid-run: the other reports the run restart-unknown,
	// and of two resolutions one wins.
	gate2 := openaitest.NewGate()
	t.Cleanup(gate2.Release)
	model.Enqueue(openaitest.Response{Text: []string{"never"}, Gate: gate2})
	code, adm3 := a.call(t, "POST", "/v1/runs", `{"input":"doomed","session_id":"shared"}`)
	if code != 202 {
		t.Fatalf("third admission %d %v", code, adm3)
	}
	third := adm3["run_id"].(string)
	select {
	case <-gate2.Reached():
	case <-time.After(60 * time.Second):
		t.Fatalf("the third run never reached the model:\n%s", a.logs.String())
	}
	running := a.waitStatus(t, third, "running")
	a.kill(t)
	st := b.waitStatus(t, third, "unknown")
	if st["admission_id"] != running["admission_id"] || st["execution_generation"] != float64(1) || st["restart_unknown"] != true {
		t.Fatalf("after the kill: %v (before %v)", st, running)
	}
	right := `{"admission_id":"` + running["admission_id"].(string) + `","execution_generation":1}`
	results := make([]int, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = b.post(t, "/v1/runs/"+third+"/resolve-unknown", right, "")
		}()
	}
	wg.Wait()
	if !(results[0] == 200 && results[1] == 409 || results[0] == 409 && results[1] == 200) {
		t.Fatalf("two resolutions: %v", results)
	}
	if ev := b.terminalEvent(t, third); ev["event"] != "run.interrupted" {
		t.Fatalf("resolved run ended with %v", ev)
	}
	b.term(t)
}
