package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// userTurns is how many user messages the model's last request carried.
func userTurns(t *testing.T, fake *openaitest.Server) int {
	t.Helper()
	reqs := fake.Requests()
	var body struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range body.Messages {
		if m.Role == "user" {
			n++
		}
	}
	return n
}

// A response continued with previous_response_id sees the conversation up to that response:
// a turn its session took afterwards (a request whose answer the client never got) is not in
// it; the continuation goes on in a branch of the session. A chain nobody went past stays in
// its session.
func TestResponseChainIgnoresLaterTurns(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	tg.fake.Enqueue(openaitest.Text("one"), openaitest.Text("two"), openaitest.Text("aside"), openaitest.Text("three"))
	first := decode(t, tg.do(t, "POST", "/v1/responses", `{"input":"first","store":true}`, nil))
	sid := first["hermes"].(map[string]any)["session_id"].(string)
	second := decode(t, tg.do(t, "POST", "/v1/responses", `{"input":"second","store":true,"previous_response_id":"`+first["id"].(string)+`"}`, nil))
	if got := second["hermes"].(map[string]any)["session_id"]; got != sid || userTurns(t, tg.fake) != 2 {
		t.Fatalf("a plain chain: session %v (was %s), %d user turns", got, sid, userTurns(t, tg.fake))
	}
	// Another turn in the session after the second response.
	if r := tg.do(t, "POST", "/api/sessions/"+sid+"/chat", `{"input":"aside"}`, nil); r.status != 200 {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	third := decode(t, tg.do(t, "POST", "/v1/responses", `{"input":"third","store":true,"previous_response_id":"`+second["id"].(string)+`"}`, nil))
	if n := userTurns(t, tg.fake); n != 3 {
		t.Fatalf("continuing the second response the model saw %d user turns, want 3 (first, second, third)", n)
	}
	if got := third["hermes"].(map[string]any)["session_id"]; got == sid {
		t.Fatalf("the continuation went on in the session that moved past it (%s)", sid)
	}
}
