package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/tool"
)

// parallelSafe tools may run concurrently within one batch: they only read.
var parallelSafe = map[string]bool{"read_file": true, "search_files": true}

// runTools runs a batch of tool calls and returns their results in call order. A batch made
// only of read-only tools runs concurrently; any other batch runs in order, so approvals are
// asked one at a time and side effects happen in the order the model asked for them.
// done receives each result in call order: after each call in an ordered batch, after the
// whole batch in a concurrent one.
func (t *turnState) runTools(calls []model.ToolCall, done func(i int, r tool.Result)) {
	concurrent := len(calls) > 1
	for _, c := range calls {
		if !parallelSafe[c.Name] {
			concurrent = false
		}
	}
	if concurrent {
		t.ckpt = nil // the calls run on goroutines of their own: no checkpoint
		results := make([]tool.Result, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Go(func() { results[i] = t.runTool(c) })
		}
		wg.Wait()
		for i, r := range results {
			done(i, r)
		}
		return
	}
	for i, c := range calls {
		if t.ctx.Err() != nil {
			done(i, tool.Result{Content: "Not run: the turn was interrupted.", IsError: true})
			continue
		}
		done(i, t.runTool(c))
	}
}

// runTool is one call: guard → policy → approval → run.
func (t *turnState) runTool(c model.ToolCall) tool.Result {
	s := t.s
	t.nTools.Add(1)
	args := json.RawMessage(strings.TrimSpace(c.Arguments))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !t.adoptedAt(c.ID) { // its first holder published its start
		s.j.append(Event{Type: EvToolStart, TurnID: t.id, Data: ToolStart{CallID: c.ID, Name: c.Name, Args: args}})
	}
	start := time.Now()
	ctx, span := t.toolSpan(c)
	res, blocked := t.callTool(ctx, c, args)
	// The server's own credentials never leave through a tool (a terminal that cats
	// config.yaml, a file tool reading it): the model, the transcript and every client see them
	// masked.
	res.Content = redact.Registered(res.Content)
	t.endToolSpan(ctx, span, c, res, blocked)
	s.j.append(Event{Type: EvToolComplete, TurnID: t.id, Data: ToolComplete{CallID: c.ID, Name: c.Name, Args: args, Result: res, Duration: time.Since(start), Blocked: blocked}})
	return res
}

func (t *turnState) callTool(ctx context.Context, c model.ToolCall, args json.RawMessage) (res tool.Result, blocked bool) {
	s := t.s
	tl, err := s.lookupTool(c.Name)
	if err != nil {
		return tool.Errorf("Unknown tool %q. Available tools: %s.", c.Name, strings.Join(s.toolNames(), ", ")), true
	}
	if !json.Valid(args) {
		return tool.Errorf("Invalid arguments for %s: not valid JSON (%s). Send a JSON object matching the tool's schema.", c.Name, clip(string(args), 200)), true
	}
	if r, ok := tl.(tool.Restorer); ok {
		s.restoreState(t.ctx, r)
	}
	env := s.toolEnv(t, c)
	var v tool.Verdict
	if g, ok := tl.(tool.Guard); ok {
		v = g.Check(args, env)
	}
	if v.Blocked {
		return tool.Result{Content: "BLOCKED (hardline): " + v.Reason + ". This command is never allowed; do not retry or rephrase it.", IsError: true, Meta: map[string]any{"hardline": true, "command": v.Command}}, true
	}
	args, ok, res := t.approve(ctx, c, tl, args, v)
	if !ok {
		return res, true
	}
	if res.Meta["user_consent"] == true {
		env.ReviewEdits = nil // a person approved this very call already
	}
	res, err = tl.Call(ctx, tool.Call{ID: c.ID, Name: c.Name, Args: args}, env)
	if err != nil {
		if t.ctx.Err() != nil {
			return tool.Result{Content: "Interrupted: " + err.Error(), IsError: true}, false
		}
		return tool.Errorf("Tool %s failed: %v", c.Name, err), false
	}
	return res, false
}

// approve runs the approval policy and, when it says ask, the approval request. It returns the
// (possibly rewritten) arguments and whether the call may run; when not, res says why.
func (t *turnState) approve(ctx context.Context, c model.ToolCall, tl tool.Tool, args json.RawMessage, v tool.Verdict) (json.RawMessage, bool, tool.Result) {
	s := t.s
	if p := t.adoptedRequest(c.ID); p != nil {
		// Adopted at this approval: the first holder's policy asked already, and the request
		// it opened is open again here; the person's answer decides.
		if a, ok := p.req.Payload["args"]; ok {
			if b, err := json.Marshal(a); err == nil && json.Valid(b) && string(b) != "null" {
				args = b
			}
		}
		ans, err := s.requestHost().await(ctx, p)
		return t.approval(args, v, ans, err)
	}
	approved := s.approvedPatterns()
	// A sub-agent answers to its delegating session's client, whose mode governs it too.
	mode := s.requestHost().ApprovalMode()
	in := policy.ApprovalInput{SessionID: s.id, Surface: t.origin, Tool: c.Name, Command: v.Command, Args: args, Cwd: s.Record().Cwd, Patterns: v.Patterns, Approved: approved, Mode: mode}
	if len(v.Patterns) > 0 {
		in.Pattern = v.Patterns[0]
	}
	pctx, span := s.e.policySpan(ctx, "approval", s.id, s.e.cfg.Policy.Approver)
	hctx, cancel := context.WithTimeout(pctx, s.e.cfg.HookTimeout)
	d, err := s.e.cfg.Policy.Approver.Approve(hctx, in)
	cancel()
	if err == nil && d.Decision != policy.Allow && d.Decision != policy.Deny && d.Decision != policy.Ask {
		err = fmt.Errorf("unknown approval decision %q", d.Decision)
	}
	if err != nil { // fail closed
		endPolicySpan(span, policy.Deny, err)
		s.j.append(Event{Type: EvPolicyDecision, TurnID: t.id, Data: PolicyDecision{Hook: "approval", CallID: c.ID, Decision: policy.Deny, Error: err.Error()}})
		return nil, false, tool.Result{Content: "BLOCKED: the approval policy failed (" + err.Error() + "), so the call was denied. Do NOT retry.", IsError: true}
	}
	d = applyMode(mode, in, d)
	endPolicySpan(span, d.Decision, nil)
	s.j.append(Event{Type: EvPolicyDecision, TurnID: t.id, Data: PolicyDecision{Hook: "approval", CallID: c.ID, Decision: d.Decision, Reason: d.Reason}})
	if len(d.Args) > 0 {
		if !json.Valid(d.Args) {
			return nil, false, tool.Result{Content: "BLOCKED: the approval policy rewrote the arguments into invalid JSON. Do NOT retry.", IsError: true}
		}
		args = d.Args
		if g, ok := tl.(tool.Guard); ok { // rewritten arguments are checked again
			if v2 := g.Check(args, s.toolEnv(t, c)); v2.Blocked {
				return nil, false, tool.Result{Content: "BLOCKED (hardline): " + v2.Reason + ".", IsError: true}
			}
		}
	}
	switch d.Decision {
	case policy.Allow:
		return args, true, tool.Result{}
	case policy.Deny:
		reason := d.Reason
		if reason == "" {
			reason = "denied by policy"
		}
		return nil, false, tool.Result{Content: "BLOCKED: " + reason + ". Do NOT retry or rephrase this call.", IsError: true, Meta: map[string]any{"outcome": "denied"}}
	}
	desc := strings.Join(v.Patterns, "; ")
	if desc == "" {
		desc = d.Reason
	}
	payload := map[string]any{
		"tool": c.Name, "call_id": c.ID, "command": v.Command, "args": args,
		"pattern_key": in.Pattern, "pattern_keys": v.Patterns, "description": desc, "allow_permanent": len(v.Patterns) > 0,
	}
	// The call and the results before it are stored before a person is asked: the turn can be
	// adopted at this point by another process should this one go away (adopt.go).
	if err := t.checkpoint(); err != nil {
		t.noteStoreErr(err)
		return nil, false, tool.Result{Content: "BLOCKED: the call could not be recorded before asking for approval (" + err.Error() + "), so it was not run. Do NOT retry.", IsError: true}
	}
	// The policy's "ask" is stored before the request is published: a process that takes the
	// session over finds the call at its checkpoint whenever a client could have seen the
	// request. (Failing that, the turn is restart-unknown there.)
	host := s.requestHost()
	sctx, cancel := context.WithTimeout(t.ctx, storeTimeout)
	_ = host.j.stored(sctx, host.j.lastSeq())
	cancel()
	ans, err := host.ask(ctx, t.id, KindApproval, payload, s.e.cfg.ApprovalTimeout)
	return t.approval(args, v, ans, err)
}

// approval maps the answer to an approval request to approve's results.
func (t *turnState) approval(args json.RawMessage, v tool.Verdict, ans map[string]any, err error) (json.RawMessage, bool, tool.Result) {
	s := t.s
	choice, _ := ans["choice"].(string)
	switch {
	case errors.Is(err, ErrRequestTimeout):
		return nil, false, tool.Result{Content: "BLOCKED: the approval request timed out. Silence is not consent. Do NOT retry.", IsError: true, Meta: map[string]any{"outcome": "timeout", "user_consent": false}}
	case err != nil:
		return nil, false, tool.Result{Content: "BLOCKED: the approval request was withdrawn (" + err.Error() + "). Do NOT retry.", IsError: true, Meta: map[string]any{"outcome": "withdrawn", "user_consent": false}}
	case choice == ChoiceDeny:
		return nil, false, tool.Result{Content: "BLOCKED: the user denied this command. Do NOT retry or rephrase it; ask the user what to do instead.", IsError: true, Meta: map[string]any{"outcome": "denied", "user_consent": false}}
	}
	// The answer is stored before the call runs: a process that takes the session over after
	// this one went away must not find the call still waiting and ask again (adopt.go).
	host := s.requestHost()
	sctx, cancel := context.WithTimeout(t.ctx, storeTimeout)
	err = host.j.stored(sctx, host.j.lastSeq())
	cancel()
	if err == nil && !host.j.writesLog() {
		// The log refused a write since (fenced, or the store failed): the answer's event
		// stayed in this process.
		err = fmt.Errorf("the event log of session %s is no longer written by this process", host.id)
	}
	if err != nil {
		t.noteStoreErr(fmt.Errorf("record the approval: %w", err))
		return nil, false, tool.Result{Content: "BLOCKED: the approval could not be recorded (" + err.Error() + "), so the call was not run. Do NOT retry.", IsError: true}
	}
	switch {
	case choice == ChoiceSession || choice == ChoiceAlways:
		s.mu.Lock()
		for _, p := range v.Patterns {
			s.approved[p] = true
		}
		s.mu.Unlock()
		if choice == ChoiceAlways {
			for _, p := range v.Patterns {
				if err := s.wst().PutKV(context.Background(), alwaysKey(p), []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
					// The call was approved and runs; the turn fails once the batch is done.
					t.noteStoreErr(fmt.Errorf("save approval for %q: %w", p, err))
					break
				}
			}
		}
	}
	return args, true, tool.Result{Meta: map[string]any{"user_consent": true}}
}

// approvedPatterns lists the pattern keys approved for this session or always.
func (s *Session) approvedPatterns() []string {
	s.mu.Lock()
	out := make([]string, 0, len(s.approved))
	for p := range s.approved {
		out = append(out, p)
	}
	s.mu.Unlock()
	out = append(out, s.e.always(context.Background())...)
	slices.Sort(out)
	return slices.Compact(out)
}

// requestHost is the session whose clients answer this session's requests: a delegated
// sub-agent asks through its top-level ancestor, where the people are.
func (s *Session) requestHost() *Session {
	h := s
	for i := 0; i < 32 && h.parent != nil; i++ {
		h = h.parent
	}
	return h
}

// toolEnv is what a tool call may touch.
func (s *Session) toolEnv(t *turnState, c model.ToolCall) *tool.Env {
	rec := s.Record()
	return &tool.Env{
		SessionID:    s.id,
		Cwd:          rec.Cwd,
		AllowOutside: s.e.cfg.AllowOutsideCwd,
		Ask: func(ctx context.Context, q tool.Question) (map[string]any, error) {
			p := q.Payload
			if p == nil {
				p = map[string]any{}
			}
			p["call_id"] = c.ID
			return s.requestHost().ask(ctx, t.id, q.Kind, p, s.e.cfg.RequestTimeout)
		},
		Progress: func(text string) {
			s.j.append(Event{Type: EvToolProgress, TurnID: t.id, Text: redact.Registered(text), Data: ToolProgress{CallID: c.ID, Name: c.Name}})
		},
		Processes: &s.procs,
		FS:        s.fileSystem(),
		State:     &s.toolState,
		Delegate: func(ctx context.Context, goal string, _ []string) (string, error) {
			return s.delegate(ctx, goal)
		},
		ReviewEdits: s.editReviewer(t, c),
	}
}

// steerDecision asks the steer hook; failures fall back to delivering unchanged.
func (s *Session) steerDecision(t *turnState, text, toolName string) policy.SteerDecision {
	pctx, span := s.e.policySpan(t.ctx, "steer", s.id, s.e.cfg.Policy.Steer)
	hctx, cancel := context.WithTimeout(pctx, s.e.cfg.HookTimeout)
	defer cancel()
	d, err := s.e.cfg.Policy.Steer.Steer(hctx, policy.SteerInput{SessionID: s.id, Text: text, Iteration: t.iteration, Tool: toolName})
	if err == nil && d.Action != policy.Deliver && d.Action != policy.Hold && d.Action != policy.Drop {
		err = fmt.Errorf("unknown steer action %q", d.Action)
	}
	var fd policy.SteerDecision
	defer func() { endPolicySpan(span, cmp.Or(fd.Action, d.Action), err) }()
	if err != nil {
		var ferr error
		fd, ferr = s.e.cfg.Fallback.Steer.Steer(context.WithoutCancel(hctx), policy.SteerInput{SessionID: s.id, Text: text, Iteration: t.iteration, Tool: toolName})
		if ferr != nil || (fd.Action != policy.Deliver && fd.Action != policy.Hold && fd.Action != policy.Drop) {
			fd = policy.SteerDecision{Action: policy.Deliver, Text: text}
		}
		s.j.append(Event{Type: EvPolicyDecision, TurnID: t.id, Data: PolicyDecision{Hook: "steer", Decision: fd.Action, Error: err.Error()}})
		return fd
	}
	if d.Action != policy.Deliver || d.Text != text {
		s.j.append(Event{Type: EvPolicyDecision, TurnID: t.id, Data: PolicyDecision{Hook: "steer", Decision: d.Action}})
	}
	return d
}

// restoreState rebuilds a Restorer tool's state from its newest result in the active
// transcript, once per live session and only when the state is empty (a session loaded from
// the store). A store error leaves the state empty: the tool then starts afresh.
func (s *Session) restoreState(ctx context.Context, r tool.Restorer) {
	name := r.Spec().Name
	s.mu.Lock()
	done := s.restored[name]
	if !done {
		if s.restored == nil {
			s.restored = map[string]bool{}
		}
		s.restored[name] = true
	}
	s.mu.Unlock()
	if done || s.toolState.Get(r.StateKey()) != nil || !s.Stored() {
		return
	}
	rows, err := s.History(ctx, store.RowQuery{})
	if err != nil {
		return
	}
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Role == "tool" && rows[i].ToolName == name && r.Restore(&s.toolState, rows[i].Content) {
			return
		}
	}
}

// toolStateRestorable reports whether every entry of the session's tool state belongs to a
// Restorer tool, so releasing the session loses nothing the transcript cannot give back.
func (s *Session) toolStateRestorable() bool {
	keys := s.toolState.Keys()
	if len(keys) == 0 {
		return true
	}
	restorable := map[string]bool{}
	for _, n := range s.e.cfg.Tools.Names() {
		if t, err := s.e.cfg.Tools.Get(n); err == nil {
			if r, ok := t.(tool.Restorer); ok {
				restorable[r.StateKey()] = true
			}
		}
	}
	for _, k := range keys {
		if !restorable[k] {
			return false
		}
	}
	return true
}
