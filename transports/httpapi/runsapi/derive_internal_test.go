package runsapi

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/tool"
)

// labelHost is the one part of a Host the translation uses.
type labelHost struct{ Host }

func (labelHost) ToolLabel(args json.RawMessage) string { return string(args) }

// turnEvents is a session's log around a run's turn: events of an earlier turn and turn-less
// ones before it started (not the run's), the turn with an approval, an answer and a steer,
// a delegated sub-agent's request, and the next turn after it ended.
func turnEvents() []engine.Event {
	at := time.Unix(1_700_000_000, 0)
	ev := func(seq uint64, typ engine.EventType, turn, text string, data engine.EventData) engine.Event {
		return engine.Event{Seq: seq, Type: typ, SessionID: "s", TurnID: turn, Time: at.Add(time.Duration(seq) * time.Second), Text: text, Data: data}
	}
	approval := engine.Request{ID: "req_1", TurnID: "turn_run", Kind: engine.KindApproval, Payload: map[string]any{"command": "rm -rf x"}}
	return []engine.Event{
		ev(10, engine.EvMessageDelta, "turn_before", "not mine", nil),
		ev(11, engine.EvQueueUpdated, "", "", engine.QueueInfo{}),
		ev(12, engine.EvMessageStart, "turn_run", "", engine.TurnStart{Prompt: "go"}),
		ev(13, engine.EvMessageDelta, "turn_run", "Hel", nil),
		ev(14, engine.EvMessageDelta, "turn_run", "", nil),
		ev(15, engine.EvToolStart, "turn_run", "", engine.ToolStart{CallID: "call_1", Name: "terminal", Args: json.RawMessage(`{"command":"rm -rf x"}`)}),
		ev(16, engine.EvRequestOpen, "turn_run", "", approval),
		ev(17, engine.EvRequestResolved, "turn_run", "", engine.RequestResolved{ID: "req_1", Kind: engine.KindApproval, Answer: map[string]any{"choice": "once"}}),
		ev(18, engine.EvToolComplete, "turn_run", "", engine.ToolComplete{CallID: "call_1", Name: "terminal", Result: tool.Result{}, Duration: 1500 * time.Millisecond}),
		ev(19, engine.EvSteerDelivered, "turn_run", "", engine.SteerDelivered{IDs: []string{"steer_1"}, Text: "faster"}),
		ev(20, engine.EvRequestOpen, "turn_sub", "", engine.Request{ID: "req_2", TurnID: "turn_sub", Kind: engine.KindApproval}),
		ev(21, engine.EvRequestCancel, "turn_sub", "", engine.RequestCancel{ID: "req_2"}),
		ev(22, engine.EvMessageDelta, "turn_run", "lo", nil),
		ev(23, engine.EvMessageComplete, "turn_run", "Hello", engine.Outcome{Status: engine.StatusCompleted}),
		ev(24, engine.EvMessageDelta, "turn_after", "not mine either", nil),
	}
}

type logLine struct {
	id   int
	data map[string]any
}

func logOf(t *testing.T, r *run) []logLine {
	t.Helper()
	evs, _, _ := r.since(0)
	out := make([]logLine, len(evs))
	for i, e := range evs {
		out[i].id = e.seq
		if err := json.Unmarshal(e.data, &out[i].data); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The log of a run is a function of its record and its session's events: the process that
// executes it (its turn's events one by one, as they come) and a process reading the stored
// log (in batches, from an earlier seq, with events read twice after a reconnect) write the
// same events under the same ids, with the same timestamps.
func TestRunLogDerivedTheSameEverywhere(t *testing.T) {
	rs := &Runs{host: labelHost{}}
	rec := runRecord{RunID: "run_d", SessionID: "s", Status: recRunning, Generation: 1, Ahead: 1, TurnID: "turn_run", EventFloor: 9,
		CreatedAt: time.Unix(1_699_999_990, 0), StartedAt: time.Unix(1_699_999_995, 0)}
	settled := rec
	settled.Status, settled.SettledAt, settled.Result = runCompleted, time.Unix(1_700_000_100, 0), map[string]any{"completed": true, "output": "Hello"}

	exec := newRun(rec, runRunning)
	exec.mu.Lock()
	exec.view.turn = "turn_run"
	exec.prefixLocked()
	exec.mu.Unlock()
	var statuses []string
	for _, ev := range turnEvents() {
		rs.take(exec, nil, ev)
		statuses = append(statuses, exec.getStatus())
		if ev.Seq == 16 { // waiting: the status shows the approval the log does
			if a, _ := exec.statusObject()["approval"].(map[string]any); a["request_id"] != "req_1" || a["command"] != "rm -rf x" {
				t.Fatalf("status while waiting: %v", exec.statusObject())
			}
		}
	}
	exec.finish(settled, true, runCompleted, settled.Result)

	mirror := newRun(rec, runRunning)
	mirror.mu.Lock()
	mirror.view.turn = rec.TurnID
	mirror.prefixLocked()
	mirror.mu.Unlock()
	evs := turnEvents()
	for _, batch := range [][]engine.Event{evs[:4], evs[2:9], evs[5:]} { // overlapping: read again after a reconnect
		for _, ev := range batch {
			rs.take(mirror, nil, ev)
		}
	}
	mirror.finish(settled, true, runCompleted, settled.Result)

	a, b := logOf(t, exec), logOf(t, mirror)
	var names []string
	for i, l := range a {
		names = append(names, l.data["event"].(string))
		if l.id != i+1 || l.data["sequence_number"] != float64(i+1) {
			t.Fatalf("event %d has id %d, sequence_number %v", i, l.id, l.data["sequence_number"])
		}
	}
	want := []string{"run.queued", "run.started", "message.delta", "tool.started", "approval.request", "approval.responded", "tool.completed", "run.steered", "approval.request", "message.delta", "run.completed"}
	if !slices.Equal(names, want) {
		t.Fatalf("events %v\nwant   %v", names, want)
	}
	ja, _ := json.Marshal(a)
	if len(a) != len(b) {
		t.Fatalf("executor %d events, reader %d", len(a), len(b))
	}
	for i := range a {
		x, _ := json.Marshal(a[i].data)
		y, _ := json.Marshal(b[i].data)
		if a[i].id != b[i].id || string(x) != string(y) {
			t.Fatalf("event %d differs:\n%d %s\n%d %s\n(all: %s)", i, a[i].id, x, b[i].id, y, ja)
		}
	}
	if a[2].data["timestamp"] != float64(1_700_000_013) || a[0].data["timestamp"] != float64(1_699_999_990) || a[len(a)-1].data["timestamp"] != float64(1_700_000_100) {
		t.Fatalf("timestamps are not the events' own: %s", ja)
	}
	if d := a[5].data; d["request_id"] != "req_1" || d["choice"] != "once" || d["resolved"] != float64(1) {
		t.Fatalf("approval.responded %v", d)
	}
	if d := a[3].data; d["preview"] != `{"command":"rm -rf x"}` || d["call_id"] != "call_1" {
		t.Fatalf("tool.started %v", d)
	}
	// The status follows the turn: waiting from the approval's request to its answer.
	if statuses[6] != runWaiting || statuses[7] != runRunning {
		t.Fatalf("statuses %v", statuses)
	}
}

// A turn the lease holder started for the run (the record does not name it yet) is the first
// turn that starts after the floor; a takeover of the session ends it.
func TestTurnViewFindsTurnAndEndsAtTakeover(t *testing.T) {
	var v turnView
	if v.accept(engine.Event{Type: engine.EvQueueUpdated}) {
		t.Fatal("a turn-less event before the turn started was taken")
	}
	if !v.accept(engine.Event{Type: engine.EvMessageStart, TurnID: "turn_x"}) || v.turn != "turn_x" {
		t.Fatalf("the turn was not found: %+v", v)
	}
	if !v.accept(engine.Event{Type: engine.EvStatus}) || v.accept(engine.Event{Type: engine.EvMessageDelta, TurnID: "turn_y"}) {
		t.Fatal("turn-less events belong to the started turn; another turn's do not")
	}
	v.accept(engine.Event{Type: engine.EvTakeover})
	if !v.done || v.accept(engine.Event{Type: engine.EvMessageDelta, TurnID: "turn_x"}) {
		t.Fatalf("a takeover did not end the turn: %+v", v)
	}
}

// A takeover event names the turn it is about (the newest row's). Naming the view's turn, it
// ends the view even before the view saw the turn start (the log's floor was past it), so a
// later turn's approval on the session never lands in this run's log; adopting the turn, it
// does not end it.
func TestTurnViewEndsAtTheTakeoverOfItsTurn(t *testing.T) {
	takeover := func(turn string, adopted bool) engine.Event {
		return engine.Event{Type: engine.EvTakeover, TurnID: turn, Data: engine.Takeover{TurnID: turn, Outcome: engine.OutcomeRestartUnknown, Adopted: adopted}}
	}
	later := engine.Event{Type: engine.EvRequestOpen, TurnID: "turn_later", Data: engine.Request{ID: "req_9", TurnID: "turn_later", Kind: engine.KindApproval}}
	for _, started := range []bool{true, false} {
		v := turnView{turn: "turn_run"}
		if started {
			v.accept(engine.Event{Type: engine.EvMessageStart, TurnID: "turn_run"})
		}
		if v.accept(takeover("turn_run", false)) || !v.done {
			t.Fatalf("started %v: the takeover of the view's turn did not end it: %+v", started, v)
		}
		if v.accept(later) {
			t.Fatalf("started %v: a later turn's approval was taken after the takeover", started)
		}
	}
	v := turnView{turn: "turn_run"}
	v.accept(engine.Event{Type: engine.EvMessageStart, TurnID: "turn_run"})
	if v.accept(takeover("turn_run", true)) || v.done {
		t.Fatalf("an adopted turn's view ended: %+v", v)
	}
	if !v.accept(engine.Event{Type: engine.EvMessageDelta, TurnID: "turn_run", Text: "more"}) {
		t.Fatal("the adopted turn's next event was not taken")
	}
	// Another turn's takeover before this one started (the session was taken over, then
	// the run's turn started) does not end it.
	v = turnView{turn: "turn_run"}
	if v.accept(takeover("turn_before", false)) || v.done {
		t.Fatalf("an earlier turn's takeover ended a view that had not started: %+v", v)
	}
}

// A run adopted by the process that was deriving its log, which already took the adopted
// turn's request (opened again with the same id) from the session's events, reads waiting with
// that approval, not running: the follower that takes over skips events already taken.
func TestAdoptedRunKeepsItsWaitingStatus(t *testing.T) {
	rs := &Runs{host: labelHost{}}
	rec := runRecord{RunID: "run_a", SessionID: "s", Status: recRunning, Generation: 1, TurnID: "turn_run", EventFloor: 9}
	r := newRun(rec, runRunning)
	r.mu.Lock()
	r.view.turn = "turn_run"
	r.mu.Unlock()
	for _, ev := range turnEvents()[:7] { // up to the approval's request (seq 16)
		rs.take(r, nil, ev)
	}
	reopened := engine.Event{Seq: 4100, Type: engine.EvRequestOpen, SessionID: "s", TurnID: "turn_run",
		Data: engine.Request{ID: "req_1", TurnID: "turn_run", Kind: engine.KindApproval, Payload: map[string]any{"command": "rm -rf x"}}}
	rs.take(r, nil, engine.Event{Seq: 4098, Type: engine.EvTakeover, SessionID: "s", TurnID: "turn_run", Data: engine.Takeover{SessionID: "s", TurnID: "turn_run", Adopted: true}})
	rs.take(r, nil, reopened)
	r.mu.Lock()
	r.adoptedLocked()
	r.mu.Unlock()
	rs.take(r, nil, reopened) // the follower, from its own subscription: already taken
	if st := r.getStatus(); st != runWaiting {
		t.Fatalf("adopted run reads %q, want %q", st, runWaiting)
	}
	if a, _ := r.statusObject()["approval"].(map[string]any); a["request_id"] != "req_1" {
		t.Fatalf("adopted run's approval %v", r.statusObject())
	}
	unknown := newRun(rec, runUnknown)
	unknown.mu.Lock()
	unknown.adoptedLocked()
	unknown.mu.Unlock()
	if st := unknown.getStatus(); st != runRunning {
		t.Fatalf("an adopted run read unknown before reads %q, want running", st)
	}
}
