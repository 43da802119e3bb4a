package scripting

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/stdlib"
)

// Hook requests are read-only records with every field present (strings may be empty, lists
// may be empty), so a script never trips over a missing field, in either language. Fields are
// converted when the script reads them; tool arguments are decoded on first use.

func strList(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

var approvalFields = []string{"session_id", "surface", "tool", "command", "args", "cwd", "patterns", "pattern", "approved", "mode"}

type approvalReq struct {
	in      policy.ApprovalInput
	args    any
	decoded bool
}

func approvalInput(in policy.ApprovalInput) *approvalReq { return &approvalReq{in: in} }

func (r *approvalReq) Fields() []string { return approvalFields }

func (r *approvalReq) Field(name string) (any, bool) {
	switch name {
	case "session_id":
		return r.in.SessionID, true
	case "surface":
		return r.in.Surface, true
	case "tool":
		return r.in.Tool, true
	case "command":
		return r.in.Command, true
	case "cwd":
		return r.in.Cwd, true
	case "pattern":
		return r.in.Pattern, true
	case "patterns":
		return strList(r.in.Patterns), true
	case "approved":
		return strList(r.in.Approved), true
	case "mode":
		mode := r.in.Mode
		if mode == "" {
			mode = "default"
		}
		return mode, true
	case "args":
		if !r.decoded {
			r.decoded = true
			r.args = map[string]any{}
			if v, err := stdlib.Unmarshal(r.in.Args); err == nil && len(r.in.Args) > 0 {
				r.args = v
			}
		}
		return r.args, true
	}
	return nil, false
}

func busyInput(in policy.BusyInput) map[string]any {
	return map[string]any{
		"session_id": in.SessionID, "surface": in.Surface, "text": in.Text, "origin": in.Origin,
		"status": in.Status, "queued": in.Queued, "iteration": int64(in.Iteration),
	}
}

func steerInput(in policy.SteerInput) map[string]any {
	return map[string]any{"session_id": in.SessionID, "text": in.Text, "iteration": int64(in.Iteration), "tool": in.Tool}
}

func compactInput(in policy.CompactInput) map[string]any {
	return map[string]any{"session_id": in.SessionID, "model": in.Model, "context_used": int64(in.ContextUsed),
		"context_max": int64(in.ContextMax), "percent": int64(in.Percent), "threshold": in.Threshold, "reason": in.Reason}
}

func routeInput(in policy.RouteInput) map[string]any {
	h := make(map[string]any, len(in.Headers))
	for k, v := range in.Headers {
		h[strings.ToLower(k)] = v
	}
	return map[string]any{"surface": in.Surface, "headers": h, "client": in.Client, "session_id": in.SessionID, "model": in.Model, "cwd": in.Cwd}
}

// fields checks a decision object: only known keys, string values where strings are due.
func fields(out any, known []string, want string) (map[string]any, error) {
	m, ok := out.(map[string]any)
	if !ok {
		if out == nil {
			return nil, fmt.Errorf("%w: nothing (want %s)", ErrBadDecision, want)
		}
		return nil, fmt.Errorf("%w: a %s (want %s)", ErrBadDecision, stdlib.TypeName(out), want)
	}
	for k := range m {
		if !contains(known, k) {
			return nil, fmt.Errorf("%w: unknown field %q (want %s)", ErrBadDecision, k, strings.Join(known, ", "))
		}
	}
	return m, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func str(m map[string]any, k string) (string, error) {
	switch v := m[k].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("%w: field %q is a %s (want a string)", ErrBadDecision, k, stdlib.TypeName(m[k]))
}

func oneOf(field, v string, allowed ...string) error {
	if contains(allowed, v) {
		return nil
	}
	if v == "" {
		return fmt.Errorf("%w: %s missing (want %s)", ErrBadDecision, field, strings.Join(allowed, " | "))
	}
	return fmt.Errorf("%w: %s %q (want %s)", ErrBadDecision, field, v, strings.Join(allowed, " | "))
}

// approvalDecision accepts "allow" | "deny" | "ask" or {decision, reason, args}. Arguments
// are rewritten only through args: an object, or a string of JSON text.
func approvalDecision(out any) (policy.ApprovalDecision, error) {
	if s, ok := out.(string); ok {
		return policy.ApprovalDecision{Decision: s}, oneOf("decision", s, policy.Allow, policy.Deny, policy.Ask)
	}
	m, err := fields(out, []string{"decision", "reason", "args"}, `"allow", "deny", "ask" or {decision, reason, args}`)
	if err != nil {
		return policy.ApprovalDecision{}, err
	}
	var d policy.ApprovalDecision
	if d.Decision, err = str(m, "decision"); err != nil {
		return d, err
	}
	if err := oneOf("decision", d.Decision, policy.Allow, policy.Deny, policy.Ask); err != nil {
		return d, err
	}
	if d.Reason, err = str(m, "reason"); err != nil {
		return d, err
	}
	switch a := m["args"].(type) {
	case nil:
	case string:
		if !json.Valid([]byte(a)) {
			return d, fmt.Errorf("%w: args is a string but not JSON text", ErrBadDecision)
		}
		d.Args = json.RawMessage(a)
	case map[string]any:
		b, err := stdlib.Marshal(a, "")
		if err != nil {
			return d, fmt.Errorf("%w: args: %v", ErrBadDecision, err)
		}
		d.Args = b
	default:
		return d, fmt.Errorf("%w: args is a %s (want an object)", ErrBadDecision, stdlib.TypeName(a))
	}
	return d, nil
}

// busyDecision accepts a mode or {mode, reason}.
func busyDecision(out any) (policy.BusyDecision, error) {
	modes := []string{policy.Interrupt, policy.Queue, policy.Steer, policy.Reject}
	if s, ok := out.(string); ok {
		return policy.BusyDecision{Mode: s}, oneOf("mode", s, modes...)
	}
	m, err := fields(out, []string{"mode", "reason"}, `"interrupt", "queue", "steer", "reject" or {mode, reason}`)
	if err != nil {
		return policy.BusyDecision{}, err
	}
	var d policy.BusyDecision
	if d.Mode, err = str(m, "mode"); err != nil {
		return d, err
	}
	if err := oneOf("mode", d.Mode, modes...); err != nil {
		return d, err
	}
	d.Reason, err = str(m, "reason")
	return d, err
}

// steerDecision accepts an action or {action, text}; deliver without text delivers the
// original text.
func steerDecision(out any, text string) (policy.SteerDecision, error) {
	actions := []string{policy.Deliver, policy.Hold, policy.Drop}
	d := policy.SteerDecision{}
	if s, ok := out.(string); ok {
		d.Action = s
		if err := oneOf("action", s, actions...); err != nil {
			return d, err
		}
	} else {
		m, err := fields(out, []string{"action", "text"}, `"deliver", "hold", "drop" or {action, text}`)
		if err != nil {
			return d, err
		}
		if d.Action, err = str(m, "action"); err != nil {
			return d, err
		}
		if err := oneOf("action", d.Action, actions...); err != nil {
			return d, err
		}
		if d.Text, err = str(m, "text"); err != nil {
			return d, err
		}
	}
	if d.Action == policy.Deliver && d.Text == "" {
		d.Text = text
	}
	return d, nil
}

// routeDecision accepts {session_id, model, cwd} (each optional; missing keeps the request's)
// or nothing (route as requested).
func routeDecision(out any, in policy.RouteInput) (policy.RouteDecision, error) {
	d := policy.RouteDecision{SessionID: in.SessionID, Model: in.Model, Cwd: in.Cwd}
	if out == nil {
		return d, nil
	}
	m, err := fields(out, []string{"session_id", "model", "cwd"}, "{session_id, model, cwd} or nothing")
	if err != nil {
		return d, err
	}
	for k, dst := range map[string]*string{"session_id": &d.SessionID, "model": &d.Model, "cwd": &d.Cwd} {
		if _, set := m[k]; !set {
			continue
		}
		if *dst, err = str(m, k); err != nil {
			return d, err
		}
	}
	return d, nil
}

// compactDecision accepts true | false, nothing (the configured rule), or {compact, threshold,
// prompt}: without compact, the context is compared with threshold (the hook's, else the
// configured one); an overflow compacts unless the hook says compact: false. prompt replaces
// the summarisation prompt.
func compactDecision(out any, in policy.CompactInput) (policy.CompactDecision, error) {
	d := policy.CompactDecision{Threshold: in.Threshold}
	rule := func() bool { return in.Reason == policy.CompactOverflow || in.Over(d.Threshold) }
	switch v := out.(type) {
	case nil:
		d.Compact = rule()
		return d, nil
	case bool:
		d.Compact = v
		return d, nil
	}
	m, err := fields(out, []string{"compact", "threshold", "prompt"}, "true, false or {compact, threshold, prompt}")
	if err != nil {
		return d, err
	}
	if t, set := m["threshold"]; set && t != nil {
		f, ok := stdlib.ToFloat(t)
		if !ok || f <= 0 || f > 1 {
			return d, fmt.Errorf("%w: threshold %s (want a number above 0, at most 1: a fraction of the window)", ErrBadDecision, stdlib.Format(t))
		}
		d.Threshold = f
	}
	switch c := m["compact"].(type) {
	case nil:
		d.Compact = rule()
	case bool:
		d.Compact = c
	default:
		return d, fmt.Errorf("%w: field \"compact\" is a %s (want a boolean)", ErrBadDecision, stdlib.TypeName(c))
	}
	if d.Prompt, err = str(m, "prompt"); err != nil {
		return d, err
	}
	if len(d.Prompt) > 8000 {
		return d, fmt.Errorf("%w: prompt is %d bytes (at most 8000)", ErrBadDecision, len(d.Prompt))
	}
	return d, nil
}
