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
