package gateway_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// A model refused through prompt.submit's /model carries error.data {model, provider,
// suggestions} as command.dispatch's does.
func TestGatewayPromptModelRefusalData(t *testing.T) {
	t.Parallel()
	tg, srv := anthropicTarget(t)
	c := open(t, tg, false)
	sid := create(t, c)
	for _, tc := range []struct {
		name, provider string
		suggests       string // one of the suggestions
	}{
		{"anthropic:gpt-5", "anthropic", ""},
		{"nosuch:x", "nosuch", "anthropic"},
		{"anthropic:claude sonnet", "anthropic", ""},
	} {
		code, perr := callErr(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "/model " + tc.name})
		if code != jsonrpc.CodeInvalidParams {
			t.Fatalf("prompt.submit /model %s: %d %v", tc.name, code, perr)
		}
		pd := rpcData(t, perr)
		sugg, ok := pd["suggestions"].([]any)
		if pd["provider"] != tc.provider || pd["model"] == nil || pd["model"] == "" || !ok {
			t.Fatalf("prompt.submit /model %s: error.data %v", tc.name, pd)
		}
		if tc.suggests != "" && !contains(sugg, tc.suggests) {
			t.Errorf("prompt.submit /model %s: suggestions %v lack %s", tc.name, sugg, tc.suggests)
		}
		if tc.name == "anthropic:gpt-5" { // the catalogue's verdict: as command.dispatch gives it
			_, derr := callErr(t, c, "command.dispatch", map[string]any{"session_id": sid, "name": "model", "arg": tc.name})
			if dd := rpcData(t, derr); !reflect.DeepEqual(pd, dd) || len(sugg) == 0 {
				t.Errorf("prompt.submit data %v, command.dispatch data %v", pd, dd)
			}
		}
	}
	if got := call(t, c, "config.get", map[string]any{"key": "model", "session_id": sid})["value"]; got != "anthropic:claude-sonnet-4-5" {
		t.Errorf("the session's model became %v", got)
	}
	if len(srv.Requests()) != 0 {
		t.Error("a refused /model reached the model")
	}
}

// session.create refused because the configured default model is another provider's carries
// the same error.data.
func TestGatewayCreateBadDefaultModelData(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	tg := newTarget(t, false, func(c *engine.Config, _ *gateway.Options) {
		c.Providers["anthropic"] = anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "k", MaxRetries: -1, Backoff: func(int) time.Duration { return 0 }})
		c.DefaultModel = "anthropic:gpt-5"
	})
	c := open(t, tg, false)
	code, err := callErr(t, c, "session.create", map[string]any{})
	d := rpcData(t, err)
	sugg, _ := d["suggestions"].([]any)
	if code != jsonrpc.CodeInvalidParams || d["provider"] != "anthropic" || d["model"] != "gpt-5" || len(sugg) == 0 {
		t.Fatalf("session.create: %d %v", code, d)
	}
}

func contains(xs []any, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
