package gateway_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// anthropicTarget is a gateway whose default model is on the anthropic provider, served by the
// fake Messages API.
func anthropicTarget(t *testing.T) (*target, *anthropictest.Server) {
	t.Helper()
	srv := anthropictest.New(t)
	tg := newTarget(t, false, func(c *engine.Config, _ *gateway.Options) {
		c.Providers["anthropic"] = anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "k", MaxRetries: -1, Backoff: func(int) time.Duration { return 0 }})
		c.DefaultModel = "anthropic:claude-sonnet-4-5"
	})
	return tg, srv
}

// rpcData returns the error.data object of a JSON-RPC error.
func rpcData(t *testing.T, err error) map[string]any {
	t.Helper()
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		t.Fatalf("not a JSON-RPC error: %v", err)
	}
	b, _ := json.Marshal(e.Data)
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		t.Fatalf("error.data %s is not an object", b)
	}
	return m
}

func TestGatewayModelProviderMismatch(t *testing.T) {
	t.Parallel()
	tg, _ := anthropicTarget(t)
	c := open(t, tg, false)
	for _, params := range []map[string]any{
		{"provider": "anthropic", "model": "gpt-5.5"},
		{"model": "gpt-5.5"}, // no provider: the profile's (the default model's) provider
	} {
		code, err := callErr(t, c, "session.create", params)
		if code != jsonrpc.CodeInvalidParams {
			t.Fatalf("%v: code %d (%v)", params, code, err)
		}
		d := rpcData(t, err)
		sugg, _ := d["suggestions"].([]any)
		if d["model"] != "gpt-5.5" || d["provider"] != "anthropic" || len(sugg) == 0 || len(sugg) > 5 {
			t.Fatalf("%v: error.data %v", params, d)
		}
		for _, s := range sugg {
			if !strings.HasPrefix(s.(string), "claude-") || !strings.Contains(err.Error(), s.(string)) {
				t.Errorf("suggestion %v is not an Anthropic model repeated in the message %q", s, err)
			}
		}
	}
	// Accepted: own family not catalogued yet, another configured provider's own model, and
	// a name no catalogue knows.
	for _, params := range []map[string]any{
		{"model": "claude-sonnet-9"},
		{"provider": "openai", "model": "gpt-4.1"},
		{"provider": "anthropic", "model": "house-model"},
	} {
		if r := call(t, c, "session.create", params); r["session_id"] == "" {
			t.Fatalf("%v refused: %v", params, r)
		}
	}
	sid := create(t, c)
	if r := call(t, c, "command.dispatch", map[string]any{"session_id": sid, "name": "model", "arg": "claude-sonnet-4"}); r["type"] != "exec" {
		t.Fatal(r)
	}
	if r := call(t, c, "config.get", map[string]any{"key": "model", "session_id": sid}); r["value"] != "anthropic:claude-sonnet-4-0" {
		t.Fatalf("/model claude-sonnet-4 gave %v", r)
	}
	code, err := callErr(t, c, "config.set", map[string]any{"key": "model", "value": "openai:claude-opus-4-5", "session_id": sid})
	if d := rpcData(t, err); code != jsonrpc.CodeInvalidParams || d["provider"] != "openai" || d["model"] != "claude-opus-4-5" {
		t.Fatalf("config.set: %d %v", code, d)
	}
}

func TestGatewayAnthropicToolTurn(t *testing.T) {
	t.Parallel()
	tg, srv := anthropicTarget(t)
	srv.Enqueue(
		anthropictest.ToolUse(anthropictest.Call{Name: "terminal", Args: []string{`{"command":"echo gw`, `-anthropic"}`}}),
		anthropictest.Response{Text: []string{"It printed ", "gw-anthropic."}, Usage: &anthropictest.Usage{Input: 1_000_000, Output: 1_000_000}},
	)
	c := open(t, tg, false)
	sid := create(t, c)
	from := len(c.Events())
	done := turn(t, c, sid, "run it")
	if done["text"] != "It printed gw-anthropic." {
		t.Fatalf("message.complete %v", done)
	}
	var sawStart, sawComplete bool
	for _, e := range c.Events()[from:] {
		switch e.Type {
		case "tool.start":
			sawStart = true
		case "tool.complete":
			sawComplete = strings.Contains(string(e.Payload), "gw-anthropic")
		}
	}
	if !sawStart || !sawComplete {
		t.Errorf("tool.start %v, tool.complete with the output %v", sawStart, sawComplete)
	}
	if !strings.Contains(string(srv.Requests()[1].Body), `"type":"tool_result"`) {
		t.Error("the tool result did not reach the model")
	}
	u := call(t, c, "session.usage", map[string]any{"session_id": sid})
	// 21 in + 9 out (the default usage of the tool call), then 1M in + 1M out, at $3/$15.
	want := (21*3 + 9*15 + 1e6*3 + 1e6*15) / 1e6
	if cost, _ := u["cost_usd"].(float64); cost < want-1e-9 || cost > want+1e-9 {
		t.Errorf("session.usage cost_usd %v, want %v (%v)", u["cost_usd"], want, u)
	}
	// Context accounting: the catalogue's window for the model, and the last call's prompt
	// and answer as the size of the next request.
	if u["context_max"] != 200000.0 || u["context_used"] != 2e6 || u["context_percent"] != 1000.0 || u["context_estimated"] != false {
		t.Errorf("session.usage context fields: %v", u)
	}
	bd := call(t, c, "session.context_breakdown", map[string]any{"session_id": sid})
	cats, _ := bd["categories"].([]any)
	sum := 0.0
	for _, x := range cats {
		sum += x.(map[string]any)["tokens"].(float64)
	}
	if len(cats) != 5 || sum != bd["estimated_total"] || sum <= 0 || bd["context_max"] != 200000.0 || bd["context_source"] != "usage" || bd["model"] != u["model"] {
		t.Errorf("session.context_breakdown: %v", bd)
	}
	if r := call(t, c, "command.dispatch", map[string]any{"session_id": sid, "name": "usage"}); !strings.HasSuffix(r["output"].(string), ", $18.0002 at list prices") {
		t.Errorf("/usage: %v", r)
	}
}

func TestGatewayModelOptions(t *testing.T) {
	t.Parallel()
	tg, srv := anthropicTarget(t)
	c := open(t, tg, false)
	r := call(t, c, "model.options", map[string]any{"refresh": true})
	if r["object"] != "hermes.model_options" || r["default_model"] != "anthropic:claude-sonnet-4-5" || r["refreshed"] != true {
		t.Fatalf("model.options %v", r)
	}
	var sonnet map[string]any
	for _, p := range r["providers"].([]any) {
		row := p.(map[string]any)
		if row["id"] != "anthropic" {
			continue
		}
		if row["current"] != true {
			t.Errorf("anthropic row not current: %v", row)
		}
		for _, m := range row["models"].([]any) {
			if mm := m.(map[string]any); mm["id"] == "anthropic:claude-sonnet-4-5" {
				sonnet = mm
			}
		}
	}
	pr, _ := sonnet["pricing"].(map[string]any)
	caps, _ := sonnet["capabilities"].(map[string]any)
	if sonnet["default"] != true || sonnet["context_window"] != float64(200000) || pr["input"] != float64(3) || pr["output"] != float64(15) ||
		pr["cache_read"] != 0.3 || pr["cache_write"] != 3.75 || caps["reasoning"] != true {
		t.Fatalf("claude-sonnet-4-5 row %v", sonnet)
	}
	if code, _ := callErr(t, c, "model.options", map[string]any{"refresh": "yes"}); code != jsonrpc.CodeInvalidParams && code != 4000 {
		t.Errorf("a bad refresh: code %d", code)
	}
	if len(srv.Requests()) != 0 {
		t.Error("the model endpoint was contacted")
	}
}
