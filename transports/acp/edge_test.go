package acp_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEveryRequestIsAnswered: a request whose method is empty, null, a number or any other
// non-string gets an invalid-request error under its own id (the SDK dropped them silently).
func TestEveryRequestIsAnswered(t *testing.T) {
	rw, _, _ := rawConnect(t)
	rw.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	rw.response("1")
	for i, method := range []string{`""`, `null`, `5`, `true`, `{}`, `[]`} {
		for _, id := range []string{`"m` + string(rune('a'+i)) + `"`, `10` + string(rune('0'+i))} {
			rw.send(`{"jsonrpc":"2.0","id":` + id + `,"method":` + method + `}`)
			if code := errCode(rw, rw.response(id)); code != -32600 {
				t.Errorf("method %s: code %d, want -32600", method, code)
			}
		}
	}
}

// TestIDsEchoedByteForByte: every response carries the id exactly as the client wrote it,
// including characters encoding/json would escape; an over-long id is refused, and the refusal
// still carries it as sent; an id that is not valid UTF-8 is refused with id null (echoed, it
// would make the answer invalid JSON).
func TestIDsEchoedByteForByte(t *testing.T) {
	rw, _, _ := rawConnect(t)
	id := "\"a<b>&\u2028é\""
	rw.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := rw.response(id); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	for _, id := range []string{`1.50`, `1E2`, `"\u003c"`, `"\/"`} {
		rw.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"_hermes/unknown","params":{}}`)
		if code := errCode(rw, rw.response(id)); code != -32601 {
			t.Errorf("id %s: code %d, want -32601", id, code)
		}
	}
	for _, tc := range []struct{ id, echo string }{
		{"\"a\xffb\"", "null"},
		{`"` + strings.Repeat("x", 2000) + `"`, `"` + strings.Repeat("x", 2000) + `"`},
	} {
		rw.send(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"session/list","params":{}}`)
		if code := errCode(rw, rw.response(tc.echo)); code != -32600 {
			t.Errorf("bad id %.20q: code %d, want -32600", tc.id, code)
		}
	}
}

// TestSessionIDParamsChecked: a sessionId that is not an identifier (not UTF-8, over long, a
// separator or a control character) is invalid params before any session method sees it.
func TestSessionIDParamsChecked(t *testing.T) {
	rw, _, cwd := rawConnect(t)
	rw.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	rw.response("1")
	cwdq := strconvQuote(cwd)
	for i, sid := range []string{"\"a\xffb\"", `"` + strings.Repeat("s", 300) + `"`, `"a/b"`, `"a\u0000b"`, `"\u202egnp"`} {
		id := `"sid-` + string(rune('a'+i)) + `"`
		rw.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"session/load","params":{"sessionId":` + sid + `,"cwd":` + cwdq + `,"mcpServers":[]}}`)
		m := rw.response(id)
		if code := errCode(rw, m); code != -32602 {
			t.Errorf("sessionId %.20q: code %d, want -32602", sid, code)
		}
		var e struct{ Message string }
		_ = json.Unmarshal(m["error"], &e)
		if !strings.Contains(e.Message, "sessionId") {
			t.Errorf("sessionId %.20q: message %q does not name the parameter", sid, e.Message)
		}
	}
	// The connection keeps serving.
	rw.send(`{"jsonrpc":"2.0","id":99,"method":"session/list","params":{}}`)
	if m := rw.response("99"); m["result"] == nil {
		t.Fatalf("session/list after refusals: %v", m)
	}
}
