package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
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

// What the client is not told of an outage, the operator reads in the log.
func TestStoreUnavailableCauseLogged(t *testing.T) {
	var buf bytes.Buffer
	c := &client{g: &Server{log: slog.New(slog.NewTextHandler(&buf, nil))}}
	down := fmt.Errorf("%w: dial tcp 127.0.0.1:5432: connect: connection refused", engine.ErrStoreUnavailable)
	var we *jsonrpc.Error
	if !errors.As(c.wireErr("session.history", down), &we) || we.Code != codeStore {
		t.Fatalf("not code %d: %v", codeStore, we)
	}
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "127.0.0.1:5432") || !strings.Contains(out, "session.history") {
		t.Fatalf("the outage's cause is not logged: %q", out)
	}
	buf.Reset()
	c.wireErr("session.history", engine.ErrSessionNotFound)
	if buf.Len() != 0 {
		t.Fatalf("an unknown session is logged as an outage: %q", buf.String())
	}
}
