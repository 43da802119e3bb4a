package gateway_test

import (
	"strings"
	"testing"

	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// command.dispatch takes the seeds' one-string form {"command": "/model …"} as well as
// {name, arg}; giving both is refused.
func TestGatewayDispatchCommandForm(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, false)
		sid := create(t, c)
		r := call(t, c, "command.dispatch", map[string]any{"session_id": sid, "command": "/model openai:gpt-4o-2024-08-06"})
		if r["type"] != "exec" || !strings.Contains(r["output"].(string), "gpt-4o-2024-08-06") {
			t.Fatalf("dispatch /model: %v", r)
		}
		if r := call(t, c, "config.get", map[string]any{"key": "model", "session_id": sid}); r["value"] != "openai:gpt-4o-2024-08-06" {
			t.Fatalf("model not switched: %v", r)
		}
		if r := call(t, c, "command.dispatch", map[string]any{"session_id": sid, "command": "  /model  "}); r["output"] != "model: openai:gpt-4o-2024-08-06" {
			t.Fatalf("dispatch /model without an argument: %v", r)
		}
		if r := call(t, c, "command.dispatch", map[string]any{"session_id": sid, "command": "/title Work notes"}); r["output"] != "title set to Work notes" {
			t.Fatalf("dispatch /title: %v", r)
		}
		if code, _ := callErr(t, c, "command.dispatch", map[string]any{"session_id": sid, "command": "/model openai:o1", "name": "model"}); code != jsonrpc.CodeInvalidParams {
			t.Fatalf("command with name: code %d", code)
		}
		if code, _ := callErr(t, c, "command.dispatch", map[string]any{"session_id": sid, "command": "/nosuch x"}); code != 4004 {
			t.Fatalf("unknown command: code %d", code)
		}
		if code, _ := callErr(t, c, "command.dispatch", map[string]any{"session_id": sid, "command": "/queue"}); code != 4004 {
			t.Fatalf("/queue without text: code %d", code)
		}
		if r := call(t, c, "config.get", map[string]any{"key": "model", "session_id": sid}); r["value"] != "openai:gpt-4o-2024-08-06" {
			t.Fatalf("a refused dispatch changed the model: %v", r)
		}
	})
}
