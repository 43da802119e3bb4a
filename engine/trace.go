package engine

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine/logctx"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/engine/tool"
)

// Spans follow the OpenTelemetry GenAI semantic conventions: a turn is an invoke_agent span,
// each model call a chat span (client kind), each tool call an execute_tool span, each policy
// hook call a hermes.policy span. The engine only uses the OpenTelemetry API: with no SDK
// installed (Config.TracerProvider nil and no global provider) every span is the no-op one and
// attributes are not even computed (IsRecording).

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/hermes-go/hermes/engine"

// agentName is gen_ai.agent.name and the name part of the turn span.
const agentName = "hermes"

// GenAI semantic-convention attribute names, and Hermes's own under hermes.*.
const (
	attrOperation     = "gen_ai.operation.name"
	attrProvider      = "gen_ai.provider.name"
	attrAgentName     = "gen_ai.agent.name"
	attrConversation  = "gen_ai.conversation.id"
	attrRequestModel  = "gen_ai.request.model"
	attrResponseModel = "gen_ai.response.model"
	attrFinish        = "gen_ai.response.finish_reasons"
	attrInputTokens   = "gen_ai.usage.input_tokens"
	attrOutputTokens  = "gen_ai.usage.output_tokens"
	attrCacheRead     = "gen_ai.usage.cache_read.input_tokens"
	attrCacheCreation = "gen_ai.usage.cache_creation.input_tokens"
	attrReasoning     = "gen_ai.usage.reasoning.output_tokens"
	attrToolName      = "gen_ai.tool.name"
	attrToolCallID    = "gen_ai.tool.call.id"
	attrToolType      = "gen_ai.tool.type"
	attrToolArgs      = "gen_ai.tool.call.arguments"
	attrToolResult    = "gen_ai.tool.call.result"
	attrInputMessages = "gen_ai.input.messages"
	attrOutputMsgs    = "gen_ai.output.messages"
	attrErrorType     = "error.type"

	attrTurnID      = "hermes.turn.id"
	attrTurnStatus  = "hermes.turn.status"
	attrExitReason  = "hermes.turn.exit_reason"
	attrOrigin      = "hermes.origin"
	attrIterations  = "hermes.turn.iterations"
	attrAPICalls    = "hermes.turn.api_calls"
	attrToolCalls   = "hermes.turn.tool_calls"
	attrCostUSD     = "hermes.usage.cost_usd"
	attrToolBlocked = "hermes.tool.blocked"
	attrPolicyHook  = "hermes.policy.hook"
	attrPolicyLang  = "hermes.policy.language"
	attrVerdict     = "hermes.policy.verdict"
	attrPolicyError = "hermes.policy.error"
)

// newTracer is the engine's tracer: from cfg, else the global provider (a no-op one unless
// the command installed an SDK provider).
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// turnContext is the context a turn runs under (called with s.mu held): a child of the span context the prompt
// arrived with (an incoming traceparent), carrying the turn span and the ids the log handler
// stamps on every line.
func (s *Session) turnContext(parent trace.SpanContext, turnID, origin string) (context.Context, trace.Span) {
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	ctx, span := s.e.tracer.Start(ctx, "invoke_agent "+agentName, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(attrOperation, "invoke_agent"),
			attribute.String(attrAgentName, agentName),
			attribute.String(attrConversation, s.id),
			attribute.String(attrTurnID, turnID),
			attribute.String(attrOrigin, origin),
		)
		if prov, m := model.ParseName(s.rec.Model); prov != "" { // s.mu is held (newTurnLocked)
			span.SetAttributes(attribute.String(attrProvider, prov), attribute.String(attrRequestModel, m))
		}
	}
	return logctx.With(ctx, s.id, turnID), span
}

// endSpan closes the turn span with the outcome.
func (t *turnState) endSpan(out Outcome) {
	span := t.span
	if span.IsRecording() {
		t.mu.Lock()
		iter := t.iteration
		t.mu.Unlock()
		span.SetAttributes(
			attribute.String(attrTurnStatus, out.Status),
			attribute.String(attrExitReason, out.ExitReason),
			attribute.Int(attrIterations, iter),
			attribute.Int(attrAPICalls, out.APICalls),
			attribute.Int64(attrToolCalls, t.toolCalls()),
			attribute.Int(attrInputTokens, out.Usage.PromptTokens),
			attribute.Int(attrOutputTokens, out.Usage.CompletionTokens),
		)
		if out.Usage.CostUSD > 0 {
			span.SetAttributes(attribute.Float64(attrCostUSD, out.Usage.CostUSD))
		}
		if out.Model != "" {
			_, m := model.ParseName(out.Model)
			span.SetAttributes(attribute.String(attrResponseModel, m))
		}
		if t.s.e.cfg.TraceContent && out.Text != "" {
			span.SetAttributes(attribute.String(attrOutputMsgs, outputMessages(out.Text, nil, "")))
		}
		switch out.Status {
		case StatusFailed:
			span.SetAttributes(attribute.String(attrErrorType, errorType(out.ExitReason)))
			span.SetStatus(codes.Error, redact.String(out.Error))
		case StatusCompleted:
			span.SetStatus(codes.Ok, "")
		}
	}
	span.End()
	t.s.e.log.InfoContext(t.ctx, "turn ended", "status", out.Status, "exit_reason", out.ExitReason, "api_calls", out.APICalls)
}

// errorType is the error.type of a failed turn: its exit reason without the parenthesised
// detail (provider_error(...) → provider_error), so it has few distinct values.
func errorType(reason string) string {
	for i := range len(reason) {
		if reason[i] == '(' {
			return reason[:i]
		}
	}
	if reason == "" {
		return "failed"
	}
	return reason
}

// chatSpan starts the span of one model call.
func (t *turnState) chatSpan(name string, req *model.Request) (context.Context, trace.Span) {
	prov, m := model.ParseName(name)
	ctx, span := t.s.e.tracer.Start(t.ctx, "chat "+m, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(attrOperation, "chat"),
			attribute.String(attrProvider, prov),
			attribute.String(attrRequestModel, m),
			attribute.String(attrConversation, t.s.id),
		)
		if t.s.e.cfg.TraceContent {
			span.SetAttributes(attribute.String(attrInputMessages, inputMessages(req.Messages)))
		}
	}
	return ctx, span
}

// endChatSpan closes a model call's span. responseModel is the provider:model that answered
// (another than the requested one after a fallback), "" for the requested one.
func (t *turnState) endChatSpan(span trace.Span, name, responseModel string, acc *model.Accumulator, err error) {
	if span.IsRecording() {
		_, m := model.ParseName(name)
		if responseModel != "" {
			_, m = model.ParseName(responseModel)
		}
		span.SetAttributes(attribute.String(attrResponseModel, m))
		if acc.FinishReason != "" {
			span.SetAttributes(attribute.StringSlice(attrFinish, []string{acc.FinishReason}))
		}
		if acc.HaveUsage {
			u := acc.Usage
			span.SetAttributes(attribute.Int(attrInputTokens, u.PromptTokens), attribute.Int(attrOutputTokens, u.CompletionTokens))
			if u.CachedTokens > 0 {
				span.SetAttributes(attribute.Int(attrCacheRead, u.CachedTokens))
			}
			if u.CacheWriteTokens > 0 {
				span.SetAttributes(attribute.Int(attrCacheCreation, u.CacheWriteTokens))
			}
			if u.ReasoningTokens > 0 {
				span.SetAttributes(attribute.Int(attrReasoning, u.ReasoningTokens))
			}
		}
		if t.s.e.cfg.TraceContent {
			msg := acc.Message()
			span.SetAttributes(attribute.String(attrOutputMsgs, outputMessages(msg.Content, msg.ToolCalls, acc.FinishReason)))
		}
		if err != nil {
			if t.ctx.Err() != nil {
				span.SetAttributes(attribute.String(attrErrorType, "cancelled"))
			} else {
				span.SetAttributes(attribute.String(attrErrorType, "provider_error"))
			}
			span.SetStatus(codes.Error, redact.String(err.Error()))
		}
	}
	span.End()
}

// toolSpan starts the span of one tool call.
func (t *turnState) toolSpan(c model.ToolCall) (context.Context, trace.Span) {
	ctx, span := t.s.e.tracer.Start(t.ctx, "execute_tool "+c.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(attrOperation, "execute_tool"),
			attribute.String(attrToolName, c.Name),
			attribute.String(attrToolCallID, c.ID),
			attribute.String(attrToolType, "function"),
			attribute.String(attrConversation, t.s.id),
		)
		if t.s.e.cfg.TraceContent {
			span.SetAttributes(attribute.String(attrToolArgs, redact.String(c.Arguments)))
		}
	}
	return ctx, span
}

// endToolSpan closes a tool call's span: an error status when the tool failed or was blocked.
func (t *turnState) endToolSpan(ctx context.Context, span trace.Span, c model.ToolCall, res tool.Result, blocked bool) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool(attrToolBlocked, blocked))
		if t.s.e.cfg.TraceContent {
			span.SetAttributes(attribute.String(attrToolResult, redact.String(res.Content)))
		}
		if res.IsError {
			typ := "tool_error"
			if blocked {
				typ = "blocked"
			}
			span.SetAttributes(attribute.String(attrErrorType, typ))
			span.SetStatus(codes.Error, redact.String(clip(res.Content, 200)))
		}
	}
	span.End()
	t.s.e.log.DebugContext(ctx, "tool call ended", "tool", c.Name, "call_id", c.ID, "is_error", res.IsError, "blocked", blocked)
}

// policySpan starts the span of one policy hook call; impl is the hook (its language is
// reported when it says, else the built-in Go one is assumed).
func (e *Engine) policySpan(ctx context.Context, hook, sessionID string, impl any) (context.Context, trace.Span) {
	ctx, span := e.tracer.Start(ctx, "hermes.policy "+hook, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(attrPolicyHook, hook),
			attribute.String(attrPolicyLang, hookLang(impl, sessionID, hook)),
		)
		if sessionID != "" {
			span.SetAttributes(attribute.String(attrConversation, sessionID))
		}
	}
	return ctx, span
}

// endPolicySpan closes a hook's span with its verdict; err is the hook's failure (the verdict
// is then the fallback's).
func endPolicySpan(span trace.Span, verdict string, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String(attrVerdict, verdict))
		if err != nil {
			span.SetAttributes(attribute.String(attrPolicyError, redact.String(err.Error())), attribute.String(attrErrorType, "hook_error"))
			span.SetStatus(codes.Error, redact.String(err.Error()))
		}
	}
	span.End()
}

// hookLang is the language of the hook that decides for the session: a dispatcher says per
// session (HookLang), a script policy says what it is (Lang), anything else is Go.
func hookLang(impl any, sessionID, hook string) string {
	switch h := impl.(type) {
	case interface {
		HookLang(sessionID, hook string) string
	}:
		return h.HookLang(sessionID, hook)
	case interface{ Lang() string }:
		return h.Lang()
	}
	return "go"
}

// wireMessage is one message of gen_ai.input.messages / gen_ai.output.messages: a role and
// parts, as the GenAI conventions' JSON schema has them.
type wireMessage struct {
	Role         string     `json:"role"`
	Parts        []wirePart `json:"parts"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

type wirePart struct {
	Type      string `json:"type"`
	Content   string `json:"content,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Response  string `json:"response,omitempty"`
}

// inputMessages renders a request's messages, redacted.
func inputMessages(msgs []model.Message) string {
	out := make([]wireMessage, 0, len(msgs))
	for _, m := range msgs {
		w := wireMessage{Role: m.Role}
		switch {
		case m.Role == "tool":
			w.Parts = append(w.Parts, wirePart{Type: "tool_call_response", ID: m.ToolCallID, Response: redact.String(m.Content)})
		case m.Content != "":
			w.Parts = append(w.Parts, wirePart{Type: "text", Content: redact.String(m.Content)})
		}
		for _, c := range m.ToolCalls {
			w.Parts = append(w.Parts, wirePart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: redact.String(c.Arguments)})
		}
		out = append(out, w)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// outputMessages renders a model's answer, redacted.
func outputMessages(text string, calls []model.ToolCall, finish string) string {
	w := wireMessage{Role: "assistant", FinishReason: finish}
	if text != "" {
		w.Parts = append(w.Parts, wirePart{Type: "text", Content: redact.String(text)})
	}
	for _, c := range calls {
		w.Parts = append(w.Parts, wirePart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: redact.String(c.Arguments)})
	}
	if w.Parts == nil {
		w.Parts = []wirePart{}
	}
	b, _ := json.Marshal([]wireMessage{w})
	return string(b)
}
