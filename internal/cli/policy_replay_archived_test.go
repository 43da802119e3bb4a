package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// TestReplaySeesArchivedCalls: a tool call that a compaction (a rewind behind a summary)
// archived is still re-decided by policy replay, in its place before the calls made since.
func TestReplaySeesArchivedCalls(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	if _, err := st.CreateSession(ctx, store.Session{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	call := func(id, cmd string) store.Row {
		tcs, _ := json.Marshal([]model.ToolCall{{ID: id, Name: "terminal", Arguments: `{"command":"` + cmd + `"}`}})
		return store.Row{Role: "assistant", ToolCalls: tcs}
	}
	old, err := st.AppendRows(ctx, "s1", store.Fence{}, []store.Row{
		{Role: "user", Content: "clean up"},
		call("c1", "rm -r build"),
		{Role: "tool", ToolCallID: "c1", Content: "removed"},
		{Role: "assistant", Content: "done"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Rewind(ctx, "s1", store.Fence{}, old[0].ID, []store.Row{{Role: "user", Content: "[summary] removed build"}})
	if err != nil || res.Archived != 4 {
		t.Fatalf("rewind: %+v %v", res, err)
	}
	if _, err := st.AppendRows(ctx, "s1", store.Fence{}, []store.Row{call("c2", "ls"), {Role: "tool", ToolCallID: "c2", Content: "a b"}}); err != nil {
		t.Fatal(err)
	}
	active, err := st.Rows(ctx, "s1", store.RowQuery{})
	if err != nil || len(storedCalls(active)) != 1 {
		t.Fatalf("active transcript: %d calls, %v", len(storedCalls(active)), err)
	}
	calls, err := replayCalls(ctx, st, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].name != "terminal" || string(calls[0].args) != `{"command":"rm -r build"}` || calls[0].result != "removed" || string(calls[1].args) != `{"command":"ls"}` {
		t.Fatalf("replayed calls: %+v", calls)
	}
}
