package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
)

// drainTimeout bounds the wait for running turns' outcomes once the client has gone away:
// the engine interrupts promptly, this only guards against a stuck tool.
const drainTimeout = 30 * time.Second

func (a *agent) Prompt(_ context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	if !a.enter() {
		return sdk.PromptResponse{}, errorf("the agent is shutting down")
	}
	defer a.prompts.Done()
	ss, err := a.get(p.SessionId)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	in, err := flatten(p.Prompt, a.o.ImageDir)
	if err != nil {
		return sdk.PromptResponse{}, invalidParams(err.Error())
	}
	if strings.TrimSpace(in.text) == "" {
		return sdk.PromptResponse{}, invalidParams("the prompt is empty")
	}
	if len(in.images) == 0 {
		handled, text, err := a.command(withTraceMeta(a.live, p.Meta), ss, in.text)
		if handled || err != nil {
			in.cleanup()
			if err != nil {
				return sdk.PromptResponse{}, err
			}
			return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
		}
		if text != "" {
			in.text = text // /steer or /queue on an idle session: their text is the prompt
		}
	}
	// The client's MCP servers for this session start in the background; the model's turn
	// must see their tools, and the user hears about any that failed before the answer.
	a.mu.Lock()
	m, cancelled := ss.mcp, ss.cancelled
	ss.prompting++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		ss.prompting--
		a.mu.Unlock()
	}()
	if notice, err := m.ready(a.live, cancelled); errors.Is(err, errCancelledWaiting) {
		in.cleanup() // the prompt's saved images are not going to be sent
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	} else if err != nil {
		in.cleanup()
		return sdk.PromptResponse{}, errorf("the agent is shutting down")
	} else if notice != "" {
		a.update(a.live, ss.s.ID(), sdk.UpdateAgentMessageText(notice))
	}
	s := ss.s
	// The prompt's turn renders, then each follow-up the queue starts after it (prompts that
	// arrived meanwhile and were answered at once), so their updates precede a response too.
	adm, f, err := s.Run(withTraceMeta(a.live, p.Meta), engine.Prompt{Text: in.text, Origin: Source, Images: in.images, FollowQueue: true})
	if err != nil {
		in.cleanup()
		if errors.Is(err, engine.ErrEmptyPrompt) {
			return sdk.PromptResponse{}, invalidParams(err.Error())
		}
		return sdk.PromptResponse{}, settingError(err) // a refused /model as set_config_option's
	}
	defer f.Close()
	id := s.ID()
	switch adm.Status {
	case engine.AdmitStarted:
	case engine.AdmitCommand:
		if adm.Message != "" {
			a.update(a.live, id, sdk.UpdateAgentMessageText(adm.Message))
		}
		if strings.HasPrefix(strings.TrimSpace(in.text), "/model") {
			a.sendConfigOptions(ss)
		}
		return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
	case engine.AdmitQueued:
		if adm.Interrupted {
			// The busy policy interrupted the running turn for this prompt, which runs next:
			// this request renders it (the interrupted prompt answers cancelled).
			return newTurn(a, ss, "").run(f)
		}
		fallthrough
	default:
		// Queued or steered into the running turn, whose prompt renders the work; rejected
		// says why. Either way this request is answered now so the client is never stuck
		// behind a turn it did not start.
		msg := adm.Message
		if msg == "" {
			switch adm.Status {
			case engine.AdmitQueued:
				msg = fmt.Sprintf("Queued for the next turn. (%d queued)", max(adm.QueuedCount, 1))
			case engine.AdmitSteered:
				msg = "⏩ Sent to the running turn."
			default:
				msg = "Not accepted: the session is busy."
			}
		}
		a.update(a.live, id, sdk.UpdateAgentMessageText(msg))
		return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
	}
	return newTurn(a, ss, adm.TurnID).run(f)
}

func newTurn(a *agent, ss *session, turnID string) *turn {
	return &turn{a: a, ss: ss, id: ss.s.ID(), turnID: turnID, tools: map[string]*toolState{}, asks: map[string]context.CancelFunc{}, askCall: map[string]string{}}
}

// toolState is one tool call the client has been shown.
type toolState struct {
	name   string
	args   map[string]any
	status sdk.ToolCallStatus // last status sent
	done   bool
}

// turn renders one engine turn into session/update notifications. All updates are sent from
// the goroutine running Prompt, so they reach the client before the prompt response.
type turn struct {
	a  *agent
	ss *session
	id string
	// turnID is the turn being rendered: the prompt's own ("" for a queued prompt until its
	// turn starts), then each follow-up.
	turnID string

	tools map[string]*toolState
	order []string

	mu      sync.Mutex
	asks    map[string]context.CancelFunc // engine request id → cancels its permission round trip
	askCall map[string]string             // engine request id → tool call id
	wg      sync.WaitGroup                // permission round trips
}

func (t *turn) run(f *engine.Follow) (sdk.PromptResponse, error) {
	// The pump does not follow the request context: the SDK cancels a session's running
	// prompt context when a second prompt arrives, which here is the busy policy's business,
	// not a cancel. session/cancel interrupts the turn; a closed connection interrupts every
	// turn and then bounds the wait with live.
	live := t.a.live
	defer t.stopAsks()
	stop := sdk.StopReasonCancelled
	var usage model.Usage
	answered := false // a turn of this prompt completed
	evs := &coalescer{f: f}
	for {
		ev, err := evs.next(live)
		if err != nil {
			break // the end of the follow (after a completed turn nothing runs next), or it failed
		}
		if ev.Type == engine.EvMessageStart && ev.TurnID != t.turnID {
			// A follow-up from the queue, announced by its prompt (a prompt the client sent
			// through another request); a queued prompt's own turn is not.
			if ts, ok := ev.Data.(engine.TurnStart); ok && t.turnID != "" {
				t.a.update(live, t.id, sdk.UpdateUserMessageText(ts.Prompt))
			}
			t.turnID = ev.TurnID
			continue
		}
		if ev.TurnID != t.turnID {
			continue
		}
		if o := t.handle(live, ev); o != nil {
			t.stopAsks()
			t.closeTools(live)
			stop = t.finish(live, *o)
			usage.Add(o.Usage)
			answered = answered || o.Status == engine.StatusCompleted
			if stop == sdk.StopReasonCancelled {
				// Whatever runs next belongs to whoever interrupted this turn.
				break
			}
		}
	}
	t.stopAsks()
	t.closeTools(live)
	if answered {
		t.a.autoTitle(live, t.ss)
	}
	t.a.update(live, t.id, t.a.usageUpdate(t.ss, usage))
	return sdk.PromptResponse{StopReason: stop, Usage: acpUsage(usage)}, nil
}

// coalesceMin is the backlog of adjacent deltas from which the coalescer merges them. Below it
// every delta is its own chunk, so the wire of a normally paced stream is one chunk per model
// delta, deterministic for fixtures.
const coalesceMin = 16

// coalescer reads a follow in batches and merges adjacent text deltas of one turn into
// one event when a backlog has built up: when the model streams faster than the client reads,
// the deltas that piled up go out as one agent_message_chunk (or agent_thought_chunk) instead
// of one notification each. A client sees the same text, in the same order, in fewer frames.
type coalescer struct {
	f   *engine.Follow
	buf []engine.Event
	i   int
	sb  strings.Builder
}

func (c *coalescer) next(ctx context.Context) (engine.Event, error) {
	if c.i >= len(c.buf) {
		clear(c.buf) // drop references to the last batch's payloads
		buf, err := c.f.NextBatch(ctx, c.buf[:0])
		if err != nil {
			return engine.Event{}, err
		}
		c.buf, c.i = buf, 0
	}
	ev := c.buf[c.i]
	c.i++
	if ev.Type != engine.EvMessageDelta && ev.Type != engine.EvReasoningDelta {
		return ev, nil
	}
	j := c.i
	for j < len(c.buf) && c.buf[j].Type == ev.Type && c.buf[j].TurnID == ev.TurnID {
		j++
	}
	if j-c.i+1 < coalesceMin {
		return ev, nil
	}
	c.sb.Reset()
	c.sb.WriteString(ev.Text)
	for _, e := range c.buf[c.i:j] {
		c.sb.WriteString(e.Text)
	}
	ev.Text, ev.Seq, c.i = c.sb.String(), c.buf[j-1].Seq, j
	return ev, nil
}

// acpUsage reports the token counts of the turns a prompt rendered, when the provider gave any.
func acpUsage(u model.Usage) *sdk.Usage {
	if u.TotalTokens == 0 && u.PromptTokens == 0 && u.CompletionTokens == 0 {
		return nil
	}
	out := &sdk.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.CachedTokens > 0 {
		out.CachedReadTokens = sdk.Ptr(u.CachedTokens)
	}
	if u.CacheWriteTokens > 0 {
		out.CachedWriteTokens = sdk.Ptr(u.CacheWriteTokens)
	}
	if u.ReasoningTokens > 0 {
		out.ThoughtTokens = sdk.Ptr(u.ReasoningTokens)
	}
	return out
}

func (t *turn) handle(ctx context.Context, ev engine.Event) *engine.Outcome {
	switch d := ev.Data.(type) {
	case nil:
		switch {
		case ev.Text == "":
		case ev.Type == engine.EvMessageDelta:
			t.a.update(ctx, t.id, sdk.UpdateAgentMessageText(ev.Text))
		case ev.Type == engine.EvReasoningDelta:
			t.a.update(ctx, t.id, sdk.UpdateAgentThoughtText(ev.Text))
		}
	case engine.ToolStart:
		// A call is pending until the approval policy has let it run: an IDE must not show a
		// call as running while it waits for permission (pending → in_progress → completed).
		t.start(ctx, d.CallID, d.Name, d.Args, sdk.ToolCallStatusPending)
	case engine.PolicyDecision:
		if d.Hook == "approval" && d.Decision == policy.Allow {
			t.setStatus(ctx, d.CallID, sdk.ToolCallStatusInProgress)
		}
	case engine.ToolComplete:
		t.complete(ctx, d)
	case engine.Request:
		if d.Kind == engine.KindApproval {
			t.permission(ctx, d)
		} else {
			t.question(ctx, d)
		}
	case engine.RequestCancel:
		t.stopAsk(d.ID)
	case engine.RequestResolved:
		t.stopAsk(d.ID)
		t.resolved(ctx, d)
	case engine.StatusInfo:
		t.compaction(ctx, d)
	case engine.Outcome:
		return &d
	}
	return nil
}

// start announces a call, or moves an announced one (pending approval) to status.
func (t *turn) start(ctx context.Context, callID, name string, rawArgs json.RawMessage, status sdk.ToolCallStatus) {
	if callID == "" {
		return
	}
	if _, ok := t.tools[callID]; ok {
		t.setStatus(ctx, callID, status)
		return
	}
	args := argMap(rawArgs)
	t.tools[callID] = &toolState{name: name, args: args, status: status}
	t.order = append(t.order, callID)
	opts := []sdk.ToolCallStartOpt{sdk.WithStartKind(toolKind(name)), sdk.WithStartStatus(status), sdk.WithStartRawInput(args)}
	if c := startContent(name, args); c != nil {
		opts = append(opts, sdk.WithStartContent(c))
	}
	if p := str(args, "path"); p != "" && name != "search_files" {
		opts = append(opts, sdk.WithStartLocations([]sdk.ToolCallLocation{{Path: absPath(t.ss.cwd, p)}}))
	}
	t.a.update(ctx, t.id, sdk.StartToolCall(sdk.ToolCallId(callID), toolTitle(name, args), opts...))
}

// setStatus moves an announced, open call to status; a repeated status is not sent again.
func (t *turn) setStatus(ctx context.Context, callID string, status sdk.ToolCallStatus) {
	ts, ok := t.tools[callID]
	if !ok || ts.done || ts.status == status {
		return
	}
	ts.status = status
	t.a.update(ctx, t.id, sdk.UpdateToolCall(sdk.ToolCallId(callID), sdk.WithUpdateStatus(status)))
}

func (t *turn) complete(ctx context.Context, d engine.ToolComplete) {
	ts, ok := t.tools[d.CallID]
	if !ok {
		t.start(ctx, d.CallID, d.Name, d.Args, sdk.ToolCallStatusInProgress)
		ts = t.tools[d.CallID]
	}
	if ts == nil || ts.done {
		return
	}
	ts.done = true
	status := sdk.ToolCallStatusCompleted
	if d.Blocked || toolFailed(ts.name, d.Result.IsError, d.Result.Content, d.Result.Meta) {
		status = sdk.ToolCallStatusFailed
	}
	t.a.update(ctx, t.id, sdk.UpdateToolCall(sdk.ToolCallId(d.CallID), sdk.WithUpdateStatus(status),
		sdk.WithUpdateContent(resultContent(ts.name, t.ss.cwd, ts.args, d.Result.Content, d.Result.Meta)),
		sdk.WithUpdateRawOutput(map[string]any{"content": truncate(d.Result.Content, maxToolText), "is_error": d.Result.IsError})))
	if ts.name == "todo" && status == sdk.ToolCallStatusCompleted {
		if u, ok := planUpdate(d.Result.Content); ok {
			t.a.update(ctx, t.id, u)
		}
	}
}

// resolved moves an approved call from pending back to in_progress; a denied one is closed
// by its tool.complete.
func (t *turn) resolved(ctx context.Context, d engine.RequestResolved) {
	t.mu.Lock()
	callID := t.askCall[d.ID]
	delete(t.askCall, d.ID)
	t.mu.Unlock()
	if choice, _ := d.Answer["choice"].(string); choice == engine.ChoiceDeny {
		return
	}
	t.setStatus(ctx, callID, sdk.ToolCallStatusInProgress)
}

// closeTools gives every call still open a terminal status: a client must never be left
// with a spinner for a call the turn abandoned.
func (t *turn) closeTools(ctx context.Context) {
	for _, id := range t.order {
		if ts := t.tools[id]; !ts.done {
			ts.done = true
			t.a.update(ctx, t.id, sdk.UpdateToolCall(sdk.ToolCallId(id), sdk.WithUpdateStatus(sdk.ToolCallStatusFailed)))
		}
	}
}

// finish maps the engine outcome to an ACP stop reason, showing a failure as text.
func (t *turn) finish(ctx context.Context, o engine.Outcome) sdk.StopReason {
	switch {
	case o.Status == engine.StatusCancelled || o.Interrupted:
		return sdk.StopReasonCancelled
	case strings.HasPrefix(o.ExitReason, "max_iterations_reached"):
		return sdk.StopReasonMaxTurnRequests
	case strings.Contains(o.ExitReason, "finish_reason=length"):
		return sdk.StopReasonMaxTokens
	case o.Status == engine.StatusFailed:
		msg := o.Error
		if msg == "" {
			msg = o.ExitReason
		}
		t.a.update(ctx, t.id, sdk.UpdateAgentMessageText("\n\nError: "+msg))
	}
	return sdk.StopReasonEndTurn
}

// permission shows an approval as session/request_permission tied to the visible tool call.
// The round trip runs on its own goroutine so the turn keeps rendering (and a cancel can
// withdraw it); whatever happens, the engine request gets an answer or is withdrawn.
func (t *turn) permission(ctx context.Context, r engine.Request) {
	callID, _ := r.Payload["call_id"].(string)
	name, _ := r.Payload["tool"].(string)
	var rawArgs json.RawMessage
	switch v := r.Payload["args"].(type) {
	case json.RawMessage:
		rawArgs = v
	case []byte:
		rawArgs = v
	case string:
		rawArgs = json.RawMessage(v)
	default:
		rawArgs, _ = json.Marshal(v)
	}
	if callID == "" {
		callID = r.ID
	}
	t.start(ctx, callID, name, rawArgs, sdk.ToolCallStatusPending)
	ts := t.tools[callID]
	desc, _ := r.Payload["description"].(string)
	title := toolTitle(name, ts.args)
	if desc != "" {
		title += " — " + desc
	}
	opts := []sdk.PermissionOption{
		{Kind: sdk.PermissionOptionKindAllowOnce, Name: "Allow once", OptionId: OptAllowOnce},
		{Kind: sdk.PermissionOptionKindAllowAlways, Name: "Allow for this session", OptionId: OptAllowSession},
	}
	if perm, _ := r.Payload["allow_permanent"].(bool); perm {
		opts = append(opts, sdk.PermissionOption{Kind: sdk.PermissionOptionKindAllowAlways, Name: "Always allow", OptionId: OptAllowAlways})
	}
	opts = append(opts, sdk.PermissionOption{Kind: sdk.PermissionOptionKindRejectOnce, Name: "Deny", OptionId: OptDeny})
	req := sdk.RequestPermissionRequest{
		SessionId: sdk.SessionId(t.id),
		ToolCall: sdk.ToolCallUpdate{
			ToolCallId: sdk.ToolCallId(callID), Title: sdk.Ptr(title), Kind: sdk.Ptr(toolKind(name)),
			Status: sdk.Ptr(sdk.ToolCallStatusPending), RawInput: ts.args,
		},
		Options: opts,
	}
	if diffs := editDiffs(r.Payload["edits"]); len(diffs) > 0 {
		// An edit about to be written: the person sees the diff before anything changes.
		req.ToolCall.Title = sdk.Ptr(toolTitle(name, ts.args))
		req.ToolCall.Kind = sdk.Ptr(sdk.ToolKindEdit)
		req.ToolCall.Content = diffs
	}
	t.mu.Lock()
	t.askCall[r.ID] = callID
	t.mu.Unlock()
	t.ask(ctx, r.ID, t.a.o.PermissionTimeout, func(askCtx context.Context) {
		choice := engine.ChoiceDeny
		resp, err := t.a.conn.RequestPermission(askCtx, req)
		if err == nil && resp.Outcome.Selected != nil {
			switch resp.Outcome.Selected.OptionId {
			case OptAllowOnce:
				choice = engine.ChoiceOnce
			case OptAllowSession:
				choice = engine.ChoiceSession
			case OptAllowAlways:
				choice = engine.ChoiceAlways
			}
		}
		if err := t.ss.s.Answer(r.ID, map[string]any{"choice": choice}); err != nil && !errors.Is(err, engine.ErrUnknownRequest) {
			t.a.o.Logger.Warn("approval answer failed; withdrawing", "request", r.ID, "err", err)
			_ = t.ss.s.Withdraw(r.ID, "the client's answer was not accepted")
		}
	})
}

// ask runs one round trip to the client for the engine's request id, in a goroutine the turn
// owns (stopAsks waits for it). Its context ends after timeout, when the engine withdraws the
// request (stopAsk) or when the turn stops.
func (t *turn) ask(ctx context.Context, id string, timeout time.Duration, roundTrip func(ctx context.Context)) {
	askCtx, cancel := t.a.clientCtx(ctx, timeout)
	t.mu.Lock()
	t.asks[id] = cancel
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer cancel()
		roundTrip(askCtx)
	}()
}

func (t *turn) stopAsk(id string) {
	t.mu.Lock()
	cancel := t.asks[id]
	delete(t.asks, id)
	t.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// stopAsks withdraws every open permission round trip and waits for them.
func (t *turn) stopAsks() {
	t.mu.Lock()
	for id, cancel := range t.asks {
		cancel()
		delete(t.asks, id)
	}
	t.mu.Unlock()
	t.wg.Wait()
}
