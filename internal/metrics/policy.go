package metrics

import (
	"context"
	"time"

	"github.com/hermes-go/hermes/engine/policy"
)

// Policy decorates the hooks of set: each call's latency goes to hermes_policy_hook_seconds
// and its failures to hermes_policy_hook_errors_total, labelled with the hook and the
// language of the implementation that decides for the session (a per-session dispatcher
// says it through HookLang, a script policy through Lang; anything else is Go). Nil members
// stay nil (the engine's defaults, which are not timed); members this package does not know
// pass through untouched.
func (m *Metrics) Policy(set policy.Set) policy.Set {
	out := set
	if set.Approver != nil {
		out.Approver = timedApprover{hook{m, "approval", set.Approver}}
	}
	if set.Busy != nil {
		out.Busy = timedBusy{hook{m, "busy_input", set.Busy}}
	}
	if set.Steer != nil {
		out.Steer = timedSteer{hook{m, "steer", set.Steer}}
	}
	if set.Route != nil {
		out.Route = timedRoute{hook{m, "route", set.Route}}
	}
	if set.Compact != nil {
		out.Compact = timedCompact{hook{m, "compact", set.Compact}}
	}
	return out
}

// hook is one decorated hook: its metrics, name and implementation.
type hook struct {
	m    *Metrics
	name string
	impl any
}

// HookLang answers for the decorated implementation, so whatever asks the hook's language
// (the engine's spans) still gets it through the decorator.
func (h hook) HookLang(sessionID, name string) string { return language(h.impl, sessionID, name) }

// Lang is HookLang without a session.
func (h hook) Lang() string { return language(h.impl, "", h.name) }

func language(impl any, sessionID, name string) string {
	switch h := impl.(type) {
	case interface {
		HookLang(sessionID, hook string) string
	}:
		return h.HookLang(sessionID, name)
	case interface{ Lang() string }:
		return h.Lang()
	}
	return "go"
}

func (h hook) done(sessionID string, start time.Time, err error) {
	lang := language(h.impl, sessionID, h.name)
	h.m.hookSeconds.WithLabelValues(h.name, lang).Observe(time.Since(start).Seconds())
	if err != nil {
		h.m.hookErrors.WithLabelValues(h.name, lang).Inc()
	}
}

type timedApprover struct{ hook }

func (t timedApprover) Approve(ctx context.Context, in policy.ApprovalInput) (policy.ApprovalDecision, error) {
	start := time.Now()
	d, err := t.impl.(policy.Approver).Approve(ctx, in)
	t.done(in.SessionID, start, err)
	return d, err
}

type timedBusy struct{ hook }

func (t timedBusy) BusyInput(ctx context.Context, in policy.BusyInput) (policy.BusyDecision, error) {
	start := time.Now()
	d, err := t.impl.(policy.BusyInputPolicy).BusyInput(ctx, in)
	t.done(in.SessionID, start, err)
	return d, err
}

type timedSteer struct{ hook }

func (t timedSteer) Steer(ctx context.Context, in policy.SteerInput) (policy.SteerDecision, error) {
	start := time.Now()
	d, err := t.impl.(policy.Steerer).Steer(ctx, in)
	t.done(in.SessionID, start, err)
	return d, err
}

type timedRoute struct{ hook }

func (t timedRoute) Route(ctx context.Context, in policy.RouteInput) (policy.RouteDecision, error) {
	start := time.Now()
	d, err := t.impl.(policy.Router).Route(ctx, in)
	t.done(in.SessionID, start, err)
	return d, err
}

type timedCompact struct{ hook }

func (t timedCompact) Compact(ctx context.Context, in policy.CompactInput) (policy.CompactDecision, error) {
	start := time.Now()
	d, err := t.impl.(policy.Compactor).Compact(ctx, in)
	t.done(in.SessionID, start, err)
	return d, err
}
