package metrics

import (
	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/policy"
)

// maxTracked bounds the calls and approvals tracked between two events, should their second
// event never come (a session closed in between): beyond it nothing new is tracked.
const maxTracked = 1 << 16

// OnEvent is the engine's event tap (engine.Config.OnEvent): it turns journal events into
// counts. It runs on the goroutine that appended the event, often under the session's lock,
// so it only counts — deltas, the hot path, fall through the switch untouched.
func (m *Metrics) OnEvent(e engine.Event) {
	switch e.Type {
	case engine.EvMessageComplete:
		if out, ok := e.Data.(engine.Outcome); ok {
			m.outcome(out)
		}
	case engine.EvToolComplete:
		if tc, ok := e.Data.(engine.ToolComplete); ok {
			m.toolDone(e.SessionID, tc)
		}
	case engine.EvPolicyDecision:
		if d, ok := e.Data.(engine.PolicyDecision); ok {
			m.decision(e.SessionID, d)
		}
	case engine.EvRequestOpen:
		if r, ok := e.Data.(engine.Request); ok && r.Kind == engine.KindApproval {
			m.mu.Lock()
			if len(m.asked) < maxTracked {
				m.asked[r.ID] = ask{session: e.SessionID, at: r.Created}
			}
			m.mu.Unlock()
		}
	case engine.EvRequestResolved:
		if r, ok := e.Data.(engine.RequestResolved); ok && r.Kind == engine.KindApproval {
			outcome := "approved"
			if c, _ := r.Answer["choice"].(string); c == engine.ChoiceDeny {
				outcome = "denied"
			}
			m.answered(r.ID, outcome, e)
		}
	case engine.EvRequestCancel:
		if r, ok := e.Data.(engine.RequestCancel); ok && r.Kind == engine.KindApproval {
			outcome := "withdrawn" // a client's reason is free text: not a label
			if r.Reason == "timeout" || r.Reason == "interrupted" {
				outcome = r.Reason
			}
			m.answered(r.ID, outcome, e)
		}
	case engine.EvStatus:
		if st, ok := e.Data.(engine.StatusInfo); ok && st.Kind == "compacted" {
			m.compactions.Inc()
		}
	case engine.EvSessionClosed:
		m.forget(e.SessionID)
	}
}

func (m *Metrics) outcome(out engine.Outcome) {
	status := out.Status
	switch status {
	case engine.StatusCompleted, engine.StatusFailed, engine.StatusCancelled:
	default:
		status = "other"
	}
	m.turns.WithLabelValues(status).Inc()
	m.turnSeconds.WithLabelValues(status).Observe(out.Duration.Seconds())
	if c := out.Context; c.Max > 0 {
		m.contextRatio.Observe(float64(c.Used) / float64(c.Max))
		m.contextUsed.Observe(float64(c.Used))
	}
	if out.APICalls == 0 {
		return
	}
	name := out.Model
	m.modelCalls.WithLabelValues(name).Add(float64(out.APICalls))
	u := out.Usage
	for _, t := range [...]struct {
		kind string
		n    int
	}{{"input", u.PromptTokens}, {"output", u.CompletionTokens}, {"cache_read", u.CachedTokens}, {"cache_write", u.CacheWriteTokens}, {"reasoning", u.ReasoningTokens}} {
		if t.n > 0 {
			m.tokens.WithLabelValues(name, t.kind).Add(float64(t.n))
		}
	}
	if u.CostUSD > 0 {
		m.cost.WithLabelValues(name).Add(u.CostUSD)
	}
}

// decisions are the values hermes_policy_decisions_total labels as they are.
var decisions = map[string]bool{
	policy.Allow: true, policy.Deny: true, policy.Ask: true,
	policy.Interrupt: true, policy.Queue: true, policy.Steer: true, policy.Reject: true,
	policy.Deliver: true, policy.Hold: true, policy.Drop: true,
}

func (m *Metrics) decision(sid string, d engine.PolicyDecision) {
	dec := d.Decision
	if !decisions[dec] {
		dec = "other"
	}
	hook := d.Hook
	switch hook {
	case "approval", "busy_input", "steer", "route", "compact":
	default:
		hook = "other"
	}
	m.decisions.WithLabelValues(hook, dec).Inc()
	switch {
	case d.Hook == "busy_input" && d.Decision == policy.Reject:
		m.rejections.WithLabelValues("busy").Inc()
	case d.Hook == "approval" && d.CallID != "":
		m.mu.Lock()
		if len(m.decided) < maxTracked {
			m.decided[callKey{sid, d.CallID}] = d.Decision
		}
		m.mu.Unlock()
	}
}

func (m *Metrics) toolDone(sid string, tc engine.ToolComplete) {
	m.mu.Lock()
	k := callKey{sid, tc.CallID}
	d, decided := m.decided[k]
	delete(m.decided, k)
	m.mu.Unlock()
	var verdict string
	switch {
	case !decided && tc.Blocked:
		verdict = "blocked" // a hard-blocked command, an unknown tool, invalid arguments
	case tc.Blocked:
		verdict = "denied" // by the policy, by the person asked, or unanswered
	case d == policy.Ask:
		verdict = "approved"
	default:
		verdict = "allowed"
	}
	name := tc.Name
	if known := m.src.Load().known; known != nil && !known(name) {
		name = "unknown"
	}
	m.toolCalls.WithLabelValues(name, verdict).Inc()
	m.toolSeconds.WithLabelValues(name).Observe(tc.Duration.Seconds())
}

func (m *Metrics) answered(id, outcome string, e engine.Event) {
	m.mu.Lock()
	a, ok := m.asked[id]
	delete(m.asked, id)
	m.mu.Unlock()
	if ok {
		m.approvalWait.WithLabelValues(outcome).Observe(e.Time.Sub(a.at).Seconds())
	}
}

// forget drops what is tracked for a closed session: its journal takes no more events.
func (m *Metrics) forget(sid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.decided {
		if k.session == sid {
			delete(m.decided, k)
		}
	}
	for id, a := range m.asked {
		if a.session == sid {
			delete(m.asked, id)
		}
	}
}
