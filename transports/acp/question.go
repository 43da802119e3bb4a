package acp

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
)

// Option ids of a clarify question shown as a permission request: "choice_1"… and optSkip.
const optSkip = "skip"

// question shows a clarify question the editor can answer — one question with choices — as
// session/request_permission whose options are the choices (and Skip), tied to the clarify
// tool call; a free-text one as an elicitation form (elicit) when the client advertised
// clientCapabilities.elicitation.form. Any other question (free text to a client without
// forms, a batch, sudo, secret) is withdrawn at once: the turn never waits on a question
// nobody sees, and the model is told to proceed on its own judgement. After such a withdrawal
// the clarify tool is hidden from the model for the rest of the session.
func (t *turn) question(ctx context.Context, r engine.Request) {
	q, _ := r.Payload["question"].(string)
	choices := stringList(r.Payload["choices"])
	if r.Kind == engine.KindClarify && q != "" && len(choices) == 0 && r.Payload["questions"] == nil && t.a.elicitsForms() {
		callID, _ := r.Payload["call_id"].(string)
		if callID == "" {
			callID = r.ID
		}
		t.elicit(ctx, r, q, callID)
		return
	}
	if r.Kind != engine.KindClarify || q == "" || len(choices) == 0 || r.Payload["questions"] != nil {
		if err := t.ss.s.Withdraw(r.ID, "the editor cannot answer this question"); err != nil && !errors.Is(err, engine.ErrUnknownRequest) {
			t.a.o.Logger.Warn("acp: question not withdrawn", "request", r.ID, "err", err)
		}
		if r.Kind == engine.KindClarify {
			t.ss.s.HideTools("clarify")
		}
		return
	}
	callID, _ := r.Payload["call_id"].(string)
	if callID == "" {
		callID = r.ID
	}
	if _, ok := t.tools[callID]; !ok {
		t.start(ctx, callID, "clarify", nil, sdk.ToolCallStatusPending)
	}
	opts := make([]sdk.PermissionOption, 0, len(choices)+1)
	for i, c := range choices {
		opts = append(opts, sdk.PermissionOption{Kind: sdk.PermissionOptionKindAllowOnce, Name: c, OptionId: sdk.PermissionOptionId(fmt.Sprintf("choice_%d", i+1))})
	}
	opts = append(opts, sdk.PermissionOption{Kind: sdk.PermissionOptionKindRejectOnce, Name: "Skip", OptionId: optSkip})
	req := sdk.RequestPermissionRequest{
		SessionId: sdk.SessionId(t.id),
		ToolCall:  sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(callID), Title: sdk.Ptr(q), Kind: sdk.Ptr(sdk.ToolKindThink)},
		Options:   opts,
	}
	t.ask(ctx, r.ID, t.a.o.QuestionTimeout, func(askCtx context.Context) {
		resp, err := t.a.conn.RequestPermission(askCtx, req)
		var answer map[string]any
		if err == nil && resp.Outcome.Selected != nil {
			id := string(resp.Outcome.Selected.OptionId)
			if id == optSkip {
				answer = map[string]any{"answer": ""}
			}
			for i, c := range choices {
				if id == fmt.Sprintf("choice_%d", i+1) {
					answer = map[string]any{"answer": c}
				}
			}
		}
		if answer == nil {
			_ = t.ss.s.Withdraw(r.ID, "the editor gave no answer")
			return
		}
		if err := t.ss.s.Answer(r.ID, answer); err != nil && !errors.Is(err, engine.ErrUnknownRequest) {
			_ = t.ss.s.Withdraw(r.ID, "the editor's answer was not accepted")
		}
	})
}

func stringList(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		out := make([]string, 0, len(l))
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
