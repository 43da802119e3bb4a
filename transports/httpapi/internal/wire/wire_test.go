package wire

import (
	"fmt"
	"testing"

	"github.com/hermes-go/hermes/engine"
)

// A request whose session another process took over mid-way is a retryable 503, not a 500: sent
// again, it reaches the process that holds the session now.
func TestClassifySessionMoved(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("save transcript: %w", engine.ErrSessionMoved),
		fmt.Errorf("renew: %w", engine.ErrSessionLeaseLost),
	} {
		e := Classify(err)
		if e.Status != 503 || e.Code != "session_moved" || e.RetryAfter != 1 || e.NoRetry || e.Type != "server_error" {
			t.Fatalf("%v classified %+v", err, e)
		}
	}
	if e := Classify(fmt.Errorf("boom")); e.Status != 500 {
		t.Fatalf("an unknown error classified %+v", e)
	}
}

// A turn its process stopped because another took the session over is answered like a request
// cut the same way (a retryable 503 session_moved); any other failed turn stays a 502.
func TestOutcomeErrorLeaseLost(t *testing.T) {
	lost := engine.Outcome{Status: engine.StatusFailed, ExitReason: "lease_lost", Error: "another process took this session over; the turn stopped"}
	if e := OutcomeError(lost); e.Status != 503 || e.Code != "session_moved" || e.RetryAfter != 1 || e.NoRetry {
		t.Fatalf("lease lost: %+v", e)
	}
	failed := engine.Outcome{Status: engine.StatusFailed, ExitReason: "agent_error", Error: "model refused"}
	if e := OutcomeError(failed); e.Status != 502 || e.Code != "agent_error" {
		t.Fatalf("failed turn: %+v", e)
	}
}
