package engine_test

import (
	"sync"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A sweep runs concurrently with turns: its keep filter may ask a sub-agent session for its
// Root while the delegating turn is creating it. The link to the parent must be in place
// before the child is published (run with -race).
func TestReleaseIdleKeepSeesSubagentRoot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "delegate_task", Args: []string{`{"goal":"count the files"}`}}),
		openaitest.Text("there are 0 files"),
		openaitest.Text("done"),
	)
	s := h.create()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var wrongRoot bool
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			h.eng.ReleaseIdle(0, func(x *engine.Session) bool {
				if x != s && x.Record().ParentID == s.ID() && x.Root() != s {
					wrongRoot = true
				}
				return true
			})
		}
	})
	out := h.run(s, "delegate it")
	close(stop)
	wg.Wait()
	if out.Status != engine.StatusCompleted {
		t.Fatalf("outcome: %+v", out)
	}
	if wrongRoot {
		t.Fatal("keep saw a sub-agent whose Root was not its delegating session")
	}
}
