package scripting

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/stdlib"
)

// Example is one self-test a policy file carries in its `examples` export: a hook input and
// the decision expected for it. Want is a decision word ("deny") or an object whose listed
// fields must match ({decision = "deny", reason = "no rm -r"}).
type Example struct {
	Index int // 1-based position in the list
	Name  string
	Hook  string
	Input map[string]any
	Want  any
}

// Label names the example in reports.
func (e Example) Label() string {
	if e.Name != "" {
		return fmt.Sprintf("#%d %s", e.Index, e.Name)
	}
	if c, ok := e.Input["command"].(string); ok && c != "" {
		return fmt.Sprintf("#%d %s %q", e.Index, e.Hook, c)
	}
	b, _ := stdlib.Marshal(e.Input, "")
	return fmt.Sprintf("#%d %s %s", e.Index, e.Hook, clip(string(b), 80))
}

// ExampleResult is the outcome of checking one example.
type ExampleResult struct {
	Example
	Got  map[string]any // the decision as an object
	Err  error          // the hook failed (the example fails too)
	Pass bool
}

func (r ExampleResult) String() string {
	switch {
	case r.Pass:
		return "ok   " + r.Label()
	case r.Err != nil:
		return fmt.Sprintf("FAIL %s: %v", r.Label(), r.Err)
	}
	return fmt.Sprintf("FAIL %s: want %s, got %s", r.Label(), stdlib.Format(r.Want), stdlib.Format(r.Got))
}

func parseExamples(file string, raw any) ([]Example, error) {
	if raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if m, isMap := raw.(map[string]any); isMap && len(m) == 0 {
		list, ok = nil, true
	}
	if !ok {
		return nil, fmt.Errorf("%s: examples must be a list, not a %s", file, stdlib.TypeName(raw))
	}
	out := make([]Example, 0, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: examples[%d] is a %s (want {hook, name, input, want})", file, i+1, stdlib.TypeName(e))
		}
		ex := Example{Index: i + 1, Hook: HookApproval, Want: m["want"]}
		for k := range m {
			if !contains([]string{"hook", "name", "input", "want"}, k) {
				return nil, fmt.Errorf("%s: examples[%d]: unknown field %q (want hook, name, input, want)", file, i+1, k)
			}
		}
		if h, ok := m["hook"].(string); ok {
			ex.Hook = h
		}
		if !contains(Hooks, ex.Hook) {
			return nil, fmt.Errorf("%s: examples[%d]: unknown hook %q (want %s)", file, i+1, ex.Hook, strings.Join(Hooks, ", "))
		}
		ex.Name, _ = m["name"].(string)
		switch in := m["input"].(type) {
		case map[string]any:
			ex.Input = in
		case nil:
			ex.Input = map[string]any{}
		case []any:
			if len(in) != 0 {
				return nil, fmt.Errorf("%s: examples[%d]: input must be an object", file, i+1)
			}
			ex.Input = map[string]any{}
		default:
			return nil, fmt.Errorf("%s: examples[%d]: input must be an object", file, i+1)
		}
		switch ex.Want.(type) {
		case string, map[string]any:
		default:
			return nil, fmt.Errorf("%s: examples[%d]: want must be a decision word or object, not %s", file, i+1, stdlib.TypeName(ex.Want))
		}
		out = append(out, ex)
	}
	return out, nil
}

// Examples returns the policy's examples.
func (p *Policy) Examples() []Example { return p.examples }

// RunExamples checks every example through the same path the engine uses.
func (p *Policy) RunExamples(ctx context.Context) []ExampleResult {
	out := make([]ExampleResult, len(p.examples))
	for i, e := range p.examples {
		out[i] = p.Check(ctx, e)
	}
	return out
}

func (p *Policy) failures(ctx context.Context) []string {
	var out []string
	for _, r := range p.RunExamples(ctx) {
		if !r.Pass {
			out = append(out, r.String())
		}
	}
	return out
}

func s(m map[string]any, k string) string { v, _ := m[k].(string); return v }

func strs(m map[string]any, k string) ([]string, bool) {
	l, ok := m[k].([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out, true
}

func num(m map[string]any, k string) int {
	f, _ := stdlib.ToFloat(m[k])
	return int(f)
}

// ApprovalExample builds the approval input an example describes, filling in what the engine
// would: the tool (terminal), arguments from the command, and the dangerous patterns.
func (p *Policy) ApprovalExample(in map[string]any) policy.ApprovalInput {
	a := policy.ApprovalInput{SessionID: s(in, "session_id"), Surface: s(in, "surface"), Tool: s(in, "tool"),
		Command: s(in, "command"), Cwd: s(in, "cwd"), Pattern: s(in, "pattern")}
	if a.Tool == "" {
		a.Tool = "terminal"
	}
	switch args := in["args"].(type) {
	case string:
		a.Args = json.RawMessage(args)
	case map[string]any:
		a.Args, _ = stdlib.Marshal(args, "")
	}
	if len(a.Args) == 0 && a.Command != "" {
		a.Args, _ = json.Marshal(map[string]string{"command": a.Command})
	}
	if len(a.Args) == 0 {
		a.Args = json.RawMessage("{}")
	}
	a.Approved, _ = strs(in, "approved")
	pats, given := strs(in, "patterns")
	if !given && a.Pattern != "" {
		pats, given = []string{a.Pattern}, true
	}
	if !given && p.o.Classify != nil {
		var cmd string
		cmd, pats = p.o.Classify(a.Tool, a.Args, a.Cwd)
		if a.Command == "" {
			a.Command = cmd
		}
	}
	a.Patterns = pats
	if a.Pattern == "" && len(pats) > 0 {
		a.Pattern = pats[0]
	}
	return a
}

// Check evaluates one example.
func (p *Policy) Check(ctx context.Context, e Example) ExampleResult {
	r := ExampleResult{Example: e}
	set := p.Set()
	in := e.Input
	var primary string
	switch e.Hook {
	case HookApproval:
		d, err := set.Approver.Approve(ctx, p.ApprovalExample(in))
		r.Err, primary = err, "decision"
		r.Got = map[string]any{"decision": d.Decision, "reason": d.Reason}
		if len(d.Args) > 0 {
			r.Got["args"], _ = stdlib.Unmarshal(d.Args)
		}
	case HookBusyInput:
		status := s(in, "status")
		if status == "" {
			status = "working"
		}
		d, err := set.Busy.BusyInput(ctx, policy.BusyInput{SessionID: s(in, "session_id"), Surface: s(in, "surface"), Text: s(in, "text"),
			Origin: s(in, "origin"), Status: status, Queued: s(in, "queued"), Iteration: num(in, "iteration")})
		r.Err, primary = err, "mode"
		r.Got = map[string]any{"mode": d.Mode, "reason": d.Reason}
	case HookSteer:
		d, err := set.Steer.Steer(ctx, policy.SteerInput{SessionID: s(in, "session_id"), Text: s(in, "text"), Iteration: num(in, "iteration"), Tool: s(in, "tool")})
		r.Err, primary = err, "action"
		r.Got = map[string]any{"action": d.Action, "text": d.Text}
	case HookRoute:
		h := map[string]string{}
		if hm, ok := in["headers"].(map[string]any); ok {
			for k, v := range hm {
				h[k] = fmt.Sprint(v)
			}
		}
		d, err := set.Route.Route(ctx, policy.RouteInput{Surface: s(in, "surface"), Headers: h, Client: s(in, "client"),
			SessionID: s(in, "session_id"), Model: s(in, "model"), Cwd: s(in, "cwd")})
		r.Err, primary = err, "session_id"
		r.Got = map[string]any{"session_id": d.SessionID, "model": d.Model, "cwd": d.Cwd}
	}
	if r.Err != nil {
		return r
	}
	switch w := e.Want.(type) {
	case string:
		r.Pass = r.Got[primary] == w
	case map[string]any:
		r.Pass = true
		for k, v := range w {
			if !stdlib.Equal(r.Got[k], v) {
				r.Pass = false
			}
		}
	}
	return r
}
