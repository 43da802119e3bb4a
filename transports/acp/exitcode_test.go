package acp_test

import (
	"slices"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/acp"
)

// A terminal command that exits non-zero ends its tool call failed (the model still reads its
// output and code as a normal result); one that exits 0 completes. session/load replays the
// same statuses from the stored rows.
func TestTerminalNonZeroExitFails(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	srv.Enqueue(openaitest.ToolCalls(
		openaitest.Call{ID: "ok", Name: "terminal", Args: []string{`{"command":"echo fine"}`}},
		openaitest.Call{ID: "bad", Name: "terminal", Args: []string{`{"command":"echo broken; exit 3"}`}},
	), openaitest.Text("checked"))
	if sr := c.prompt(t, ctx, id, "run both"); sr != sdk.StopReasonEndTurn {
		t.Fatal(sr)
	}
	tr := summarize(c.cl.take())
	tr.assertClosed(t)
	last := func(st []sdk.ToolCallStatus) sdk.ToolCallStatus {
		if len(st) == 0 {
			return ""
		}
		return st[len(st)-1]
	}
	if st := tr.status["ok"]; last(st) != sdk.ToolCallStatusCompleted {
		t.Fatalf("exit 0: statuses %v", st)
	}
	if st := tr.status["bad"]; last(st) != sdk.ToolCallStatusFailed || !slices.Contains(st, sdk.ToolCallStatusInProgress) {
		t.Fatalf("exit 3: statuses %v", st)
	}
	// The model got the output and the code, not an error.
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `broken\n[exit code 3]`) {
		t.Fatalf("%d model requests; the second does not carry the output and code", len(reqs))
	}

	c2 := connect(t, eng, cwd, acp.Options{})
	if _, err := c2.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	re := summarize(c2.cl.take())
	if last(re.status["ok"]) != sdk.ToolCallStatusCompleted || last(re.status["bad"]) != sdk.ToolCallStatusFailed {
		t.Fatalf("replayed statuses ok %v bad %v", re.status["ok"], re.status["bad"])
	}
}
