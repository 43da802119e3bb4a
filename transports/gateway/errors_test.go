package gateway

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// A store that cannot be reached is code 5006 with a message that says so and names nothing of
// the store itself (its address, user and database are the operator's, in the log).
func TestStoreUnavailableNamesNoAddress(t *testing.T) {
	down := fmt.Errorf("%w: failed to connect to `user=hermes database=hermes`: 127.0.0.1:5432: connection refused", engine.ErrStoreUnavailable)
	var we *jsonrpc.Error
	if !errors.As(toWire("session.history", fmt.Errorf("history: %w", down)), &we) {
		t.Fatal("not a JSON-RPC error")
	}
	if we.Code != codeStore || !strings.Contains(we.Message, "store unavailable") || strings.Contains(we.Message, "127.0.0.1") || strings.Contains(we.Message, "user=") {
		t.Fatalf("%d %q", we.Code, we.Message)
	}
}
