package engine

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/tool"
)

// Steer markers: delivered guidance is appended to the last tool result of a batch between
// these, and the system prompt tells the model to trust exactly this marker.
const (
	SteerOpen  = "[OUT-OF-BAND USER MESSAGE — a direct message from the user, delivered mid-turn; not tool output]"
	SteerClose = "[/OUT-OF-BAND USER MESSAGE]"
)

// budgetSummaryPrompt is sent, toolless, once the iteration budget is spent.
const budgetSummaryPrompt = "You have reached the maximum number of tool-calling iterations for this turn. Do not call any more tools. Summarise what you did, what is left, and what the user should do next."

// turnState is one turn in flight.
type turnState struct {
	s       *Session
	id      string
	prompt  string
	origin  string
	maxIter int
	started time.Time

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	span   trace.Span // invoke_agent: started with the turn, ended with its outcome (trace.go)

	userRowID uint64
	callIDs   map[string]bool // tool call ids used in this turn (see uniqueCallIDs)
	tail      []store.Row     // the answer's rows: stored with the turn's usage as it ends (finish)
	finishing bool            // guarded by Session.mu: no more steers accepted
	outcome   Outcome         // written before done is closed
	abandoned bool            // never started (no message.complete); written before done is closed
	next      *turnState      // guarded by Session.mu: the follow-up the queue started when this one ended
	lease     *heldLease      // an edit's (Session.claim) pin on the session's lease

	inAPICall atomic.Bool
	nTools    atomic.Int64

	mu          sync.Mutex // guards text, iteration, corrections and storeErr
	text        strings.Builder
	iteration   int
	corrections []Correction // steers delivered in this turn
	storeErr    error        // a write that failed mid-batch (an "always" approval); ends the turn

	// ckpt is the turn's unstored rows while a batch runs in order (toolBatch); only the
	// turn's goroutine reads or writes it.
	ckpt *[]store.Row
	// resume is what an adopted turn goes on from (adopt.go); nil for a turn started here.
	resume *resumePoint
}

// reasonStore is the exit reason of a turn ended because a row or a setting could not be
// written: the transcript or the session record is no longer what the turn produced.
const reasonStore = "store_error"

// noteStoreErr records a failed write made while tools run; the turn fails at the batch's end.
func (t *turnState) noteStoreErr(err error) {
	t.mu.Lock()
	t.storeErr = cmp.Or(t.storeErr, err)
	t.mu.Unlock()
}

// noticedStoreErr is the write failure noted during the batch, if any.
func (t *turnState) noticedStoreErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.storeErr
}

func (t *turnState) interrupt(cause error) { t.cancel(cause) }

// newTurnLocked claims a turn; parent is the span context of the request that asked for it
// (the turn's span continues its trace), or the zero one.
func (s *Session) newTurnLocked(text, origin string, parent trace.SpanContext) *turnState {
	return s.newTurnWithIDLocked(newID("turn_"), text, origin, parent)
}

// newTurnWithIDLocked is newTurnLocked for a turn whose id is known (an adopted one).
func (s *Session) newTurnWithIDLocked(id, text, origin string, parent trace.SpanContext) *turnState {
	ctx, span := s.turnContext(parent, id, origin)
	ctx, cancel := context.WithCancelCause(ctx)
	s.j.ownForTurn(context.Background()) // this process numbers the turn's events (eventlog.go)
	max := s.e.cfg.MaxIterations
	if s.depth > 0 {
		max = s.e.cfg.SubagentMaxIterations
	}
	t := &turnState{
		s: s, id: id, prompt: text, origin: origin, maxIter: max, started: time.Now(),
		ctx: ctx, cancel: cancel, done: make(chan struct{}), span: span,
	}
	s.turn = t
	s.failed = nil
	s.turns[t.id] = t
	s.order = append(s.order, t.id)
	if len(s.order) > keptTurns {
		delete(s.turns, s.order[0])
		s.order = s.order[1:]
	}
	s.setStatusLocked(StatusWorking)
	return t
}

// abandonTurn releases a turn that never started (its user row could not be written).
func (s *Session) abandonTurn(t *turnState) {
	t.cancel(errors.New("abandoned"))
	t.outcome = Outcome{TurnID: t.id, Status: StatusFailed, ExitReason: reasonStore, Error: "turn not started"}
	t.abandoned = true
	t.endSpan(t.outcome)
	s.mu.Lock()
	delete(s.turns, t.id)
	s.failed = &Inflight{TurnID: t.id, Prompt: t.prompt, Started: t.started, Status: StatusFailed, Error: t.outcome.Error, ExitReason: reasonStore}
	s.endTurnLocked(t, nil)
	s.mu.Unlock()
}

// giveBackTurn ends a turn whose prompt's Claim refused it: it never started and leaves no
// trace but its span; the session goes on with the next prompt in line, or is idle.
func (s *Session) giveBackTurn(t *turnState, err error) {
	t.cancel(err)
	t.outcome = Outcome{TurnID: t.id, Status: StatusCancelled, Error: "turn not started: " + err.Error()}
	t.abandoned = true
	t.endSpan(t.outcome)
	s.mu.Lock()
	delete(s.turns, t.id)
	s.endTurnLocked(t, nil)
	s.mu.Unlock()
}

func (s *Session) startTurn(t *turnState) {
	s.e.turns.Add(1)
	go func() {
		defer s.e.turns.Done()
		if t.resume == nil { // an adopted turn started in another process
			s.j.append(Event{Type: EvMessageStart, TurnID: t.id, Data: TurnStart{Prompt: t.prompt, Origin: t.origin, Model: s.Record().Model, RowID: t.userRowID}})
		}
		out := t.run()
		t.dropAdopted()
		s.finish(t, out)
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		_ = s.j.flushWait(ctx) // the turn's events are stored before the turn counts as gone
		cancel()
	}()
}

// finish records the outcome, emits message.complete, and drains the follow-up queue.
func (s *Session) finish(t *turnState, out Outcome) {
	s.mu.Lock()
	t.finishing = true
	pending := joinSteers(s.steers)
	s.steers = nil
	out.Duration, out.Context = time.Since(t.started), s.meter.info()
	s.mu.Unlock()
	if pending != "" { // also on an interrupted turn: an acknowledged steer is never lost
		out.PendingSteer = pending
	}
	delta := store.Usage{
		InputTokens: int64(out.Usage.PromptTokens), OutputTokens: int64(out.Usage.CompletionTokens),
		CachedTokens: int64(out.Usage.CachedTokens), ReasoningTokens: int64(out.Usage.ReasoningTokens),
		APICalls: int64(out.APICalls), ToolCalls: t.toolCalls(),
		CacheWriteTokens: int64(out.Usage.CacheWriteTokens), CostUSD: out.Usage.CostUSD,
	}
	rows := t.tail
	t.tail = nil
	if out.ExitReason != reasonLease {
		// The answer's rows and the turn's usage go in one write: one synced write and, over
		// the home's store process, one round trip instead of three. Both are stored or neither.
		if _, rec, err := s.wst().AppendRowsUsage(context.Background(), s.id, store.Fence{}, rows, delta); err == nil {
			s.mu.Lock()
			s.rec = rec
			s.mu.Unlock()
		} else if len(rows) > 0 {
			// The answer is not in the transcript: the turn failed as one whose last rows
			// could not be written (its usage was not added either).
			out = t.fail(unanswered(out), reasonStore, fmt.Errorf("save transcript: %w", err))
		} else {
			s.noteFenced(err)
			s.j.append(Event{Type: EvError, TurnID: t.id, Data: ErrorInfo{Message: "usage not saved: " + err.Error(), Code: "store"}})
			out = storeFailed(out, fmt.Errorf("save usage: %w", err))
		}
	}
	if h := s.held.Load(); h != nil && out.ExitReason == reasonLease {
		// The lease is gone: the store refuses this process's writes, and the handle is
		// usable again once the turn ended (the next prompt acquires anew).
		s.held.CompareAndSwap(h, nil)
	}
	t.outcome = out
	t.endSpan(out)
	t.cancel(nil)
	s.mu.Lock()
	if out.Status == StatusFailed {
		// Kept for clients that attach later (Snapshot.Failed) until the next turn starts.
		t.mu.Lock()
		s.failed = &Inflight{TurnID: t.id, Prompt: t.prompt, Text: t.text.String(), Iteration: t.iteration, Started: t.started,
			Corrections: append([]Correction(nil), t.corrections...), Status: out.Status, Error: out.Error, ExitReason: out.ExitReason}
		t.mu.Unlock()
	}
	s.endTurnLocked(t, &out)
	s.mu.Unlock()
}

// endTurnLocked clears the in-flight turn, publishes its outcome (once the session no longer
// counts as busy, so a client reacting to message.complete finds it free) and starts the
// queued follow-up, if any. out is nil for a turn that never started.
func (s *Session) endTurnLocked(t *turnState, out *Outcome) {
	if s.turn == t {
		s.turn = nil
	}
	s.j.touch()
	if out != nil {
		s.j.append(Event{Type: EvMessageComplete, TurnID: t.id, Text: out.Text, Data: *out})
	}
	close(t.done)
	q := s.queued
	if q == nil && !s.closed && s.handOverLocked() {
		return
	}
	if q == nil || s.closed {
		if h := s.held.Load(); h != nil {
			h.wake() // idle: the lease can be given back
		}
		s.setStatusLocked(StatusIdle)
		s.j.append(Event{Type: EvSessionInfo, Data: Info{SessionID: s.id, Title: s.rec.Title, Model: s.rec.Model, Cwd: s.rec.Cwd, ParentID: s.rec.ParentID, Status: s.status, Usage: s.rec.Usage}})
		return
	}
	s.queued = nil
	s.j.append(Event{Type: EvQueueUpdated, Data: QueueInfo{}})
	next := s.newTurnLocked(q.text, q.origin, q.parent)
	t.next, q.turn = next, next
	s.e.turns.Add(1)
	go func() { // the user row write happens off the lock, then the turn runs
		defer s.e.turns.Done()
		h, err := s.hold(context.Background()) // held already, unless it was lost meanwhile
		if err != nil {
			s.j.append(Event{Type: EvError, TurnID: next.id, Data: ErrorInfo{Message: "queued prompt not run: " + err.Error(), Code: "lease"}})
			s.abandonTurn(next)
			return
		}
		defer h.unpin()
		rows, err := s.wst().AppendRows(context.Background(), s.id, store.Fence{}, []store.Row{{Role: "user", Content: q.text, TurnID: next.id, Time: time.Now().UTC()}})
		if err != nil {
			s.noteFenced(err)
			s.j.append(Event{Type: EvError, TurnID: next.id, Data: ErrorInfo{Message: "queued prompt not saved: " + err.Error(), Code: "store"}})
			s.abandonTurn(next)
			return
		}
		next.userRowID = rows[0].ID
		s.startTurn(next)
	}()
}

// toolCalls counts the calls runTools made this turn.
func (t *turnState) toolCalls() int64 { return t.nTools.Load() }

// run is the turn: a short loop of named steps.
//
//	for each iteration:
//	  check interrupt → check budget → deliver steer → persist → stream model
//	  → no tool calls: final answer, done
//	  → for each tool call: guard → policy → approval → run → deliver steer at the boundary
func (t *turnState) run() Outcome {
	s := t.s
	out := Outcome{TurnID: t.id}
	name, prov, err := s.e.ResolveModel(s.Record().Model)
	if ue := (*unservedError)(nil); errors.As(err, &ue) {
		// The provider cannot serve the session's model (a cassette gone since): its failure,
		// as a call to it would have reported it.
		return t.fail(out, "provider_error("+clip(ue.err.Error(), 80)+")", ue.err)
	}
	if err != nil {
		return t.fail(out, "unknown", err)
	}
	out.Model = name
	msgs, err := s.loadMessages(t.ctx)
	if err != nil {
		if t.ctx.Err() != nil {
			// Interrupted (or its lease lost) while the history was read: that, not the read,
			// is what ended it.
			return t.interrupted(out, nil, false)
		}
		return t.fail(out, reasonStore, err)
	}
	var pending []store.Row
	lastTool := -1 // index in msgs of the newest tool result of this turn
	var calls []model.ToolCall
	if t.resume != nil {
		// An adopted turn goes on with the calls its first holder had not run, starting with
		// the one parked at the approval (adopt.go).
		calls = t.resume.calls
		t.mu.Lock()
		t.iteration = 1
		t.mu.Unlock()
	}
	for {
		if len(calls) > 0 {
			msgs = t.toolBatch(calls, msgs, &pending)
			calls = nil
			lastTool = len(msgs) - 1
			if serr := t.noticedStoreErr(); serr != nil {
				if perr := s.persist(&pending, t); perr != nil {
					serr = errors.Join(serr, perr)
				}
				return t.fail(out, reasonStore, serr)
			}
			if t.ctx.Err() != nil {
				return t.interrupted(out, pending, false)
			}
			t.deliverSteer(msgs, pending, lastTool)
		}
		if t.ctx.Err() != nil {
			return t.interrupted(out, pending, false)
		}
		if t.iteration >= t.maxIter {
			return t.budgetExhausted(out, prov, name, msgs, pending)
		}
		t.mu.Lock()
		t.iteration++
		t.text.Reset()
		t.mu.Unlock()

		t.deliverSteer(msgs, pending, lastTool)
		if err := s.persist(&pending, t); err != nil {
			return t.fail(out, reasonStore, err)
		}

		if msgs, err = t.fitContext(name, msgs); err != nil {
			return t.fail(out, "context_exceeded", err)
		}
		acc, err := t.streamModel(prov, name, msgs, true, &out)
		if err != nil && t.ctx.Err() == nil && acc.Text.Len() == 0 && isContextOverflow(err) {
			// The estimate was wrong: compact harder and retry once.
			if msgs, err = t.compactHarder(name, msgs, err); err != nil {
				return t.fail(out, "context_exceeded", err)
			}
			acc, err = t.streamModel(prov, name, msgs, true, &out)
			if err != nil && t.ctx.Err() == nil && acc.Text.Len() == 0 && isContextOverflow(err) {
				return t.fail(out, "context_exceeded", fmt.Errorf("%w: the request does not fit the model's window even after compacting the conversation: %v", ErrContextExceeded, err))
			}
		}
		if err == nil && acc.HaveUsage && acc.Usage.PromptTokens > 0 {
			s.calibrate(acc.Usage.PromptTokens+acc.Usage.CompletionTokens, len(msgs)+1)
		}
		if err != nil {
			if t.ctx.Err() != nil {
				if acc.Text.Len() > 0 {
					pending = append(pending, assistantRow(t.id, acc.Message()))
				}
				return t.interrupted(out, pending, true)
			}
			out.Partial = acc.Text.Len() > 0
			if out.Partial {
				pending = append(pending, assistantRow(t.id, acc.Message()))
			}
			if perr := s.persist(&pending, t); perr != nil {
				return t.fail(out, reasonStore, fmt.Errorf("%w (after the provider failed: %v)", perr, err))
			}
			return t.fail(out, "provider_error("+clip(err.Error(), 80)+")", err)
		}
		msg := acc.Message()
		if len(msg.ToolCalls) == 0 {
			return t.answer(out, acc, pending)
		}

		// A usage tick: the turn goes on, and a client shows what it has cost so far.
		s.j.append(Event{Type: EvUsage, TurnID: t.id, Data: UsageInfo{Model: name, Usage: out.Usage, APICalls: out.APICalls, ToolCalls: t.toolCalls()}})
		t.uniqueCallIDs(msg.ToolCalls)
		msgs = append(msgs, msg)
		pending = append(pending, assistantRow(t.id, msg))
		calls = msg.ToolCalls // run at the top of the next iteration
	}
}

// toolBatch runs a batch of calls and appends their results to msgs (as the model sees them)
// and to pending (as they are stored), in call order. While a batch runs in order, pending is
// the turn's checkpoint: an approval stores it before it asks (tools.go), so the transcript
// holds the call and every result before it while a person decides, and a process that takes
// the session over can go on from there (adopt.go).
func (t *turnState) toolBatch(calls []model.ToolCall, msgs []model.Message, pending *[]store.Row) []model.Message {
	s := t.s
	t.ckpt = pending
	defer func() { t.ckpt = nil }()
	t.runTools(calls, func(i int, res tool.Result) {
		c := calls[i]
		msgs = append(msgs, model.Message{Role: "tool", ToolCallID: c.ID, Name: c.Name, Content: s.budgetToolOutput(c.Name, c.ID, res.Content)})
		*pending = append(*pending, store.Row{Role: "tool", TurnID: t.id, ToolCallID: c.ID, ToolName: c.Name, Content: res.Content, Time: time.Now().UTC()})
	})
	return msgs
}

// checkpoint stores the rows of the batch running in order (the assistant's calls and the
// results so far) before an approval is asked; there is nothing to store in a concurrent batch.
//
// A store that cannot be reached for a moment (a database restarting) does not fail the call:
// the write is tried again (writeRetry), and an attempt whose answer was lost is
// found in the transcript before it is sent again.
func (t *turnState) checkpoint() error {
	if t.ckpt == nil || len(*t.ckpt) == 0 {
		return nil
	}
	s, rows := t.s, *t.ckpt
	for r := newWriteRetry(); ; {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		_, err := s.wst().AppendRows(ctx, s.id, store.Fence{}, rows)
		cancel()
		if err == nil || outcomeUnknown(err) && s.rowsLanded(rows) {
			*t.ckpt = (*t.ckpt)[:0]
			return nil
		}
		if !outcomeUnknown(err) || !r.again() {
			return fmt.Errorf("save transcript: %w", err)
		}
	}
}

// sameCallIDs compares two rows' tool calls by their ids (a store may re-encode the JSON).
func sameCallIDs(a, b json.RawMessage) bool {
	var ca, cb []struct{ ID string }
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if json.Unmarshal(a, &ca) != nil || json.Unmarshal(b, &cb) != nil || len(ca) != len(cb) {
		return false
	}
	for i := range ca {
		if ca[i].ID != cb[i].ID {
			return false
		}
	}
	return true
}

// rowsLanded reports whether an append of rows whose answer was lost is in the transcript: its
// last row is the session's last (same turn, role, call and content). Only the turn's own
// goroutine appends the turn's rows, so nothing else can have written that row.
func (s *Session) rowsLanded(rows []store.Row) bool {
	want := rows[len(rows)-1]
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		got, err := s.e.cfg.Store.Rows(ctx, s.id, store.RowQuery{Tail: true, Limit: 1})
		cancel()
		if err == nil {
			return len(got) == 1 && got[0].TurnID == want.TurnID && got[0].Role == want.Role &&
				got[0].ToolCallID == want.ToolCallID && got[0].Content == want.Content && sameCallIDs(got[0].ToolCalls, want.ToolCalls)
		}
		if !outcomeUnknown(err) {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}

func assistantRow(turnID string, m model.Message) store.Row {
	r := store.Row{Role: "assistant", TurnID: turnID, Content: m.Content, Reasoning: m.Reasoning, Time: time.Now().UTC()}
	if len(m.ToolCalls) > 0 {
		r.ToolCalls, _ = json.Marshal(m.ToolCalls)
	}
	return r
}

// streamModel is one model call: stream, publish deltas, accumulate.
func (t *turnState) streamModel(prov model.Provider, name string, msgs []model.Message, tools bool, out *Outcome) (*model.Accumulator, error) {
	s := t.s
	_, m := model.ParseName(name)
	req := model.Request{Model: m, Messages: msgs}
	if tools {
		req.Tools = s.toolSpecs()
	}
	acc := &model.Accumulator{}
	t.inAPICall.Store(true)
	defer t.inAPICall.Store(false)
	out.APICalls++
	var streamErr error
	ctx, span := t.chatSpan(name, &req)
	answeredBy := "" // the fallback model that took the call over, if any
	defer func() { t.endChatSpan(span, name, answeredBy, acc, streamErr) }()
	for c, err := range prov.Stream(ctx, req) {
		if err != nil {
			streamErr = err
			break
		}
		if f := c.Fallback; f != nil {
			answeredBy = f.To
			s.j.append(Event{Type: EvStatus, TurnID: t.id, Data: StatusInfo{Status: StatusWorking, Kind: "model_fallback", Text: f.From + " failed (" + clip(f.Reason, 200) + "); trying " + f.To}})
		}
		if c.Reasoning != "" {
			s.j.append(Event{Type: EvReasoningDelta, TurnID: t.id, Text: c.Reasoning})
		}
		if c.Text != "" {
			// The snapshot's text first: a client that saw the delta finds it in inflight.
			t.mu.Lock()
			t.text.WriteString(c.Text)
			t.mu.Unlock()
			s.j.append(Event{Type: EvMessageDelta, TurnID: t.id, Text: c.Text})
		}
		for _, d := range c.ToolCalls {
			s.j.append(Event{Type: EvToolGenerating, TurnID: t.id, Text: d.Arguments, Data: ToolGenerating{Index: d.Index, CallID: d.ID, Name: d.Name}})
		}
		acc.Add(c)
	}
	if acc.HaveUsage {
		out.Usage.Add(acc.Usage)
	}
	if streamErr == nil && t.ctx.Err() != nil {
		streamErr = context.Cause(t.ctx)
	}
	return acc, streamErr
}

// answer ends the turn with the model's text.
func (t *turnState) answer(out Outcome, acc *model.Accumulator, pending []store.Row) Outcome {
	msg := acc.Message()
	t.tail = append(pending, assistantRow(t.id, msg)) // stored with the usage (finish)
	fr := acc.FinishReason
	if fr == "" {
		fr = "stop"
	}
	out.Text, out.Reasoning = msg.Content, msg.Reasoning
	out.ExitReason = "text_response(finish_reason=" + fr + ")"
	switch {
	case strings.TrimSpace(msg.Content) == "":
		out.Status, out.ExitReason = StatusFailed, "empty_response_exhausted"
		out.Error = "the model returned an empty response"
	case fr == "length":
		out.Status, out.Partial = StatusFailed, true
		out.Error = "the response was cut off at the output token limit"
	default:
		out.Status, out.Completed = StatusCompleted, true
	}
	return out
}

// interrupted ends the turn as cancelled; a turn stopped because its process lost the lease
// fails, and writes nothing more.
func (t *turnState) interrupted(out Outcome, pending []store.Row, duringAPI bool) Outcome {
	if cause := context.Cause(t.ctx); errors.Is(cause, store.ErrLeaseLost) {
		return t.fail(out, reasonLease, cause)
	}
	if err := t.s.persist(&pending, t); err != nil {
		return t.fail(out, reasonStore, err)
	}
	cause := context.Cause(t.ctx)
	reason := "interrupted_by_user"
	if cause != nil && cause != errInterruptUser && cause != context.Canceled {
		reason = cause.Error()
	}
	if duringAPI {
		if issuer, ok := strings.CutPrefix(reason, "interrupted_by_system"); ok {
			reason = "interrupted_during_api_call" + issuer
		} else {
			reason = "interrupted_during_api_call"
		}
	}
	t.mu.Lock()
	out.Partial = t.text.Len() > 0
	out.Text = t.text.String()
	t.mu.Unlock()
	out.Status, out.ExitReason, out.Interrupted = StatusCancelled, reason, true
	return out
}

// fail ends the turn as failed.
func (t *turnState) fail(out Outcome, reason string, err error) Outcome {
	if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrLeaseLost) {
		// Another process holds the session now: this one stops here (self-fencing).
		t.s.noteFenced(err)
		reason = reasonLease
	}
	out.Status, out.ExitReason, out.Error = StatusFailed, reason, err.Error()
	info := ErrorInfo{Message: err.Error()}
	switch reason {
	case reasonStore:
		info.Code = "store"
	case reasonLease:
		info.Code = "lease"
	}
	t.s.j.append(Event{Type: EvError, TurnID: t.id, Data: info})
	return out
}

// unanswered is out without the answer answer put in it: the outcome of a turn whose answer
// could not be stored (fail then says why).
func unanswered(out Outcome) Outcome {
	out.Text, out.Reasoning, out.Error = "", "", ""
	out.Completed, out.Partial = false, false
	return out
}

// storeFailed turns an outcome into a failed one because a write failed after the turn's
// work was done (its text stays: it was shown, though not all of it was saved).
func storeFailed(out Outcome, err error) Outcome {
	out.Status, out.ExitReason, out.Error = StatusFailed, reasonStore, err.Error()
	out.Completed = false
	return out
}

// budgetExhausted makes one toolless call for a summary and ends the turn failed.
func (t *turnState) budgetExhausted(out Outcome, prov model.Provider, name string, msgs []model.Message, pending []store.Row) Outcome {
	s := t.s
	out.ExitReason = fmt.Sprintf("max_iterations_reached(%d/%d)", t.iteration, t.maxIter)
	s.j.append(Event{Type: EvStatus, TurnID: t.id, Data: StatusInfo{Status: StatusWorking, Kind: "budget", Text: out.ExitReason}})
	t.deliverSteer(msgs, pending, -1)
	if err := s.persist(&pending, t); err != nil {
		return t.fail(out, reasonStore, err)
	}
	msgs = append(msgs, model.Message{Role: "user", Content: budgetSummaryPrompt})
	acc, err := t.streamModel(prov, name, msgs, false, &out)
	if err == nil && acc.Text.Len() > 0 {
		msg := acc.Message()
		msg.ToolCalls = nil
		pending = append(pending, assistantRow(t.id, msg))
		if perr := s.persist(&pending, t); perr != nil {
			return t.fail(out, reasonStore, perr)
		}
		out.Text, out.Reasoning = msg.Content, msg.Reasoning
	}
	if t.ctx.Err() != nil {
		return t.interrupted(out, pending, true)
	}
	out.Status = StatusFailed // not completed: the budget ended it, not the model
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// deliverSteer appends pending steer text to the newest tool result of this turn (msgs[idx]
// and its still-unpersisted row). With no tool result yet, the steer stays pending.
func (t *turnState) deliverSteer(msgs []model.Message, pending []store.Row, idx int) {
	s := t.s
	if idx < 0 {
		return
	}
	s.mu.Lock()
	items := s.steers
	s.steers = nil
	s.mu.Unlock()
	if len(items) == 0 {
		return
	}
	text := joinSteers(items)
	d := s.steerDecision(t, text, msgs[idx].Name)
	switch d.Action {
	case "hold":
		s.mu.Lock()
		s.steers = append(items, s.steers...)
		s.mu.Unlock()
		return
	case "drop":
		return
	}
	if d.Text != "" {
		text = d.Text
	}
	block := "\n\n" + SteerOpen + "\n" + text + "\n" + SteerClose
	msgs[idx].Content += block
	for i := len(pending) - 1; i >= 0; i-- {
		if pending[i].Role == "tool" && pending[i].ToolCallID == msgs[idx].ToolCallID {
			pending[i].Content += block
			pending[i].DisplayKind = "steer"
			break
		}
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.id
	}
	t.mu.Lock()
	t.corrections = append(t.corrections, Correction{Text: text, Offset: utf8.RuneCountInString(t.text.String()), Iteration: t.iteration})
	t.mu.Unlock()
	s.j.append(Event{Type: EvSteerDelivered, TurnID: t.id, Data: SteerDelivered{IDs: ids, Text: text, Iteration: t.iteration, CallID: msgs[idx].ToolCallID}})
}

// persist writes the turn's pending rows (durable on return) and clears them.
func (s *Session) persist(pending *[]store.Row, t *turnState) error {
	if len(*pending) == 0 {
		return nil
	}
	if _, err := s.wst().AppendRows(context.Background(), s.id, store.Fence{}, *pending); err != nil {
		return fmt.Errorf("save transcript: %w", err)
	}
	*pending = (*pending)[:0]
	return nil
}

// loadMessages builds the model transcript: system prompt, then the active rows.
func (s *Session) loadMessages(ctx context.Context) ([]model.Message, error) {
	rows, err := s.activeRows(ctx)
	if err != nil {
		return nil, fmt.Errorf("load transcript: %w", err)
	}
	msgs := make([]model.Message, 0, len(rows)+1)
	msgs = append(msgs, model.Message{Role: "system", Content: s.e.cfg.SystemPrompt})
	for _, r := range rows {
		m, err := s.rowMessage(r)
		if err != nil {
			return nil, fmt.Errorf("load transcript: %w", err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// rowMessage is a stored row as the model sees it: attachments inlined, a tool result within
// its budget.
func (s *Session) rowMessage(r store.Row) (model.Message, error) {
	m := model.Message{Role: r.Role, Content: r.Content, Reasoning: r.Reasoning, ToolCallID: r.ToolCallID, Name: r.ToolName}
	if r.Role == "tool" {
		m.Content = s.budgetToolOutput(r.ToolName, r.ToolCallID, r.Content)
	}
	for _, path := range r.Attachments {
		if u, err := dataURL(path); err == nil {
			m.Images = append(m.Images, u)
		} else {
			m.Content += "\n[attachment unavailable: " + filepath.Base(path) + "]"
		}
	}
	if len(r.ToolCalls) > 0 {
		if err := json.Unmarshal(r.ToolCalls, &m.ToolCalls); err != nil {
			return model.Message{}, fmt.Errorf("row %d: %w", r.ID, err)
		}
	}
	return m, nil
}

// dataURL inlines an image file for the provider.
func dataURL(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return "data:" + http.DetectContentType(b) + ";base64," + base64.StdEncoding.EncodeToString(b), nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// uniqueCallIDs gives every tool call of the turn its own id. Some OpenAI-compatible servers
// number calls per response ("call_0" in every response) or send none; surfaces key a call by
// its id (an ACP client would merge two calls into one), so a repeated or empty id is
// suffixed. The transcript and the model see the same, consistent ids.
func (t *turnState) uniqueCallIDs(calls []model.ToolCall) {
	if t.callIDs == nil {
		t.callIDs = map[string]bool{}
	}
	for i := range calls {
		id := calls[i].ID
		if id == "" || t.callIDs[id] {
			base := cmp.Or(id, "call")
			for n := 2; ; n++ {
				if id = fmt.Sprintf("%s_%d", base, n); !t.callIDs[id] {
					break
				}
			}
		}
		t.callIDs[id] = true
		calls[i].ID = id
	}
}
