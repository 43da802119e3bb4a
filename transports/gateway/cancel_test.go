package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/transports/gateway"
)

// cliGateway serves one connection whose cli.exec runs cli, logging to the returned sink.
func cliGateway(t *testing.T, cli func(ctx context.Context, argv []string) (string, int, error)) (io.Writer, <-chan []byte, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	cw, frames, _ := pipeGateway(t, gateway.Options{CLI: cli, CLIAllow: []string{"block", "boom", "version"}, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	return cw, frames, logs
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// errCode is a response's error code (0 for none).
func errCode(t *testing.T, m map[string]json.RawMessage) int {
	t.Helper()
	var e struct{ Code int }
	if m["error"] != nil && json.Unmarshal(m["error"], &e) != nil {
		t.Fatalf("bad error %s", m["error"])
	}
	return e.Code
}

// TestGatewayCancelRequest: $/cancelRequest {id} ends a running request's context; it is
// answered -32800 and the connection carries on.
func TestGatewayCancelRequest(t *testing.T) {
	started := make(chan context.Context, 1)
	w, r, _ := cliGateway(t, func(ctx context.Context, argv []string) (string, int, error) {
		if argv[0] == "block" {
			started <- ctx
			<-ctx.Done()
			return "", 1, ctx.Err()
		}
		return "v1", 0, nil
	})
	io.WriteString(w, `{"jsonrpc":"2.0","id":"run-1","method":"cli.exec","params":{"argv":["block"]}}`+"\n")
	ctx := <-started
	io.WriteString(w, `{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"run-1"}}`+"\n")
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("cli.exec was not cancelled")
	}
	if m := answer(t, r, `"run-1"`); errCode(t, m) != -32800 {
		t.Fatalf("cancelled request answered %v", m)
	}
	io.WriteString(w, `{"jsonrpc":"2.0","id":2,"method":"cli.exec","params":{"argv":["version"]}}`+"\n")
	if m := answer(t, r, `2`); m["result"] == nil {
		t.Fatalf("after cancel: %s", m["error"])
	}
}

// TestGatewayHandlerPanic: a panicking method is answered -32603 with nothing of the panic,
// logged with its stack, and the connection serves the next request.
func TestGatewayHandlerPanic(t *testing.T) {
	w, r, logs := cliGateway(t, func(ctx context.Context, argv []string) (string, int, error) {
		if argv[0] == "boom" {
			panic("secret detail from cli")
		}
		return "v1", 0, nil
	})
	io.WriteString(w, `{"jsonrpc":"2.0","id":"p","method":"cli.exec","params":{"argv":["boom"]}}`+"\n")
	m := answer(t, r, `"p"`)
	if errCode(t, m) != -32603 || strings.Contains(string(m["error"]), "secret") {
		t.Fatalf("panic answered %s", m["error"])
	}
	for _, want := range []string{"panicked", "secret detail from cli", "runtime/debug.Stack"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	io.WriteString(w, `{"jsonrpc":"2.0","id":2,"method":"cli.exec","params":{"argv":["version"]}}`+"\n")
	if m := answer(t, r, `2`); m["result"] == nil {
		t.Fatalf("after the panic: %s", m["error"])
	}
}
