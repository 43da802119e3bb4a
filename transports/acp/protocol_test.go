package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/acp"
)

// errorOf decodes a response's error.
func errorOf(t *testing.T, m map[string]json.RawMessage) (code int, msg string) {
	t.Helper()
	var e struct {
		Code    int
		Message string
	}
	if err := json.Unmarshal(m["error"], &e); err != nil || e.Code == 0 {
		t.Fatalf("want an error, got %v", m)
	}
	return e.Code, e.Message
}

// TestCancelledRequestIsAnsweredRequestCancelled: a request its client cancels with
// $/cancel_request while it waits (here for the store, which is still opening) is answered
// -32800, as ACP's cancellation requires, not as an internal error.
func TestCancelledRequestIsAnsweredRequestCancelled(t *testing.T) {
	_, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	release := make(chan struct{})
	open := func() (*engine.Engine, error) {
		<-release
		return eng, nil
	}
	rw := rawPipe(t, func(in io.Reader, out io.Writer) error {
		return acp.ServeLazy(context.Background(), open, in, out, acp.Options{Logger: quiet})
	})
	released := false
	t.Cleanup(func() { // before the connection closes: Serve waits for the store
		if !released {
			close(release)
		}
	})
	rw.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	rw.response("1")
	for _, req := range []struct{ id, method, params string }{
		{`"list-1"`, "session/list", `{}`},
		{`7`, "session/new", `{"cwd":` + strconvQuote(cwd) + `,"mcpServers":[]}`},
	} {
		rw.send(`{"jsonrpc":"2.0","id":` + req.id + `,"method":"` + req.method + `","params":` + req.params + `}`)
		rw.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + req.id + `}}`)
		if code, msg := errorOf(t, rw.response(req.id)); code != -32800 {
			t.Errorf("cancelled %s: %d %q, want -32800", req.method, code, msg)
		}
	}
	close(release)
	released = true
	rw.send(`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`)
	if _, ok := rw.response("2")["result"]; !ok {
		t.Fatal("session/list after the cancellations failed")
	}
}

// TestAnswerError: the one mapping from a handler's failure to its answer.
func TestAnswerError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		code int
		msg  string
	}{
		{"wrapped cancellation", live, fmt.Errorf("store: %w", context.Canceled), -32800, "Request cancelled"},
		{"cancelled request, flattened error", cancelled, errors.New("store: context canceled"), -32800, "Request cancelled"},
		{"cancelled request, chosen answer", cancelled, &sdk.RequestError{Code: -32602, Message: "Invalid params: x"}, -32800, "Request cancelled"},
		{"chosen answer", live, &sdk.RequestError{Code: -32602, Message: "Invalid params: x"}, -32602, "Invalid params: x"},
		{"failure", live, errors.New("store: disk full"), -32603, "Internal error: store: disk full"},
	} {
		var re *sdk.RequestError
		if !errors.As(acp.AnswerError(tc.ctx, tc.err), &re) || re.Code != tc.code || !strings.Contains(re.Message, tc.msg) {
			t.Errorf("%s: got %v, want %d %q", tc.name, acp.AnswerError(tc.ctx, tc.err), tc.code, tc.msg)
		}
	}
	if acp.AnswerError(live, nil) != nil {
		t.Error("no error must stay no error")
	}
}

// initialized connects a raw client and initializes the connection.
func initialized(t *testing.T) *raw {
	t.Helper()
	rw, _, _ := rawConnect(t)
	rw.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	rw.response("1")
	return rw
}

// TestNullIDIsARequest: a message with "id":null is a request (JSON-RPC 2.0 and ACP's
// RequestId allow null; only a message without an id is a notification): it is served and
// answered with id null. An answer from the client with a null id is not answered.
func TestNullIDIsARequest(t *testing.T) {
	rw := initialized(t)
	rw.send(`{"jsonrpc":"2.0","id":null,"method":"session/list","params":{}}`)
	if m := rw.response("null"); m["result"] == nil {
		t.Fatalf("session/list with a null id: %v", m)
	}
	rw.send(`{"jsonrpc":"2.0","id":null,"method":"session/teleport","params":{}}`)
	if code, _ := errorOf(t, rw.response("null")); code != -32601 {
		t.Errorf("unknown method with a null id: code %d", code)
	}
	rw.send(`{"jsonrpc":"2.0","id":null,"method":"session/load","params":{"sessionId":"a/b","cwd":"/","mcpServers":[]}}`)
	if code, _ := errorOf(t, rw.response("null")); code != -32602 {
		t.Errorf("bad sessionId with a null id: code %d", code)
	}
	// The client's answer it could not match to a request: not answered (the next answer is
	// the next request's).
	rw.send(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
	rw.send(`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`)
	if m := rw.response("2"); m["result"] == nil {
		t.Fatalf("session/list: %v", m)
	}
}

// TestJSONRPCVersionRequired: a request without "jsonrpc":"2.0" (missing, "1.0", a number) is
// invalid (-32600, its id echoed when it may be); a notification without it is dropped.
func TestJSONRPCVersionRequired(t *testing.T) {
	rw := initialized(t)
	for i, version := range []string{``, `"jsonrpc":"1.0",`, `"jsonrpc":2.0,`, `"jsonrpc":null,`, `"jsonrpc":"2.0 ",`} {
		id := strconv.Itoa(10 + i)
		rw.send(`{` + version + `"id":` + id + `,"method":"session/list","params":{}}`)
		if code, msg := errorOf(t, rw.response(id)); code != -32600 || !strings.Contains(msg, "jsonrpc") {
			t.Errorf("version %q: %d %q", version, code, msg)
		}
		// A notification without it gets no answer: the next answer is the next request's.
		rw.send(`{` + version + `"method":"session/cancel","params":{"sessionId":"nope"}}`)
	}
	rw.send(`{"id":null,"method":"session/list","params":{}}`)
	if code, _ := errorOf(t, rw.response("null")); code != -32600 {
		t.Errorf("null id without jsonrpc: code %d", code)
	}
	rw.send(`{"id":"` + "\xff" + `","method":"session/list","params":{}}`)
	if code, _ := errorOf(t, rw.response("null")); code != -32600 {
		t.Errorf("bad id without jsonrpc: code %d", code)
	}
	rw.send(`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`)
	if m := rw.response("2"); m["result"] == nil {
		t.Fatalf("session/list: %v", m)
	}
}

// TestOmittedParams: params may be omitted (JSON-RPC 2.0). For a method whose params are all
// optional that is {}, as null is; a method with required params is answered -32602 naming
// them; a notification without its required params is dropped.
func TestOmittedParams(t *testing.T) {
	rw := initialized(t)
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":"a","method":"session/list"}`,
		`{"jsonrpc":"2.0","id":"a","method":"session/list","params":null}`,
	} {
		rw.send(frame)
		if m := rw.response(`"a"`); m["result"] == nil {
			t.Errorf("%s: %v", frame, m)
		}
	}
	for _, tc := range []struct{ method, names string }{
		{"session/prompt", "sessionId, prompt"},
		{"session/new", "cwd"},
		{"session/load", "sessionId, cwd"},
		{"session/set_mode", "sessionId, modeId"},
		{"authenticate", "methodId"},
	} {
		for _, params := range []string{``, `,"params":null`} {
			rw.send(`{"jsonrpc":"2.0","id":"b","method":"` + tc.method + `"` + params + `}`)
			if code, msg := errorOf(t, rw.response(`"b"`)); code != -32602 || !strings.Contains(msg, tc.names) {
				t.Errorf("%s%s: %d %q, want -32602 naming %s", tc.method, params, code, msg, tc.names)
			}
		}
	}
	rw.send(`{"jsonrpc":"2.0","method":"session/cancel"}`)
	rw.send(`{"jsonrpc":"2.0","id":"c","method":"_hermes/unknown"}`)
	if code, _ := errorOf(t, rw.response(`"c"`)); code != -32601 {
		t.Errorf("extension method without params: code %d", code)
	}
}
