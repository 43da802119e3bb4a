package acp_test

import (
	"math"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
	"github.com/hermes-go/hermes/transports/acp"
)

// A tool turn on the Anthropic provider over ACP: thinking as thought chunks, the tool call,
// the answer, cache reads and writes in the prompt's usage, and a usage_update carrying the
// session's cost at the catalogue's prices and the model's context window.
func TestAnthropicTurnUsageMeter(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	srv.Enqueue(
		anthropictest.Response{Thinking: []string{"use the terminal"}, Calls: []anthropictest.Call{{Name: "terminal", Args: []string{`{"command":"echo acp-anthropic"}`}}},
			Usage: &anthropictest.Usage{Input: 100, CacheWrite: 1000, Output: 20}},
		anthropictest.Response{Text: []string{"It printed acp-anthropic."}, Usage: &anthropictest.Usage{Input: 50, CacheRead: 1000, Output: 10}},
	)
	prov := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "k", MaxRetries: -1, Backoff: func(int) time.Duration { return 0 }})
	eng, cwd := newEngineWith(t, nil, "queue", func(c *engine.Config) {
		c.Providers = map[string]model.Provider{"anthropic": prov}
		c.DefaultModel = "anthropic:claude-haiku-4-5"
	})
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	c.cl.take()
	r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("run echo")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason != sdk.StopReasonEndTurn || r.Usage == nil || r.Usage.CachedReadTokens == nil || *r.Usage.CachedReadTokens != 1000 ||
		r.Usage.CachedWriteTokens == nil || *r.Usage.CachedWriteTokens != 1000 {
		t.Fatalf("prompt response %+v usage %+v", r, r.Usage)
	}
	ns := c.cl.take()
	tr := summarize(ns)
	if tr.thought != "use the terminal" || tr.message != "It printed acp-anthropic." || len(tr.calls) != 1 {
		t.Errorf("transcript %+v", tr)
	}
	var meter *sdk.SessionUsageUpdate
	for _, n := range ns {
		if n.Update.UsageUpdate != nil {
			meter = n.Update.UsageUpdate
		}
	}
	// claude-haiku-4-5: $1 in, $5 out, $0.10 cache read, $1.25 cache write per million.
	want := (100*1 + 1000*1.25 + 20*5 + 50*1 + 1000*0.1 + 10*5) / 1e6
	if meter == nil || meter.Cost == nil || meter.Cost.Currency != "USD" || math.Abs(meter.Cost.Amount-want) > 1e-12 || meter.Size != 200000 {
		t.Fatalf("usage_update %+v, want cost %v", meter, want)
	}
	if !strings.Contains(string(srv.Requests()[1].Body), "acp-anthropic") {
		t.Error("the tool output did not reach the model")
	}
}

// A /model prompt naming another provider's model is the client's error (-32602) with the
// refusal in its data, as session/set_config_option answers it; the session keeps its model.
func TestPromptModelRefusalIsInvalidParams(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(t)
	prov := anthropic.New(anthropic.Config{BaseURL: srv.URL(), APIKey: "k", MaxRetries: -1, Backoff: func(int) time.Duration { return 0 }})
	eng, cwd := newEngineWith(t, nil, "queue", func(c *engine.Config) {
		c.Providers = map[string]model.Provider{"anthropic": prov}
		c.DefaultModel = "anthropic:claude-haiku-4-5"
	})
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	_, perr := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("/model anthropic:gpt-5.5")}})
	_, serr := c.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{SessionId: id, ConfigId: "model", Value: "anthropic:gpt-5.5"}})
	for _, err := range []error{perr, serr} {
		re, ok := err.(*sdk.RequestError)
		if !ok || re.Code != -32602 || !strings.Contains(re.Error(), "gpt-5.5") {
			t.Fatalf("refused model: %v", err)
		}
	}
	if perr.Error() != serr.Error() {
		t.Errorf("session/prompt said %q, session/set_config_option %q", perr, serr)
	}
	if len(srv.Requests()) != 0 {
		t.Error("the refused /model reached the model")
	}
}
