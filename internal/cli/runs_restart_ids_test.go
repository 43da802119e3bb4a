//go:build unix

package cli

import (
	"encoding/json"
	"strconv"
	"syscall"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A run whose turn is in a slow tool call when `hermes serve` is stopped (SIGINT) keeps its
// event log across the restart: the next serve on the same home serves the events the live
// stream had, under the same ids and in the same order, and nothing a client already read
// under an id is another event there.
func TestRunEventIDsAcrossAShutdownMidTool(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	model := openaitest.New(t)
	model.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "call_slow", Name: "terminal", Args: []string{`{"command":"sleep 60"}`}}))

	a := serveHome(t, home, cwd, model.URL())
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"run the slow command","session_id":"slow"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	id := adm["run_id"].(string)
	live, closeLive := runStreamFrom(t, a, id, "")
	defer closeLive()
	seen := until(t, live, "tool.started")
	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The live stream goes on until the run settles or the server is gone.
	for f := range live {
		seen = append(seen, f)
	}
	<-a.done
	_ = a.cmd.Wait()
	for i, f := range seen {
		if f.id != i+1 {
			t.Fatalf("live stream ids: %v (%v)", f.id, names(seen))
		}
	}

	b := serveHome(t, home, cwd, model.URL())
	st := b.waitStatus(t, id, "interrupted")
	later, closeLater := runStreamFrom(t, b, id, "")
	all := until(t, later, "run.interrupted")
	closeLater()
	if len(all) < len(seen) {
		t.Fatalf("after the restart: %v; live: %v", names(all), names(seen))
	}
	for i, f := range seen {
		x, _ := json.Marshal(f.data)
		y, _ := json.Marshal(all[i].data)
		if all[i].id != f.id || string(x) != string(y) {
			t.Fatalf("event id %d: live %s, after the restart %d %s\nlive: %v\nlater: %v", f.id, x, all[i].id, y, names(seen), names(all))
		}
	}
	if last := seen[len(seen)-1]; last.data["event"] == "run.interrupted" && len(all) != len(seen) {
		t.Fatalf("the live log ended with the terminal event, the later one goes on: live %v, later %v", names(seen), names(all))
	}
	// A reader that resumes after the last id it saw live gets the rest, or 204 when there is
	// none.
	if len(all) > len(seen) {
		rest, closeRest := runStreamFrom(t, b, id, strconv.Itoa(len(seen)))
		got := until(t, rest, "run.interrupted")
		closeRest()
		if len(got) != len(all)-len(seen) || got[0].id != len(seen)+1 {
			t.Fatalf("resumed after %d: %v; whole log %v", len(seen), names(got), names(all))
		}
	}
	// What GET said before any stream was read: the run's last event, as the log has it.
	if want := all[len(all)-1].data["event"]; st["last_event"] != want {
		t.Fatalf("right after the restart, last_event %q, want %q: %v", st["last_event"], want, st)
	}
	b.term(t)
}
