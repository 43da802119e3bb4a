//go:build unix

package cli

import (
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A run parked at an approval in one `hermes serve` is answered through another serve on the
// same home: the second finds the approval in the session's durable events and sends the
// answer to the process running the turn, which goes on (denied: the command does not run)
// and completes the run, read alike from both.
func TestRunApprovalAnsweredThroughAnotherServe(t *testing.T) {
	t.Setenv(envStoreProcess, "on")
	home, cwd := t.TempDir(), t.TempDir()
	model := openaitest.New(t)
	model.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r keep-me"}`}}),
		openaitest.Text("left ", "alone"),
	)
	a := serveHome(t, home, cwd, model.URL())
	b := serveHome(t, home, cwd, model.URL())
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"clean up","session_id":"parked"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	id := adm["run_id"].(string)
	a.waitStatus(t, id, "waiting_for_approval")
	// B shows the run waiting, with the approval, from the turn's stored events.
	if st := b.waitStatus(t, id, "waiting_for_approval"); st["approval"] == nil {
		t.Fatalf("waiting run through B: %v", st)
	}
	if code, res := b.call(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"bogus"}`); code != 400 {
		t.Fatalf("a bad choice through B: %d %v", code, res)
	}
	code, res := b.call(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`)
	if code != 200 || res["resolved"] != float64(1) {
		t.Fatalf("approval answered through B: %d %v\nA: %s\nB: %s", code, res, a.logs.String(), b.logs.String())
	}
	for _, p := range []*restartProc{a, b} {
		st := p.waitStatus(t, id, "completed")
		if st["output"] != "left alone" {
			t.Fatalf("completed run: %v", st)
		}
	}
	if code, res := b.call(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`); code != 409 {
		t.Fatalf("an approval answered twice: %d %v", code, res)
	}
}
