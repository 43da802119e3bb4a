package gateway_test

import (
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// prompt.submit with display_kind "hidden" stores the user row typed hidden (the model still
// gets it); any other display_kind is a normal user row.
func TestGatewayHiddenPrompt(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, false, nil)
	c := open(t, tg, false)
	sid := create(t, c)
	for _, kind := range []string{"hidden", "steer"} {
		tg.srv.Enqueue(openaitest.Text("ok " + kind))
		from := len(c.Events())
		if r := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "scaffold " + kind, "display_kind": kind}); r["status"] != "streaming" {
			t.Fatalf("submit: %v", r)
		}
		waitType(t, c, from, sid, "message.complete")
	}
	msgs := call(t, c, "session.history", map[string]any{"session_id": sid})["messages"].([]any)
	kinds := map[string]any{}
	for _, m := range msgs {
		row := m.(map[string]any)
		if row["role"] == "user" {
			kinds[row["text"].(string)] = row["display_kind"]
		}
	}
	if kinds["scaffold hidden"] != "hidden" || kinds["scaffold steer"] != nil {
		t.Fatalf("user rows' display_kind: %v (history %v)", kinds, msgs)
	}
	if body := string(tg.srv.Requests()[0].Body); !strings.Contains(body, "scaffold hidden") {
		t.Fatal("the model did not get the hidden prompt")
	}
}
