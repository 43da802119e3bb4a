package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// restartProc is one life of `hermes serve` on a HERMES_HOME that outlives it.
type restartProc struct {
	base string
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan struct{} // closed when stderr reached EOF (the process is gone)
}

// serveHome starts this test binary as `hermes serve --addr 127.0.0.1:0` on home and waits for
// its "listening on" line. The test ends it with kill (SIGKILL) or term (SIGTERM).
func serveHome(t *testing.T, home, cwd, modelURL string) *restartProc {
	t.Helper()
	p := &restartProc{logs: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = hermesCmd(t, cwd, []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent",
		"OPENAI_BASE_URL=" + modelURL, "OPENAI_API_KEY=k", "HERMES_API_KEY=" + testAPIKey}, "serve", "--addr", "127.0.0.1:0")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			if _, after, ok := strings.Cut(line, "listening on http://"); ok && !sent {
				sent = true
				addr <- strings.Fields(after)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		close(addr)
	}()
	t.Cleanup(func() {
		// A test that failed half way still ends the process.
		_ = p.cmd.Process.Kill()
		<-p.done
		_ = p.cmd.Wait()
	})
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("hermes serve exited before listening:\n%s", p.logs.String())
		}
		p.base = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("hermes serve did not start listening:\n%s", p.logs.String())
	}
	return p
}

// kill ends the process as kill -9 does: nothing of it runs after.
func (p *restartProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	_ = p.cmd.Wait()
}

// term asks for a clean shutdown and checks the exit status.
func (p *restartProc) term(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("hermes serve did not exit cleanly: %v\n%s", err, p.logs.String())
	}
}

func (p *restartProc) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d %q: %v", method, path, res.StatusCode, b, err)
	}
	return res.StatusCode, m
}

// terminalEvent reads a run's event stream until the stream ends and returns its last event.
func (p *restartProc) terminalEvent(t *testing.T, runID string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", p.base+"/v1/runs/"+runID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var last map[string]any
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			last = nil
			if err := json.Unmarshal([]byte(data), &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	if last == nil {
		t.Fatalf("run %s: no events", runID)
	}
	return last
}

// kill -9 of `hermes serve` in the middle of a run: after the restart the run is
// restart-unknown, the session's next run waits behind it, a resolution with the wrong
// generation is refused, and the right one settles it interrupted and lets the next run go.
func TestServeRestartUnknownRun(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	model := openaitest.New(t)
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	model.Enqueue(openaitest.Response{Text: []string{"half", "way"}, FaultAt: 2, Gate: gate})

	a := serveHome(t, home, cwd, model.URL())
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"long job","session_id":"work"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	first := adm["run_id"].(string)
	select {
	case <-gate.Reached():
	case <-time.After(60 * time.Second):
		t.Fatalf("the run never reached the model:\n%s", a.logs.String())
	}
	_, running := a.call(t, "GET", "/v1/runs/"+first, "")
	if admID, _ := running["admission_id"].(string); running["status"] != "running" || running["execution_generation"] != float64(1) || !strings.HasPrefix(admID, "adm_") {
		t.Fatalf("running %v", running)
	}
	a.kill(t)

	model.Enqueue(openaitest.Text("second ", "done"))
	b := serveHome(t, home, cwd, model.URL())
	_, st := b.call(t, "GET", "/v1/runs/"+first, "")
	if st["status"] != "unknown" || st["restart_unknown"] != true || st["admission_id"] != running["admission_id"] || st["execution_generation"] != float64(1) {
		t.Fatalf("after kill -9 and restart: %v", st)
	}
	if ev := b.terminalEvent(t, first); ev["event"] != "run.unknown" {
		t.Fatalf("event stream of the unknown run ends with %v", ev)
	}
	_, caps := b.call(t, "GET", "/v1/capabilities", "")
	if caps["features"].(map[string]any)["run_unknown_resolution"] != true {
		t.Fatalf("capabilities %v", caps["features"])
	}

	code, adm2 := b.call(t, "POST", "/v1/runs", `{"input":"next job","session_id":"work"}`)
	if code != 202 {
		t.Fatalf("second admission %d %v", code, adm2)
	}
	second := adm2["run_id"].(string)
	if _, st := b.call(t, "GET", "/v1/runs/"+second, ""); st["status"] != "queued" {
		t.Fatalf("second run %v", st)
	}

	wrong := `{"admission_id":"` + st["admission_id"].(string) + `","execution_generation":2}`
	code, e := b.call(t, "POST", "/v1/runs/"+first+"/resolve-unknown", wrong)
	if code != 409 || e["error"].(map[string]any)["code"] != "admission_mismatch" {
		t.Fatalf("wrong generation: %d %v", code, e)
	}
	if _, st := b.call(t, "GET", "/v1/runs/"+second, ""); st["status"] != "queued" {
		t.Fatalf("second run after a refused resolution %v", st)
	}

	right := `{"admission_id":"` + st["admission_id"].(string) + `","execution_generation":1}`
	code, res := b.call(t, "POST", "/v1/runs/"+first+"/resolve-unknown", right)
	if code != 200 || res["status"] != "interrupted" {
		t.Fatalf("resolution: %d %v", code, res)
	}
	if _, st := b.call(t, "GET", "/v1/runs/"+first, ""); st["status"] != "interrupted" || st["interrupted"] != true {
		t.Fatalf("resolved run %v", st)
	}
	if ev := b.terminalEvent(t, second); ev["event"] != "run.completed" || ev["output"] != "second done" {
		t.Fatalf("second run ended with %v", ev)
	}
	b.term(t)

	// A clean shutdown left nothing unsettled: the next life sees both runs as they ended.
	c := serveHome(t, home, cwd, model.URL())
	for id, want := range map[string]string{first: "interrupted", second: "completed"} {
		if _, st := c.call(t, "GET", "/v1/runs/"+id, ""); st["status"] != want {
			t.Fatalf("run %s in the next life: %v", id, st)
		}
	}
	c.term(t)
}
