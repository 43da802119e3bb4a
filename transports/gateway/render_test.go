package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/replay"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// TestRenderPayloadMismatch: an event whose payload is missing or of another type than its
// name promises is rendered without a panic (render runs on a connection's pump, where a panic
// would take the connection down), and a surface event carries its fields as they were.
func TestRenderPayloadMismatch(t *testing.T) {
	eng, err := engine.New(engine.Config{Store: memstore.New(), Cwd: t.TempDir(), Providers: map[string]model.Provider{"p": replay.New(&replay.Cassette{})}, DefaultModel: "p:m"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s, err := eng.Create(context.Background(), engine.CreateOptions{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	l := &live{rid: "r1", s: s}
	types := []engine.EventType{
		engine.EvSessionInfo, engine.EvSessionTitle, engine.EvSessionClosed, engine.EvStatus,
		engine.EvMessageStart, engine.EvMessageDelta, engine.EvReasoningDelta, engine.EvMessageComplete,
		engine.EvToolGenerating, engine.EvToolStart, engine.EvToolProgress, engine.EvToolComplete,
		engine.EvRequestOpen, engine.EvRequestCancel, engine.EvRequestResolved, engine.EvSteerDelivered,
		engine.EvQueueUpdated, engine.EvPolicyDecision, engine.EvModelChanged, engine.EvSubagentStart,
		engine.EvSubagentDone, engine.EvUsage, engine.EvError, "background.complete",
	}
	for _, typ := range types {
		for _, d := range []engine.EventData{nil, engine.QueueInfo{}, engine.SurfaceEvent{"x": 1}, engine.ErrorInfo{Message: "m"}} {
			render(l, engine.Event{Type: typ, Data: d})
		}
	}

	p, ok := render(l, engine.Event{Type: "background.complete", Data: engine.SurfaceEvent{"task_id": "b1", "status": "completed"}})
	if !ok {
		t.Fatal("surface event not rendered")
	}
	b, _ := json.Marshal(p.Payload)
	if string(b) != `{"status":"completed","task_id":"b1"}` {
		t.Fatalf("surface payload %s", b)
	}
	if _, ok := render(l, engine.Event{Type: engine.EvSessionClosed, Data: engine.SessionClosed{Reason: "closed"}}); ok {
		t.Fatal("session.closed rendered")
	}
}
