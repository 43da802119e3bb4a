package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fasthttp/websocket"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// An API session a WebSocket gateway client resumed has a gateway entry that outlives the
// client's connection (a reconnect attaches by its runtime id). The sweep must leave such a
// session alone: releasing it would leave the gateway holding a dead object.
func TestSweepKeepsSessionsTheGatewayHolds(t *testing.T) {
	tg := newTarget(t, releaseSoon)
	tg.fake.Enqueue(openaitest.Text("answer"))
	r := tg.do(t, "POST", "/v1/chat/completions", `{"model":"openai:fake-agent","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{httpapi.HeaderSessionID: "gw-held"})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if tg.srv.KeepsSession("gw-held") {
		t.Fatal("an idle API session nobody else holds must be releasable")
	}

	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(tg.base, "http")+"/api/ws?token="+testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "session.resume", "params": map[string]any{"session_id": "gw-held"}}); err != nil {
		t.Fatal(err)
	}
	for {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := conn.ReadJSON(&msg); err != nil {
			t.Fatal(err)
		}
		if string(msg.ID) != "1" {
			continue // a notification
		}
		if msg.Error != nil {
			t.Fatalf("session.resume: %s", msg.Error)
		}
		break
	}
	if !tg.srv.KeepsSession("gw-held") {
		t.Fatal("the sweep would release a session the gateway holds")
	}
}
