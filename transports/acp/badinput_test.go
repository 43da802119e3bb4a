package acp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/acp"
)

// TestBadInputEveryMethod extends the bad-input list to every session method: unknown
// session ids, wrong parameter types and missing parameters each get their JSON-RPC error,
// a bad notification gets none, and the agent keeps serving. It runs with the default frame
// limit, against which a 20 MB prompt is refused.
func TestBadInputEveryMethod(t *testing.T) {
	rw, srv, cwd := rawConnectWith(t, acp.Options{Logger: quiet})
	rw.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	rw.response("1")
	rw.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":` + strconvQuote(cwd) + `,"mcpServers":[]}}`)
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(rw.response("2")["result"], &created); err != nil || created.SessionID == "" {
		t.Fatal("session/new failed")
	}
	sid := strconvQuote(created.SessionID)
	cwdq := strconvQuote(cwd)
	cases := []struct {
		name, method, params string
		code                 int
	}{
		{"load unknown", "session/load", `{"sessionId":"nope","cwd":` + cwdq + `,"mcpServers":[]}`, -32602},
		{"resume unknown", "session/resume", `{"sessionId":"nope","cwd":` + cwdq + `}`, -32602},
		{"fork unknown", "session/fork", `{"sessionId":"nope","cwd":` + cwdq + `}`, -32602},
		{"close unknown", "session/close", `{"sessionId":"nope"}`, -32602},
		{"set_mode unknown", "session/set_mode", `{"sessionId":"nope","modeId":"x"}`, -32602},
		{"set_config_option unknown", "session/set_config_option", `{"sessionId":"nope","configId":"model","value":"openai:x"}`, -32602},
		{"set_config_option unknown option", "session/set_config_option", `{"sessionId":` + sid + `,"configId":"colour","value":"blue"}`, -32602},
		{"new cwd number", "session/new", `{"cwd":5,"mcpServers":[]}`, -32602},
		{"new mcpServers object", "session/new", `{"cwd":` + cwdq + `,"mcpServers":{"a":1}}`, -32602},
		{"load sessionId object", "session/load", `{"sessionId":{},"cwd":` + cwdq + `,"mcpServers":[]}`, -32602},
		{"prompt blocks not an array", "session/prompt", `{"sessionId":` + sid + `,"prompt":{"type":"text","text":"hi"}}`, -32602},
		{"prompt without params", "session/prompt", ``, -32602},
		{"list cursor number", "session/list", `{"cursor":7}`, -32602},
		{"list bad cursor", "session/list", `{"cursor":"abc"}`, -32602},
		{"authenticate unknown", "authenticate", `{"methodId":"nope"}`, -32602},
		{"extension method", "_hermes/unknown", `{}`, -32601},
	}
	for i, tc := range cases {
		id := strconvQuote("bad-" + string(rune('a'+i)))
		frame := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + tc.method + `"`
		if tc.params != "" {
			frame += `,"params":` + tc.params
		}
		rw.send(frame + `}`)
		if code := errCode(rw, rw.response(id)); code != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.code)
		}
	}
	// Notifications never get a response, however wrong.
	rw.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":42}}`)
	rw.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}`)
	// A 20 MB prompt against the default 8 MiB frame limit.
	big := strings.Repeat("x", 20<<20)
	rw.send(`{"jsonrpc":"2.0","id":90,"method":"session/prompt","params":{"sessionId":` + sid + `,"prompt":[{"type":"text","text":"` + big + `"}]}}`)
	if code := errCode(rw, rw.response("90")); code != -32600 {
		t.Errorf("20 MB prompt: code %d", code)
	}
	// The session still works.
	srv.Enqueue(openaitest.Text("still here"))
	rw.send(`{"jsonrpc":"2.0","id":91,"method":"session/prompt","params":{"sessionId":` + sid + `,"prompt":[{"type":"text","text":"hi"}]}}`)
	var res struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(rw.response("91")["result"], &res); err != nil || res.StopReason != "end_turn" {
		t.Fatalf("after bad input: %+v %v", res, err)
	}
}
