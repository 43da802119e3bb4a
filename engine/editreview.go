package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// approvedEdits is the approved-pattern key an "allow for this session" answer to an edit
// review records.
const approvedEdits = "file edits"

// SetEditReview says whether the session's client reviews file edits: when on, in the default
// approval mode every change write_file or patch is about to make is first sent as an approval
// request whose payload carries the edits (path, old_text, new_text), and nothing is written
// unless it is approved. "session" approves every later edit of the session; the edit modes
// (accept_edits, dont_ask) and a call the person already approved skip the review. It lasts
// as long as the live session (a surface sets it when it attaches).
func (s *Session) SetEditReview(on bool) {
	a := &s.attached
	a.mu.Lock()
	a.reviewEdits = on
	a.mu.Unlock()
}

// editReviewer is the ReviewEdits of a tool call's Env: nil unless the request host's client
// reviews edits.
func (s *Session) editReviewer(t *turnState, c model.ToolCall) func(context.Context, []tool.Edit) error {
	host := s.requestHost()
	host.attached.mu.RLock()
	on := host.attached.reviewEdits
	host.attached.mu.RUnlock()
	if !on {
		return nil
	}
	return func(ctx context.Context, edits []tool.Edit) error {
		if host.ApprovalMode() != ModeDefault {
			return nil
		}
		host.mu.Lock()
		ok := host.approved[approvedEdits]
		host.mu.Unlock()
		if ok {
			return nil
		}
		list := make([]map[string]any, 0, len(edits))
		paths := make([]string, 0, len(edits))
		for _, e := range edits {
			list = append(list, map[string]any{"path": e.Path, "old_text": e.OldText, "new_text": e.NewText, "created": e.Created, "deleted": e.Deleted})
			paths = append(paths, e.Path)
		}
		payload := map[string]any{
			"tool": c.Name, "call_id": c.ID, "kind": "edit", "edits": list,
			"description": "edit " + strings.Join(paths, ", "), "allow_permanent": false,
		}
		ans, err := host.ask(ctx, t.id, KindApproval, payload, s.e.cfg.ApprovalTimeout)
		choice, _ := ans["choice"].(string)
		switch {
		case errors.Is(err, ErrRequestTimeout):
			return errors.New("the edit was not approved in time")
		case err != nil:
			return fmt.Errorf("the edit approval was withdrawn (%v)", err)
		case choice == ChoiceDeny:
			return errors.New("the user rejected this edit; do not retry it, ask what to do instead")
		case choice == ChoiceSession || choice == ChoiceAlways:
			host.mu.Lock()
			host.approved[approvedEdits] = true
			host.mu.Unlock()
		}
		return nil
	}
}
