package runs

import (
	"context"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Lanes that follow the ledger move on another process's admissions, claims and settlements
// by its change hints alone (nobody here kicks or wakes them): the admission starts the
// session's worker, which watches the queued head; the claim and the settlement reach the
// surface's view of the run through Watch, and the worker exits once the FIFO is empty.
func TestLanesFollowHints(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		other, here := open(t, st), open(t, st)
		watched := make(chan Record, 256)
		ls, _ := lanes(t, here, LaneFuncs{
			Watch:  func(rec Record) { watched <- rec },
			Viewed: func(runID string) (string, bool, bool) { return "s1", true, runID == "run_x" },
		})
		if err := ls.Follow(); err != nil {
			t.Fatal(err)
		}
		admit(t, other, "run_x")
		if rec := recv(t, watched, "the queued head watched"); rec.RunID != "run_x" || rec.Status != Queued {
			t.Fatalf("watched %s %s, want run_x queued", rec.RunID, rec.Status)
		}
		if _, err := other.Claim(ctx, "run_x"); err != nil {
			t.Fatal(err)
		}
		waitWatched(t, watched, Running)
		if !ls.Busy("s1") {
			t.Fatal("a lane with an unsettled head is not busy")
		}
		if _, err := other.Settle(ctx, "run_x", Completed, map[string]any{"output": "done"}, false); err != nil {
			t.Fatal(err)
		}
		if rec := waitWatched(t, watched, Completed); rec.Result["output"] != "done" {
			t.Fatalf("the settled record watched has result %v", rec.Result)
		}
		deadline := time.Now().Add(30 * time.Second)
		for ls.Busy("s1") {
			if time.Now().After(deadline) {
				t.Fatal("the lane did not exit after its last run settled")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// waitWatched returns the first record handed to Watch with status.
func waitWatched(t *testing.T, watched <-chan Record, status string) Record {
	t.Helper()
	for {
		if rec := recv(t, watched, "a record "+status+" watched"); rec.Status == status {
			return rec
		}
	}
}
