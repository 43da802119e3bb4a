package gateway_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// TestGatewayObserverLeavesOtherSurfacesRequests: a client attached to a session that does
// not answer server requests withdraws the approvals of turns started over the gateway (it is
// their only way to be answered), but not those of a turn another surface started (a run over
// HTTP, an editor over ACP): that surface answers them.
func TestGatewayObserverLeavesOtherSurfacesRequests(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, true, nil)
	observer := open(t, tg, false) // never advertises server requests
	res := call(t, observer, "session.create", map[string]any{})
	sid, stored := res["session_id"].(string), res["stored_session_id"].(string)
	os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755)
	tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("removed"))
	ctx := tctx(t)
	sess, err := tg.eng.Open(ctx, stored)
	if err != nil {
		t.Fatal(err)
	}
	from := len(observer.Events())
	if _, err := sess.Submit(ctx, engine.Prompt{Text: "clean", Origin: "api_server"}); err != nil {
		t.Fatal(err)
	}
	var req engine.Request
	for deadline := time.Now().Add(30 * time.Second); ; {
		if open := sess.Snapshot().OpenRequests; len(open) > 0 {
			req = open[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approval never opened")
		}
		time.Sleep(5 * time.Millisecond) // polls a condition
	}
	// An inline call returns once the observer's connection has handled every event so far,
	// the request's among them.
	call(t, observer, "session.activate", map[string]any{"session_id": sid, "omit_messages": true})
	if open := sess.Snapshot().OpenRequests; len(open) != 1 || open[0].ID != req.ID {
		t.Fatalf("the other surface's approval was withdrawn by an observer: open %v", open)
	}
	if err := sess.Answer(req.ID, map[string]any{"choice": "once"}); err != nil {
		t.Fatal(err)
	}
	waitType(t, observer, from, sid, "message.complete")
	if _, err := os.Stat(filepath.Join(tg.cwd, "build")); !os.IsNotExist(err) {
		t.Fatal("the approved command did not run")
	}
}
