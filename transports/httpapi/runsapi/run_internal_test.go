package runsapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/runs"
	"github.com/hermes-go/hermes/engine/store/memstore"
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

// A running run keeps its whole log (a slow reader misses nothing); a settled one keeps the
// last runLogKeep events, ending with the terminal event, and replays from what is left.
func TestRunLogBoundedAfterSettlement(t *testing.T) {
	r := newRun(runRecord{RunID: "run_log", SessionID: "s"}, runRunning)
	const n = runLogKeep + 500
	for range n {
		r.emit("message.delta", "", map[string]any{"delta": "x"})
	}
	if evs, done, _ := r.since(0); len(evs) != n || done || evs[0].seq != 1 {
		t.Fatalf("running: %d events from seq %d, done %v", len(evs), evs[0].seq, done)
	}
	r.finish(runRecord{}, false, runCompleted, map[string]any{"completed": true, "output": "xx"})
	evs, done, _ := r.since(0)
	if !done || len(evs) != runLogKeep || evs[0].seq != n+2-runLogKeep || evs[len(evs)-1].seq != n+1 {
		t.Fatalf("settled: %d events, seq %d..%d, done %v", len(evs), evs[0].seq, evs[len(evs)-1].seq, done)
	}
	var last struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(evs[len(evs)-1].data, &last); err != nil || last.Event != "run.completed" {
		t.Fatalf("last event %q %v", last.Event, err)
	}
	if evs, _, _ := r.since(n - 10); len(evs) != 11 || evs[0].seq != n-9 {
		t.Fatalf("replay after %d: %d events", n-10, len(evs))
	}
	if evs, _, _ := r.since(n + 50); len(evs) != runLogKeep {
		t.Fatalf("an id beyond the log: %d events", len(evs))
	}
}

// FuzzRunRecord feeds arbitrary bytes as a run record: whatever decodes can be rebuilt into a
// run without panicking (the ledger's own fuzz test covers listing).
func FuzzRunRecord(f *testing.F) {
	f.Add([]byte(`{"run_id":"run_1","status":"running","execution_generation":1,"process":"p"}`))
	f.Add([]byte(`{"run_id":"run_2","status":"completed","result":{"completed":true}}`))
	f.Add([]byte(`{"run_id":"run_3","status":"queued"}`))
	f.Add([]byte(`{"run_id":7}`))
	f.Add([]byte(`not json`))
	rs := recovering(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var rec runRecord
		if json.Unmarshal(b, &rec) != nil || rec.RunID == "" {
			return
		}
		r := rs.recoveredRun(rec)
		if len(r.events) != 0 {
			t.Fatalf("%d events before the log is derived", len(r.events))
		}
		_ = r.statusObject()
	})
}

// recovering returns the runs of a process over an empty store, as far as rebuilding a run from
// its record needs them.
func recovering(t testing.TB) *Runs {
	l, err := runs.Open(context.Background(), memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return &Runs{ctx: context.Background(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), ledger: l, m: map[string]*run{}}
}

// emit appends an event now, as a run's worker would.
func (r *run) emit(name, status string, fields map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitLocked(name, status, fields, time.Now())
}

// A stream still reading the log of a run that settles, however far behind (a slow client),
// gets every event it has yet to read: the log is trimmed once the last reader leaves.
func TestRunLogKeptWhileAReaderIsBehind(t *testing.T) {
	r := newRun(runRecord{RunID: "run_t", SessionID: "s"}, runRunning)
	detach := r.attach()
	r.mu.Lock()
	for range runLogKeep + 200 {
		r.emitLocked("message.delta", "", map[string]any{"delta": "x"}, time.Unix(0, 0))
	}
	r.mu.Unlock()
	r.finish(runRecord{}, false, runCompleted, map[string]any{"output": "x"})
	evs, done, _ := r.since(10)
	if !done || len(evs) != runLogKeep+191 || evs[0].seq != 11 {
		t.Fatalf("a connected reader at 10 gets %d events from %d (done %v), want every one from 11", len(evs), evs[0].seq, done)
	}
	detach()
	if evs, _, _ := r.since(0); len(evs) != runLogKeep || evs[len(evs)-1].seq != runLogKeep+201 {
		t.Fatalf("once the reader left the log keeps %d events up to %d, want the last %d", len(evs), evs[len(evs)-1].seq, runLogKeep)
	}
}
