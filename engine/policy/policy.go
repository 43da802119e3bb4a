// Package policy declares the engine's decision points as one-method interfaces, and the
// built-in Go defaults. The scripting layer implements the same interfaces with user scripts;
// the engine never knows which it is calling. A hook that errors or times out fails closed:
// approval becomes deny, the others fall back to these defaults.
package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// Approval decisions.
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask"
)

// ApprovalInput describes one tool call about to run.
type ApprovalInput struct {
	SessionID string          `json:"session_id"`
	Surface   string          `json:"surface,omitempty"`
	Tool      string          `json:"tool"`
	Command   string          `json:"command,omitempty"` // terminal command text
	Args      json.RawMessage `json:"args"`
	Cwd       string          `json:"cwd"`
	Patterns  []string        `json:"patterns,omitempty"` // dangerous pattern keys matched
	Pattern   string          `json:"pattern,omitempty"`  // first of Patterns
	// Approved lists the pattern keys the user already approved for this session or always.
	Approved []string `json:"approved,omitempty"`
	// Mode is the session's approval mode (default, accept_edits, read_only); the engine
	// applies it after the policy's decision, and a script may take it into account.
	Mode string `json:"mode,omitempty"`
}

// ApprovalDecision is allow | deny | ask, with a reason and optionally rewritten arguments.
type ApprovalDecision struct {
	Decision string          `json:"decision"`
	Reason   string          `json:"reason,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
}

// Approver decides whether a tool call may run.
type Approver interface {
	Approve(ctx context.Context, in ApprovalInput) (ApprovalDecision, error)
}

// Busy-input modes.
const (
	Interrupt = "interrupt"
	Queue     = "queue"
	Steer     = "steer"
	Reject    = "reject"
)

// BusyInput describes a prompt that arrived while a turn is running.
type BusyInput struct {
	SessionID string `json:"session_id"`
	Surface   string `json:"surface,omitempty"`
	Text      string `json:"text"`
	Origin    string `json:"origin,omitempty"`
	Status    string `json:"status"` // working | waiting
	Queued    string `json:"queued,omitempty"`
	Iteration int    `json:"iteration"`
}

// BusyDecision is interrupt | queue | steer | reject.
type BusyDecision struct {
	Mode   string `json:"mode"`
	Reason string `json:"reason,omitempty"`
}

// BusyInputPolicy decides what a prompt sent while the agent is busy does.
type BusyInputPolicy interface {
	BusyInput(ctx context.Context, in BusyInput) (BusyDecision, error)
}

// Steer actions.
const (
	Deliver = "deliver"
	Hold    = "hold"
	Drop    = "drop"
)

// SteerInput describes pending guidance about to be delivered at a tool boundary.
type SteerInput struct {
	SessionID string `json:"session_id"`
	Text      string `json:"text"`
	Iteration int    `json:"iteration"`
	Tool      string `json:"tool,omitempty"` // the tool whose result carries the steer
}

// SteerDecision is deliver (optionally rewritten) | hold | drop.
type SteerDecision struct {
	Action string `json:"action"`
	Text   string `json:"text,omitempty"`
}

// Steerer decides how mid-run guidance is delivered.
type Steerer interface {
	Steer(ctx context.Context, in SteerInput) (SteerDecision, error)
}

// Compaction reasons, and the default threshold (a fraction of the window, the reference's).
const (
	DefaultCompactThreshold = 0.5

	// CompactThreshold: the next request's estimate is about to be sent (every model call).
	CompactThreshold = "threshold"
	// CompactOverflow: the provider refused the request as too long for the model's window.
	CompactOverflow = "overflow"
)

// CompactInput describes a session's context before a model call (reason threshold) or after
// the provider refused a request as too long (reason overflow).
type CompactInput struct {
	SessionID   string `json:"session_id"`
	Model       string `json:"model"`
	ContextUsed int    `json:"context_used"`
	ContextMax  int    `json:"context_max"`
	Percent     int    `json:"percent"`
	// Threshold is the configured fraction of the window (negative: automatic compaction off).
	Threshold float64 `json:"threshold"`
	Reason    string  `json:"reason"`
}

// CompactDecision says whether to compact now, the threshold it was judged against, and the
// summarisation prompt ("" the built-in one).
type CompactDecision struct {
	Compact   bool    `json:"compact"`
	Threshold float64 `json:"threshold"`
	Prompt    string  `json:"prompt,omitempty"`
}

// Compactor decides when a session's transcript is compacted and how it is summarised.
type Compactor interface {
	Compact(ctx context.Context, in CompactInput) (CompactDecision, error)
}

// Over reports whether in's context crosses threshold (never when threshold is negative).
func (in CompactInput) Over(threshold float64) bool {
	return threshold >= 0 && float64(in.ContextUsed) > threshold*float64(in.ContextMax)
}

// RouteInput describes a request that needs a session.
type RouteInput struct {
	Surface   string            `json:"surface"`
	Headers   map[string]string `json:"headers,omitempty"`
	Client    string            `json:"client,omitempty"`
	SessionID string            `json:"session_id,omitempty"` // requested, may be empty
	Model     string            `json:"model,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
}

// RouteDecision names the session to use (existing or new), and its model and cwd.
type RouteDecision struct {
	SessionID string `json:"session_id,omitempty"` // empty = create a new one
	Model     string `json:"model,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
}

// Router decides which session a request lands in.
type Router interface {
	Route(ctx context.Context, in RouteInput) (RouteDecision, error)
}

// Set bundles the hooks the engine calls. Nil members use the defaults.
type Set struct {
	Approver Approver
	Busy     BusyInputPolicy
	Steer    Steerer
	Route    Router
	Compact  Compactor
}

// Defaults is the built-in Go policy.
type Defaults struct {
	// BusyMode is the busy-input mode: interrupt (default; anything unknown), queue or steer.
	BusyMode string
}

var (
	_ Approver        = Defaults{}
	_ BusyInputPolicy = Defaults{}
	_ Steerer         = Defaults{}
	_ Router          = Defaults{}
	_ Compactor       = Defaults{}
)

// Approve allows calls that match no dangerous pattern or only already-approved ones, and asks
// otherwise.
func (Defaults) Approve(_ context.Context, in ApprovalInput) (ApprovalDecision, error) {
	for _, p := range in.Patterns {
		if !slices.Contains(in.Approved, p) {
			return ApprovalDecision{Decision: Ask, Reason: strings.Join(in.Patterns, "; ")}, nil
		}
	}
	return ApprovalDecision{Decision: Allow}, nil
}

// BusyInput applies the configured mode.
func (d Defaults) BusyInput(_ context.Context, _ BusyInput) (BusyDecision, error) {
	return BusyDecision{Mode: NormalizeBusyMode(d.BusyMode)}, nil
}

// Steer delivers unchanged.
func (Defaults) Steer(_ context.Context, in SteerInput) (SteerDecision, error) {
	return SteerDecision{Action: Deliver, Text: in.Text}, nil
}

// Route keeps the requested session (or creates one) with the requested model and cwd.
func (Defaults) Route(_ context.Context, in RouteInput) (RouteDecision, error) {
	return RouteDecision{SessionID: in.SessionID, Model: in.Model, Cwd: in.Cwd}, nil
}

// Compact compacts on an overflow, and before a request that crosses the configured threshold.
func (Defaults) Compact(_ context.Context, in CompactInput) (CompactDecision, error) {
	return CompactDecision{Compact: in.Reason == CompactOverflow || in.Over(in.Threshold), Threshold: in.Threshold}, nil
}

// NormalizeBusyMode maps anything unknown to interrupt, as the reference does.
func NormalizeBusyMode(m string) string {
	switch m {
	case Queue, Steer, Reject:
		return m
	}
	return Interrupt
}

// BusySetting is the Go busy-input policy with a mode that can change at run time
// (config.set busy). It is safe for concurrent use.
type BusySetting struct {
	mode atomic.Value // string
}

var _ BusyInputPolicy = (*BusySetting)(nil)

// NewBusySetting starts at mode (normalised).
func NewBusySetting(mode string) *BusySetting {
	b := &BusySetting{}
	b.mode.Store(NormalizeBusyMode(mode))
	return b
}

// Mode returns the current mode.
func (b *BusySetting) Mode() string { return b.mode.Load().(string) }

// Set changes the mode; unknown modes are refused.
func (b *BusySetting) Set(mode string) error {
	switch mode {
	case Interrupt, Queue, Steer, Reject:
		b.mode.Store(mode)
		return nil
	}
	return fmt.Errorf("unknown busy-input mode %q (interrupt, queue, steer or reject)", mode)
}

// BusyInput applies the current mode.
func (b *BusySetting) BusyInput(context.Context, BusyInput) (BusyDecision, error) {
	return BusyDecision{Mode: b.Mode()}, nil
}
