package scripting

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
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
	// Error, instead of Want, expects the hook to fail with an error matching this regular
	// expression ("" with ExpectError: any error).
	Error       string
	ExpectError bool
	// File and Line place the example in the policy file (Line 0: unknown).
	File string
	Line int
	// Bad is what is wrong with the example itself; it fails alone, the others still run.
	Bad error
}

// Where is file:line of the example, or the file.
func (e Example) Where() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	return e.File
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
		return "ok   " + r.Where() + " " + r.Label()
	case r.Problem() != "":
		return fmt.Sprintf("FAIL %s %s: %s", r.Where(), r.Label(), r.Problem())
	}
	return fmt.Sprintf("FAIL %s %s", r.Where(), r.Label())
}

// Problem says why the example failed ("" when it passed).
func (r ExampleResult) Problem() string {
	switch {
	case r.Pass:
		return ""
	case r.Bad != nil:
		return r.Bad.Error()
	case r.ExpectError && r.Err == nil:
		return fmt.Sprintf("want an error matching /%s/, got %s", r.Error, stdlib.Format(r.Got))
	case r.ExpectError:
		return fmt.Sprintf("want an error matching /%s/, got error: %v", r.Error, r.Err)
	case r.Err != nil:
		return r.Err.Error()
	}
	return fmt.Sprintf("want %s, got %s", stdlib.Format(r.Want), stdlib.Format(r.Got))
}

// parseExamples reads the examples list; lines are where its entries begin in the file
// (possibly nil). A malformed entry becomes an example that fails on its own (Bad).
func parseExamples(file string, raw any, lines []int) ([]Example, error) {
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
		ex := Example{Index: i + 1, Hook: HookApproval, File: file, Input: map[string]any{}}
		if i < len(lines) {
			ex.Line = lines[i]
		}
		ex.Bad = ex.parse(e)
		out = append(out, ex)
	}
	return out, nil
}

// parse fills the example from one entry of the list, or says what is wrong with it.
func (ex *Example) parse(e any) error {
	m, ok := e.(map[string]any)
	if !ok {
		return fmt.Errorf("examples[%d] is a %s (want {hook, name, input, want})", ex.Index, stdlib.TypeName(e))
	}
	ex.Want = m["want"]
	ex.Name, _ = m["name"].(string)
	if h, ok := m["hook"].(string); ok {
		ex.Hook = h
	}
	if !contains(Hooks, ex.Hook) {
		return fmt.Errorf("examples[%d]: unknown hook %q (want %s)", ex.Index, ex.Hook, strings.Join(Hooks, ", "))
	}
	switch in := m["input"].(type) {
	case map[string]any:
		ex.Input = in
	case nil:
	case []any:
		if len(in) != 0 {
			return fmt.Errorf("examples[%d]: input must be an object", ex.Index)
		}
	default:
		return fmt.Errorf("examples[%d]: input must be an object", ex.Index)
	}
	for k := range m {
		if !contains([]string{"hook", "name", "input", "want", "error"}, k) {
			return fmt.Errorf("examples[%d]: unknown field %q (want hook, name, input, want or error)", ex.Index, k)
		}
	}
	if err := CheckInput(ex.Hook, ex.Input); err != nil {
		return fmt.Errorf("examples[%d]: %w", ex.Index, err)
	}
	if e, has := m["error"]; has {
		switch x := e.(type) {
		case string:
			if _, err := regexp.Compile(x); err != nil {
				return fmt.Errorf("examples[%d]: error: %v", ex.Index, err)
			}
			ex.Error, ex.ExpectError = x, true
		case bool:
			ex.ExpectError = x
		default:
			return fmt.Errorf("examples[%d]: error must be a pattern the hook's error matches, or true", ex.Index)
		}
		if ex.ExpectError && ex.Want != nil {
			return fmt.Errorf("examples[%d]: give want or error, not both", ex.Index)
		}
		if ex.ExpectError {
			return nil
		}
	}
	switch ex.Want.(type) {
	case string, bool, map[string]any:
	default:
		return fmt.Errorf("examples[%d]: want must be a decision word, a boolean or an object, not %s", ex.Index, stdlib.TypeName(ex.Want))
	}
	return nil
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
		Command: s(in, "command"), Cwd: s(in, "cwd"), Pattern: s(in, "pattern"), Mode: s(in, "mode")}
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
	if e.Bad != nil {
		return r
	}
	var primary string
	r.Got, primary, r.Err = p.Eval(ctx, e.Hook, e.Input)
	if e.ExpectError {
		r.Pass = r.Err != nil && (e.Error == "" || regexp.MustCompile(e.Error).MatchString(r.Err.Error()))
		return r
	}
	if r.Err != nil {
		return r
	}
	switch w := e.Want.(type) {
	case string:
		r.Pass = r.Got[primary] == w
	case bool:
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

// Eval runs hook on an input written as an example's, through the same path the engine
// uses (defaults for what the input leaves out, the decision checked), and returns the
// decision as an object and the name of its main field.
func (p *Policy) Eval(ctx context.Context, hook string, in map[string]any) (got map[string]any, primary string, err error) {
	if !contains(Hooks, hook) {
		return nil, "", fmt.Errorf("unknown hook %q (want %s)", hook, strings.Join(Hooks, ", "))
	}
	if err := CheckInput(hook, in); err != nil {
		return nil, "", err
	}
	r := &ExampleResult{}
	set := p.Set()
	switch hook {
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
	case HookCompact:
		reason := s(in, "reason")
		if reason == "" {
			reason = policy.CompactThreshold
		}
		th := policy.DefaultCompactThreshold
		if f, ok := stdlib.ToFloat(in["threshold"]); ok {
			th = f
		}
		ci := policy.CompactInput{SessionID: s(in, "session_id"), Model: s(in, "model"), ContextUsed: num(in, "context_used"),
			ContextMax: num(in, "context_max"), Percent: num(in, "percent"), Threshold: th, Reason: reason}
		if ci.Percent == 0 && ci.ContextMax > 0 {
			ci.Percent = int(math.Round(100 * float64(ci.ContextUsed) / float64(ci.ContextMax)))
		}
		d, err := set.Compact.Compact(ctx, ci)
		r.Err, primary = err, "compact"
		r.Got = map[string]any{"compact": d.Compact, "threshold": d.Threshold, "prompt": d.Prompt}
	}
	return r.Got, primary, r.Err
}
