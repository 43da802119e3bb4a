package gateway_test

import (
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway"
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

// A rewind target sent as a string holding a number ("3") is refused 4004 like any other
// non-integer target, and nothing is cut.
func TestGatewayRewindNumericStringRefused(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, false, nil)
	c := open(t, tg, true)
	sid := create(t, c)
	for _, a := range []string{"A1", "A2"} {
		tg.srv.Enqueue(openaitest.Text(a))
		turn(t, c, sid, "Q"+a[1:])
	}
	users, before := rowIDs(t, c, sid)
	for _, extra := range []map[string]any{
		{"truncate_before_row_id": strconv.Itoa(int(users[1])), "confirm_truncate": true},
		{"truncate_before_row_id": users[1], "truncate_before_user_ordinal": "1", "confirm_truncate": true},
	} {
		p := map[string]any{"session_id": sid, "text": "edited"}
		maps.Copy(p, extra)
		if code, err := callErr(t, c, "prompt.submit", p); code != 4004 {
			t.Fatalf("%v: code %d (%v), want 4004", extra, code, err)
		}
	}
	if _, after := rowIDs(t, c, sid); len(after) != len(before) {
		t.Fatal("a refused rewind changed the transcript")
	}
}

// A refused model name repeats its suggestions in error.message, also when they come from a
// provider's configured models list or are the provider names.
func TestGatewayModelRefusalRepeatsSuggestions(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, false, func(_ *engine.Config, o *gateway.Options) {
		o.Models = func(p string) []string {
			if p == "openai" {
				return []string{"house-large", "house-small"}
			}
			return nil
		}
	})
	c := open(t, tg, false)
	code, err := callErr(t, c, "session.create", map[string]any{"model": "openai:house-medium"})
	data := rpcData(t, err)
	if code != jsonrpc.CodeInvalidParams || len(data["suggestions"].([]any)) == 0 {
		t.Fatalf("code %d data %v", code, data)
	}
	for _, s := range data["suggestions"].([]any) {
		if !strings.Contains(err.Error(), s.(string)) {
			t.Fatalf("message %q lacks suggestion %v", err, s)
		}
	}
	if _, err := callErr(t, c, "session.create", map[string]any{"model": "nope:x"}); !strings.Contains(err.Error(), "openai") {
		t.Fatalf("unknown provider: %v", err)
	}
	sid := create(t, c)
	if r := call(t, c, "command.dispatch", map[string]any{"session_id": sid, "command": "/model openai:house-small"}); r["type"] != "exec" {
		t.Fatalf("a listed name: %v", r)
	}
}
