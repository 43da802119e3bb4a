package gateway

import (
	"encoding/json"
	"strings"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
)

// render maps an engine event to the gateway's event params; ok is false for events the
// gateway does not show.
func render(l *live, ev engine.Event) (eventParams, bool) {
	p := eventParams{Type: string(ev.Type), SessionID: l.rid, Seq: ev.Seq, Generation: l.s.Generation()}
	switch d := ev.Data.(type) {
	case nil:
		if ev.Type == engine.EvMessageDelta || ev.Type == engine.EvReasoningDelta {
			p.Payload = map[string]any{"text": ev.Text}
		}
	case engine.TurnStart:
		// message.start: no payload, as in the reference
	case engine.Outcome:
		p.Payload = completePayload(d)
	case engine.ToolGenerating:
		if d.Name == "" {
			return p, false // argument fragments of a call already announced
		}
		p.Payload = map[string]any{"name": d.Name, "tool_id": d.CallID}
	case engine.ToolStart:
		p.Payload = map[string]any{"tool_id": d.CallID, "name": d.Name, "args": json.RawMessage(d.Args), "context": toolContext(d.Name, d.Args)}
	case engine.ToolProgress:
		p.Payload = map[string]any{"tool_id": d.CallID, "name": d.Name, "text": ev.Text}
	case engine.ToolComplete:
		pl := map[string]any{
			"tool_id": d.CallID, "name": d.Name, "args": json.RawMessage(d.Args),
			"duration_s": d.Duration.Seconds(), "result": toolResult(d.Result.Content),
			"result_text": d.Result.Content, "is_error": d.Result.IsError,
		}
		if diff, ok := d.Result.Meta["diff"].(string); ok && diff != "" {
			pl["inline_diff"] = diff
		}
		if d.Blocked {
			pl["blocked"] = true
		}
		p.Payload = pl
	case engine.RequestCancel:
		p.Payload = map[string]any{"id": d.ID, "method": d.Kind, "reason": d.Reason}
	case engine.RequestResolved:
		// Another path settled it: withdraw the card everywhere it is still open.
		p.Type = "request.cancel"
		p.Payload = map[string]any{"id": d.ID, "method": d.Kind, "reason": "resolved"}
	case engine.StatusInfo:
		kind, text := d.Kind, d.Text
		if kind == "" {
			kind, text = "lifecycle", string(d.Status)
		}
		p.Payload = map[string]any{"kind": kind, "text": text, "status": d.Status}
	case engine.Info:
		if ev.Type == engine.EvSessionTitle {
			p.Payload = map[string]any{"session_id": d.SessionID, "title": d.Title}
			break
		}
		// session.info and model.changed
		p.Type = "session.info"
		p.Payload = liveInfo(l)
	case engine.SteerDelivered:
		p.Payload = map[string]any{"text": d.Text, "steer_ids": d.IDs, "tool_id": d.CallID}
	case engine.QueueInfo:
		var q any
		if d.Queued != "" {
			q = map[string]any{"user": d.Queued}
		}
		p.Payload = map[string]any{"queued": q}
	case engine.PolicyDecision:
		p.Payload = d
	case engine.SubagentInfo:
		p.Payload = subagentPayload(ev.Type, d)
	case engine.UsageInfo:
		p.Payload = map[string]any{"usage": tickUsage(l.s.Record(), d)}
	case engine.TerminalOutput:
		if d.ExitCode != nil {
			p.Payload = map[string]any{"process_id": d.ProcessID, "exit_code": *d.ExitCode}
			break
		}
		p.Payload = map[string]any{"process_id": d.ProcessID, "chunk": d.Chunk}
	case engine.ErrorInfo:
		p.Payload = map[string]any{"message": d.Message}
	case engine.SessionClosed:
		return p, false
	case engine.SurfaceEvent:
		// Events raised by surfaces (background.complete and the like) carry their payload.
		p.Payload = d
	case engine.Request:
		// Open requests go out as requests, not events; the callers never get here with one.
		p.Payload = d
	}
	return p, true
}

// subagentPayload is the payload of the subagent.* events: spawn_requested (queued), start,
// tool (the child's tool name and a preview of its call) and progress (the child's usage so
// far) while it runs, complete with its status, a summary and its usage.
func subagentPayload(typ engine.EventType, d engine.SubagentInfo) map[string]any {
	pl := map[string]any{
		"goal": d.Goal, "task_count": 1, "task_index": 0, "subagent_id": d.ChildID, "child_session_id": d.ChildID,
		"depth": d.Depth, "model": d.Model, "status": "running",
	}
	if d.Depth > 1 {
		pl["parent_id"] = d.ParentID // the parent is itself a sub-agent
	}
	usage := func(u model.Usage, calls int) {
		pl["input_tokens"], pl["output_tokens"], pl["reasoning_tokens"], pl["api_calls"] = u.PromptTokens, u.CompletionTokens, u.ReasoningTokens, calls
	}
	switch {
	case typ == engine.EvSubagentSpawn:
		pl["status"] = "queued"
	case typ == engine.EvSubagentTool:
		pl["tool_name"], pl["tool_preview"] = d.ToolName, d.Preview
	case d.Usage != nil:
		usage(d.Usage.Usage, d.Usage.APICalls)
		pl["tool_count"] = d.Usage.ToolCalls
	case d.Outcome != nil:
		pl["status"] = subagentStatus(d.Outcome.Status)
		pl["summary"] = trimText(d.Outcome.Text, 400)
		pl["duration_seconds"] = d.Duration.Seconds()
		usage(d.Outcome.Usage, d.Outcome.APICalls)
		if d.Outcome.Error != "" {
			pl["error"] = d.Outcome.Error
		}
	}
	return pl
}

// tickUsage is a mid-turn session.usage: the session's stored usage plus the running turn's
// so far.
func tickUsage(rec engine.Record, d engine.UsageInfo) map[string]any {
	u := rec.Usage
	in, out := u.InputTokens+int64(d.Usage.PromptTokens), u.OutputTokens+int64(d.Usage.CompletionTokens)
	return withCost(map[string]any{
		"model": d.Model, "input": in, "output": out, "reasoning": u.ReasoningTokens + int64(d.Usage.ReasoningTokens),
		"prompt": in, "completion": out, "total": in + out, "calls": u.APICalls + int64(d.APICalls),
		"tool_calls": u.ToolCalls + d.ToolCalls, "cache_read": u.CachedTokens + int64(d.Usage.CachedTokens),
	}, u.CacheWriteTokens+int64(d.Usage.CacheWriteTokens), u.CostUSD+d.Usage.CostUSD)
}

func subagentStatus(s string) string {
	switch s {
	case engine.StatusCompleted:
		return "completed"
	case engine.StatusCancelled:
		return "interrupted"
	}
	return "failed"
}

// completePayload is message.complete: status complete | error | interrupted.
func completePayload(o engine.Outcome) map[string]any {
	status := "complete"
	switch {
	case o.Interrupted:
		status = "interrupted"
	case o.Error != "":
		status = "error"
	}
	text := o.Text
	if text == "" && o.Error != "" && !o.Interrupted {
		text = "Error: " + o.Error
	}
	p := map[string]any{
		"text": text, "status": status, "usage": usageOf(o.Model, o.Usage, o.APICalls),
		"turn_exit_reason": o.ExitReason, "completed": o.Completed, "partial": o.Partial,
	}
	if o.Reasoning != "" {
		p["reasoning"] = o.Reasoning
	}
	if o.Error != "" {
		p["error"] = o.Error
	}
	if o.PendingSteer != "" {
		p["pending_steer"] = o.PendingSteer
	}
	return p
}

// usageOf renders a turn's usage in the gateway's Usage shape.
func usageOf(modelName string, u model.Usage, calls int) map[string]any {
	return withCost(map[string]any{
		"model": modelName, "input": u.PromptTokens, "output": u.CompletionTokens, "reasoning": u.ReasoningTokens,
		"prompt": u.PromptTokens, "completion": u.CompletionTokens, "total": u.TotalTokens, "calls": calls,
		"cache_read": u.CachedTokens,
	}, int64(u.CacheWriteTokens), u.CostUSD)
}

// withCost adds the prompt-cache writes and the cost at catalogue prices when there are any
// (a model without prices, or a provider without a prompt cache, reports neither).
func withCost(m map[string]any, cacheWrite int64, cost float64) map[string]any {
	if cacheWrite != 0 {
		m["cache_write"] = cacheWrite
	}
	if cost != 0 {
		m["cost_usd"] = cost
	}
	return m
}

// sessionUsage renders stored session usage in the gateway's Usage shape.
func sessionUsage(rec engine.Record) map[string]any {
	u := rec.Usage
	return withCost(map[string]any{
		"model": rec.Model, "input": u.InputTokens, "output": u.OutputTokens, "reasoning": u.ReasoningTokens,
		"prompt": u.InputTokens, "completion": u.OutputTokens, "total": u.InputTokens + u.OutputTokens,
		"calls": u.APICalls, "tool_calls": u.ToolCalls, "cache_read": u.CachedTokens,
	}, u.CacheWriteTokens, u.CostUSD)
}

// lazyNow is info.lazy: true for a session this gateway created until its first turn starts
// (the reference builds its agent, and writes its row, then). Once false it stays false.
func (l *live) lazyNow() bool {
	if !l.lazy.Load() {
		return false
	}
	if l.s.Unprompted() {
		return true
	}
	l.lazy.Store(false)
	return false
}

// liveInfo is SessionLiveInfo.
func liveInfo(l *live) map[string]any { return liveInfoOf(l, l.s.Snapshot()) }

// liveInfoOf is liveInfo with the session's state from snap (a LiveSnapshot: the turn another
// process runs for it).
func liveInfoOf(l *live, snap engine.Snapshot) map[string]any {
	rec := l.s.Record()
	prov, _ := model.ParseName(rec.Model)
	info := map[string]any{
		"model": rec.Model, "provider": prov, "cwd": rec.Cwd, "title": rec.Title,
		"stored_session_id": rec.ID, "running": snap.Inflight != nil, "approval_mode": "manual",
		"usage": sessionUsage(rec), "status": snap.Info.Status, "tools": map[string]any{}, "skills": map[string]any{},
		"desktop_contract": 2, "lazy": l.lazyNow(),
	}
	if snap.Inflight != nil {
		info["turn_started_at"] = snap.Inflight.Started.Unix()
	}
	if st := mcpStatus(l); st != nil {
		info["mcp_servers"] = st
	}
	return info
}

// mcpStatus is the MCP server status for session info, nil when no server is configured (the
// field is then left out, so sessions without MCP keep their exact info shape).
func mcpStatus(l *live) any {
	if l.mcp == nil {
		return nil
	}
	return l.mcp()
}

// toolContext is a one-line preview of a call from its arguments.
func toolContext(name string, args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, k := range []string{"command", "path", "pattern", "goal", "question", "action"} {
		if v, ok := m[k].(string); ok {
			return trimText(strings.ReplaceAll(v, "\n", " "), 120)
		}
	}
	return ""
}

// toolResult is the result parsed as JSON when it is JSON, else the text.
func toolResult(s string) any {
	t := strings.TrimSpace(s)
	if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return s
}

// transcript projects stored rows as TranscriptMessages: user and assistant text with row
// ids; each tool call as a tool row with its name, a one-line context and its arguments.
func transcript(rows []engine.Row) []map[string]any {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		switch r.Role {
		case "user":
			m := map[string]any{"role": "user", "text": r.Content, "row_id": r.ID, "timestamp": r.Time.Unix()}
			if r.DisplayKind != "" {
				m["display_kind"] = r.DisplayKind
			}
			out = append(out, m)
		case "system":
			if r.DisplayKind == "summary" {
				out = append(out, map[string]any{"role": "system", "text": r.Content, "row_id": r.ID, "display_kind": "summary"})
			}
		case "assistant":
			if r.Content != "" || r.Reasoning != "" {
				m := map[string]any{"role": "assistant", "text": r.Content, "row_id": r.ID, "timestamp": r.Time.Unix()}
				if r.Reasoning != "" {
					m["reasoning"] = r.Reasoning
				}
				out = append(out, m)
			}
			var calls []model.ToolCall
			if len(r.ToolCalls) > 0 && json.Unmarshal(r.ToolCalls, &calls) == nil {
				for _, c := range calls {
					args := json.RawMessage(c.Arguments)
					if !json.Valid(args) {
						args = json.RawMessage("{}")
					}
					out = append(out, map[string]any{"role": "tool", "name": c.Name, "context": toolContext(c.Name, args), "args": args, "row_id": r.ID})
				}
			}
		}
	}
	return out
}
