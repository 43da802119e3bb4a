//go:build unix

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A run waiting for an approval in a `hermes serve` that is killed is adopted by another on the
// same home: it reads waiting_for_approval there with the same request, the answer given
// there runs the command exactly once, and the run completes — it is not restart-unknown.
func TestRunAdoptedAfterKill(t *testing.T) {
	adoptionScenario(t, func(t *testing.T, a *restartProc) { a.kill(t) }, nil)
}

// The same when the process is stopped past its lease (SIGSTOP, a zombie): another adopts the
// run and completes it while the first is stopped; continued, the first writes nothing, and
// every process reads the run completed.
func TestRunAdoptedFromStoppedServe(t *testing.T) {
	adoptionScenario(t, func(t *testing.T, a *restartProc) {
		if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })
	}, func(t *testing.T, a *restartProc) {
		if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	})
}

// adoptionScenario parks a run at an approval in one serve, ends that serve with gone, answers
// the approval through a second serve and checks the run completed there once; back (when
// not nil) brings the first serve back before the last checks, which it then also answers.
func adoptionScenario(t *testing.T, gone, back func(*testing.T, *restartProc)) {
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
	waitFor := func(p *restartProc, want string, within time.Duration) map[string]any {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			_, got := p.call(t, "GET", "/v1/runs/"+id, "")
			if got["status"] == want {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s is %v, not %s\nA: %s\nB: %s", id, got, want, a.logs.String(), b.logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	first := waitFor(a, "waiting_for_approval", 60*time.Second)
	approval, _ := first["approval"].(map[string]any)
	if approval == nil || approval["request_id"] == nil {
		t.Fatalf("waiting run without its approval: %v", first)
	}
	// Every process reports the same: B, which does not run it, reads it waiting too.
	if other, _ := waitFor(b, "waiting_for_approval", 30*time.Second)["approval"].(map[string]any); other == nil || other["request_id"] != approval["request_id"] {
		t.Fatalf("B reads the waiting run's approval as %v, A as %v", other, approval)
	}
	gone(t, a)

	// B takes the session over and adopts the run (at once for a process of this host that
	// exited; after the lease's TTL for one that stopped): the same request waits there, and
	// the answer given there runs the command.
	// Once B adopted it, B reports it waiting for the same approval (not running).
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(b.logs.String(), "adopted a run waiting for an approval"); {
		if time.Now().After(deadline) {
			t.Fatalf("B did not adopt the run:\n%s", b.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if again, _ := waitFor(b, "waiting_for_approval", 30*time.Second)["approval"].(map[string]any); again == nil || again["request_id"] != approval["request_id"] {
		t.Fatalf("B, having adopted the run, reads its approval as %v, A read %v", again, approval)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, res := b.call(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"once"}`)
		if code == 200 && res["resolved"] == float64(1) {
			break
		}
		if (code != 503 && code != 409) || time.Now().After(deadline) {
			t.Fatalf("approval through B: %d %v\nB: %s", code, res, b.logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	done := waitFor(b, "completed", 60*time.Second)
	if done["output"] != "done" || done["restart_unknown"] != nil {
		t.Fatalf("adopted run ended %v", done)
	}
	if !strings.Contains(b.logs.String(), "adopted a run waiting for an approval") {
		t.Fatalf("B did not adopt the run:\n%s", b.logs.String())
	}
	if back != nil {
		back(t, a)
		if again := waitFor(a, "completed", 30*time.Second); again["output"] != "done" {
			t.Fatalf("the first serve, back, reads %v", again)
		}
	}
	// B's log of the run, kept as it adopted the run, is the one any other process derives
	// from the store (a serve started now): a reader moves between them with Last-Event-ID.
	adoptedLogIsDerived(t, b, home, cwd, model.URL(), id)
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

// A serve that first hears of a run as it adopts it (started after the run's process was
// killed) keeps the log every other process derives: the record's events first, then the
// turn's stored ones, then what the turn does there — not a log that starts at the adoption.
func TestRunAdoptedByALaterServeKeepsItsLog(t *testing.T) {
	t.Setenv(envStoreProcess, "on")
	home, cwd := t.TempDir(), t.TempDir()
	model := openaitest.New(t)
	model.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_later", Name: "terminal", Args: []string{`{"command":"rm -r ` + filepath.Join(cwd, "gone") + `"}`}}),
		openaitest.Text("done"),
	)
	a := serveHome(t, home, cwd, model.URL())
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"clean up","session_id":"later-adopter"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	id := adm["run_id"].(string)
	a.waitStatus(t, id, "waiting_for_approval")
	a.kill(t)

	b := serveHome(t, home, cwd, model.URL())
	b.waitStatus(t, id, "waiting_for_approval")
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(b.logs.String(), "adopted a run waiting for an approval"); {
		if time.Now().After(deadline) {
			t.Fatalf("B did not adopt the run:\n%s", b.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, res := b.call(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`); code != 200 || res["resolved"] != float64(1) {
		t.Fatalf("approval through B: %d %v", code, res)
	}
	b.waitStatus(t, id, "completed")

	adoptedLogIsDerived(t, b, home, cwd, model.URL(), id)
}

// adoptedLogIsDerived reads the completed run id's whole log on b, which adopted it, and on a
// serve started now on home, and fails unless they are the same event for event (ids 1, 2, …
// and data) and begin as the run did before its adoption.
func adoptedLogIsDerived(t *testing.T, b *restartProc, home, cwd, modelURL, id string) {
	t.Helper()
	fromB, closeB := runStreamFrom(t, b, id, "")
	logB := until(t, fromB, "run.completed")
	closeB()
	c := serveHome(t, home, cwd, modelURL)
	fromC, closeC := runStreamFrom(t, c, id, "")
	logC := until(t, fromC, "run.completed")
	closeC()
	nb, nc := strings.Join(names(logB), ","), strings.Join(names(logC), ",")
	if nb != nc || !strings.HasPrefix(nb, "run.started,tool.started,approval.request,") {
		t.Fatalf("the adopter's log of the run: %s\na later serve's: %s", nb, nc)
	}
	for i := range logB {
		x, _ := json.Marshal(logB[i].data)
		y, _ := json.Marshal(logC[i].data)
		if logB[i].id != i+1 || logC[i].id != i+1 || string(x) != string(y) {
			t.Fatalf("event %d: the adopter's %d %s, a later serve's %d %s", i, logB[i].id, x, logC[i].id, y)
		}
	}
}
