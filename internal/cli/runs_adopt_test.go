//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A run waiting for an approval in a `hermes serve` that is killed is adopted by another on the
// same home: it reads waiting_for_approval there with the same request, the answer given
// there runs the command exactly once, and the run completes — it is not restart-unknown.
func TestRunAdoptedAfterKill(t *testing.T) {
	t.Setenv(envStoreProcess, "on")
	home, cwd := t.TempDir(), t.TempDir()
	marker := filepath.Join(cwd, "marker")
	model := openaitest.New(t)
	model.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_adopt", Name: "terminal", Args: []string{`{"command":"rm -r ` + filepath.Join(cwd, "gone") + `; echo ran >> ` + marker + `"}`}}),
		openaitest.Text("done"),
	)
	a := serveHome(t, home, cwd, model.URL())
	b := serveHome(t, home, cwd, model.URL())
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"clean up","session_id":"adopted"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	id := adm["run_id"].(string)
	status := func(p *restartProc) map[string]any {
		_, got := p.call(t, "GET", "/v1/runs/"+id, "")
		return got
	}
	waitFor := func(p *restartProc, want string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got := status(p)
			if got["status"] == want {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s is %v, not %s\nA: %s\nB: %s", id, got, want, a.logs.String(), b.logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	first := waitFor(a, "waiting_for_approval")
	approval, _ := first["approval"].(map[string]any)
	if approval == nil || approval["request_id"] == nil {
		t.Fatalf("waiting run without its approval: %v", first)
	}
	a.kill(t)

	// B takes the session over and adopts the run: the same request waits there.
	again := waitFor(b, "waiting_for_approval")
	if ap, _ := again["approval"].(map[string]any); ap == nil || ap["request_id"] != approval["request_id"] {
		t.Fatalf("adopted run's approval %v, want request %v", again["approval"], approval["request_id"])
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the command ran before it was approved: %v", err)
	}
	if code, res := b.call(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"once"}`); code != 200 || res["resolved"] != float64(1) {
		t.Fatalf("approval through B: %d %v\nB: %s", code, res, b.logs.String())
	}
	done := waitFor(b, "completed")
	if done["output"] != "done" || done["restart_unknown"] != nil {
		t.Fatalf("adopted run ended %v", done)
	}
	got, err := os.ReadFile(marker)
	if err != nil || strings.Count(string(got), "ran") != 1 {
		t.Fatalf("the approved command ran %q (%v), want exactly once", got, err)
	}
	// The transcript has the call once, its one result and the answer.
	code, msgs := b.call(t, "GET", "/api/sessions/adopted/messages", "")
	if code != 200 {
		t.Fatalf("messages %d %v", code, msgs)
	}
	var roles []string
	for _, m := range msgs["data"].([]any) {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" {
		t.Fatalf("transcript roles %v", roles)
	}
}
