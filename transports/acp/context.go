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
	return a.meterOf(ss, ss.s.Context())
}

// meterOf is the usage_update of ss for the context use ci.
func (a *agent) meterOf(ss *session, ci engine.ContextInfo) sdk.SessionUpdate {
	rec := ss.s.Record()
	up := &sdk.SessionUsageUpdate{SessionUpdate: "usage_update", Used: ci.Used, Size: ci.Max}
	if rec.Usage.APICalls == 0 && ci.Estimated {
		up.Used = 0 // a new session: nothing has been sent to the model yet
	}
	if rec.Usage.CostUSD > 0 {
		up.Cost = &sdk.Cost{Amount: rec.Usage.CostUSD, Currency: "USD"}
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
		if si.Context != nil { // the figures of that moment: the turn has moved on since
			t.a.update(ctx, t.id, t.a.meterOf(t.ss, *si.Context))
		} else {
			t.a.update(ctx, t.id, t.a.contextMeter(t.ss))
		}
	}
}
