package acp

import (
	"context"
	"encoding/json"
	"errors"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
)

// methodElicitationCreate asks the client to show a form (ACP elicitation, form mode).
const methodElicitationCreate = "elicitation/create"

// elicitRequest is elicitation/create in form mode, scoped to a session and the tool call
// that asks, as the protocol's schema defines it. The Go SDK's own request type has neither
// sessionId nor toolCallId, so the adapter sends this one itself (agent.call).
type elicitRequest struct {
	SessionID  string       `json:"sessionId"`
	ToolCallID string       `json:"toolCallId,omitempty"`
	Mode       string       `json:"mode"`
	Message    string       `json:"message"`
	Schema     elicitSchema `json:"requestedSchema"`
}

type elicitSchema struct {
	Type       string                    `json:"type"`
	Properties map[string]elicitProperty `json:"properties"`
	Required   []string                  `json:"required,omitempty"`
}

type elicitProperty struct {
	Type        string `json:"type"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

// elicitResponse is the client's answer: action accept (with content), decline or cancel.
type elicitResponse struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content"`
}

// elicitField is the form's one field, the answer's text.
const elicitField = "answer"

// elicit shows a free-text clarify question as an elicitation form with one required text
// field. Accepted, its text is the answer; declined, cancelled, unanswered in time or failed,
// the question is withdrawn and the model proceeds on its own judgement.
func (t *turn) elicit(ctx context.Context, r engine.Request, q, callID string) {
	if _, ok := t.tools[callID]; !ok {
		t.start(ctx, callID, "clarify", nil, sdk.ToolCallStatusPending)
	}
	req := elicitRequest{
		SessionID: t.id, ToolCallID: callID, Mode: "form", Message: q,
		Schema: elicitSchema{
			Type:       "object",
			Properties: map[string]elicitProperty{elicitField: {Type: "string", Title: "Answer", Description: q}},
			Required:   []string{elicitField},
		},
	}
	t.ask(ctx, r.ID, t.a.o.QuestionTimeout, func(askCtx context.Context) {
		var resp elicitResponse
		err := t.a.call(askCtx, methodElicitationCreate, req, &resp)
		reason := ""
		switch {
		case err != nil:
			reason = "the editor gave no answer"
		case resp.Action == "accept":
			text, ok := resp.Content[elicitField].(string)
			if !ok {
				reason = "the editor's answer had no text"
				break
			}
			if err := t.ss.s.Answer(r.ID, map[string]any{"answer": text}); err != nil && !errors.Is(err, engine.ErrUnknownRequest) {
				_ = t.ss.s.Withdraw(r.ID, "the editor's answer was not accepted")
			}
			return
		case resp.Action == "decline":
			reason = "the user declined to answer"
		default:
			reason = "the user dismissed the question"
		}
		if err := t.ss.s.Withdraw(r.ID, reason); err != nil && !errors.Is(err, engine.ErrUnknownRequest) {
			t.a.o.Logger.Warn("acp: question not withdrawn", "request", r.ID, "err", err)
		}
	})
}

// call sends a request of the adapter's own to the client and decodes its result into out.
// An error answer is returned as *sdk.RequestError. When ctx ends first the client is sent
// $/cancel_request for it, and its late answer is dropped.
func (a *agent) call(ctx context.Context, method string, params, out any) error {
	ids := a.w.ids
	if ids == nil {
		return errors.New("the connection cannot send requests")
	}
	tok, answer := ids.expect()
	frame, err := marshalPlain(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(tok), "method": method, "params": params})
	if err != nil {
		ids.forget(tok)
		return err
	}
	if _, err := a.w.Write(append(frame, '\n')); err != nil {
		ids.forget(tok)
		return err
	}
	select {
	case line := <-answer:
		var resp struct {
			Result json.RawMessage   `json:"result"`
			Error  *sdk.RequestError `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return err
		}
		if resp.Error != nil {
			return resp.Error
		}
		return json.Unmarshal(resp.Result, out)
	case <-ctx.Done():
		ids.forget(tok)
		if cancel, err := marshalPlain(map[string]any{"jsonrpc": "2.0", "method": "$/cancel_request", "params": map[string]any{"requestId": json.RawMessage(tok)}}); err == nil {
			_, _ = a.w.Write(append(cancel, '\n'))
		}
		return ctx.Err()
	}
}

// elicitsForms reports whether the client said it renders elicitation forms.
func (a *agent) elicitsForms() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.forms
}
