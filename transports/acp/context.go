package acp

import (
	"context"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
)

// contextMeter is the session's usage_update: used is the tokens in its context (after a turn,
// the last model call's prompt plus answer as the provider reported them; right after a
// compaction, the estimate of the next request), size the model's context window (configured,
// catalogue or default), and cost the session's cumulative cost when its model is priced.
func (a *agent) contextMeter(ss *session) sdk.SessionUpdate {
	ci := ss.s.Context()
	up := &sdk.SessionUsageUpdate{SessionUpdate: "usage_update", Used: ci.Used, Size: ci.Max}
	if c := ss.s.Record().Usage.CostUSD; c > 0 {
		up.Cost = &sdk.Cost{Amount: c, Currency: "USD"}
	}
	return sdk.SessionUpdate{UsageUpdate: up}
}

// compaction shows a turn's automatic compaction. The stable schema the SDK speaks has no
// compaction update (compaction_update is newer and a client opt-in), so each status goes out
// as an agent_thought_chunk, which every client renders: "compacting the conversation …", then
// "compacted: N rows archived behind a summary", followed by the context meter it left.
func (t *turn) compaction(ctx context.Context, si engine.StatusInfo) {
	switch si.Kind {
	case "compacting":
		t.a.update(ctx, t.id, sdk.UpdateAgentThoughtText(si.Text+"\n"))
	case "compacted":
		t.a.update(ctx, t.id, sdk.UpdateAgentThoughtText(si.Text+"\n"))
		t.a.update(ctx, t.id, t.a.contextMeter(t.ss))
	}
}
