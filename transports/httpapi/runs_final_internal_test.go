package httpapi

import (
	"encoding/json"
	"testing"
)

// The terminal event is the last of a run's log: an approval answer, a steer or a stop whose
// handler loses the race with the settlement must not append its event after it.
func TestRunTerminalEventStaysLast(t *testing.T) {
	r := newRun(runRecord{RunID: "run_final", SessionID: "s"}, runRunning)
	r.emit("run.started", runRunning, nil)
	r.finish(runRecord{}, false, runCompleted, map[string]any{"completed": true})
	r.emit("approval.responded", runRunning, map[string]any{"choice": "once"})
	r.emit("run.steered", "", map[string]any{"accepted": true})
	r.emit("run.stopping", runStopping, nil)

	evs, done, _ := r.since(0)
	if !done || r.getStatus() != runCompleted {
		t.Fatalf("done=%v status=%s", done, r.getStatus())
	}
	var last struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(evs[len(evs)-1].data, &last); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || last.Event != "run.completed" {
		t.Fatalf("%d events, last %q; want run.started, run.completed", len(evs), last.Event)
	}
}
