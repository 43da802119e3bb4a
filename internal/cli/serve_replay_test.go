package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// postChat sends a chat completion to p with extra headers and returns status, headers, body.
func postChat(t *testing.T, p *restartProc, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("POST", p.base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

// Two `hermes serve` processes on one home, and one restarted: a client's retry of a turn that
// ran a tool and failed, sent to the other process, is the same 409 replayed and the tool does
// not run again; an Idempotency-Key answered by one process is replayed by the other and by a
// process started after it stopped.
func TestServeReplayAcrossProcesses(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	model := openaitest.New(t)
	a := serveHome(t, home, cwd, model.URL())
	b := serveHome(t, home, cwd, model.URL())

	model.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_1", Name: "terminal", Args: []string{`{"command":"echo ran >> ran.txt"}`}}),
		openaitest.HTTPError(400, openaitest.APIError{Message: "bad things", Type: "invalid_request_error"}),
	)
	body := `{"model":"hermes-agent","messages":[{"role":"user","content":"run it once"}]}`
	if st, _, out := postChat(t, a, body, nil); st != 409 || !strings.Contains(out, "turn_failed") {
		t.Fatalf("first attempt: %d %s", st, out)
	}
	asked := len(model.Requests())
	st, h, out := postChat(t, b, body, nil)
	if st != 409 || h.Get("X-Hermes-Replayed") != "true" || !strings.Contains(out, "bad things") {
		t.Fatalf("retry on the other process: %d %v %s", st, h, out)
	}
	if n := len(model.Requests()); n != asked {
		t.Fatalf("the retry reached the model: %d requests, want %d", n, asked)
	}
	if ran, err := os.ReadFile(filepath.Join(cwd, "ran.txt")); err != nil || string(ran) != "ran\n" {
		t.Fatalf("the tool ran %q (%v), want once", ran, err)
	}

	model.Enqueue(openaitest.Text("only once"))
	key := map[string]string{"Idempotency-Key": "across-processes"}
	body = `{"model":"hermes-agent","messages":[{"role":"user","content":"keyed question"}]}`
	st1, _, out1 := postChat(t, b, body, key)
	st2, h2, out2 := postChat(t, a, body, key)
	if st1 != 200 || st2 != 200 || out1 != out2 || h2.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("first %d %s\nother process %d %v %s", st1, out1, st2, h2, out2)
	}
	a.term(t)
	b.term(t)
	waitStoreProcessGone(t, home) // a cold start of the home: nothing of the first processes runs
	c := serveHome(t, home, cwd, model.URL())
	st3, h3, out3 := postChat(t, c, body, key)
	if st3 != 200 || out3 != out1 || h3.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("after a restart %d %v %s", st3, h3, out3)
	}
	if n := len(model.Requests()); n != asked+1 {
		t.Fatalf("the model was asked %d times, want %d", n, asked+1)
	}
}
