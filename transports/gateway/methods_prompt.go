package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

type submitParams struct {
	common
	SessionID                 string          `json:"session_id"`
	Text                      json.RawMessage `json:"text"`
	DisplayKind               string          `json:"display_kind"`
	Interrupted               bool            `json:"interrupted"`
	Queued                    bool            `json:"queued"`
	InputProvenance           json.RawMessage `json:"input_provenance"`
	Surface                   string          `json:"surface"`
	TitlePreview              string          `json:"title_preview"`
	TruncateBeforeUserOrdinal *intParam       `json:"truncate_before_user_ordinal"`
	TruncateBeforeRowID       *intParam       `json:"truncate_before_row_id"`
	ConfirmTruncate           bool            `json:"confirm_truncate"`
	ConfirmEmptyTruncate      bool            `json:"confirm_empty_truncate"`
	ConfirmDeepTruncate       bool            `json:"confirm_deep_truncate"`
}

// promptText accepts a string or a list of text parts.
func promptText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", rpcErr(-32602, "invalid params for prompt.submit: text must be a string or a list of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func promptSubmit(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[submitParams](m, raw)
	if err != nil {
		return nil, err
	}
	l, err := c.sess(p.SessionID)
	if err != nil {
		return nil, err
	}
	text, err := promptText(p.Text)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(text) == "" {
		return nil, rpcErr(codeInvalidArg, "text is required")
	}
	var tr *engine.Truncate
	if p.TruncateBeforeRowID != nil || p.TruncateBeforeUserOrdinal != nil || p.ConfirmTruncate {
		tr = &engine.Truncate{Confirm: p.ConfirmTruncate, ConfirmEmpty: p.ConfirmEmptyTruncate}
		if r := p.TruncateBeforeRowID; r != nil && r.set {
			if r.bad != "" || r.v <= 0 {
				return nil, rpcErr(codeRewindInvalid, "truncate_before_row_id must be an integer")
			}
			tr.BeforeRowID = uint64(r.v)
		}
		if o := p.TruncateBeforeUserOrdinal; o != nil && o.set {
			if o.bad != "" {
				return nil, rpcErr(codeRewindInvalid, "truncate_before_user_ordinal must be an integer")
			}
			v := int(o.v)
			tr.BeforeUserOrdinal = &v
		}
	}
	l.mu.Lock()
	images := l.images
	l.images = nil
	l.mu.Unlock()
	adm, err := c.g.submit(c.who, l.s, func() (engine.Admission, error) {
		return l.s.Submit(ctx, engine.Prompt{Text: text, Origin: "tui", Queued: p.Queued, Truncate: tr, Images: images, Hidden: p.DisplayKind == "hidden"})
	})
	if err != nil {
		if len(images) > 0 { // keep the attachments for the retry
			l.mu.Lock()
			l.images = append(images, l.images...)
			l.mu.Unlock()
		}
		if errors.Is(err, engine.ErrTruncateStale) {
			return nil, staleErr(ctx, l, err, tr)
		}
		return nil, err
	}
	out := map[string]any{}
	switch adm.Status {
	case engine.AdmitStarted:
		out["status"] = "streaming"
		out["user_row_id"] = adm.UserRowID
		if tr != nil {
			out["survivor_user_row_ids"] = adm.Survivors
		}
	case engine.AdmitQueued:
		out["status"] = "queued"
	case engine.AdmitSteered:
		out["status"] = "steered"
	case engine.AdmitCommand:
		out["status"] = "command"
		out["output"] = adm.Message
	default:
		out["status"] = "rejected"
		out["message"] = adm.Message
	}
	return out, nil
}

// staleErr is 4018 with the data a client needs to refetch.
func staleErr(ctx context.Context, l *live, err error, tr *engine.Truncate) error {
	users := 0
	if rows, rerr := l.s.History(ctx, engine.RowQuery{}); rerr == nil {
		for _, r := range rows {
			if r.Role == "user" {
				users++
			}
		}
	}
	ord := -1
	if tr != nil && tr.BeforeUserOrdinal != nil {
		ord = *tr.BeforeUserOrdinal
	}
	return &jsonrpc.Error{Code: codeRewindStale, Message: err.Error(), Data: map[string]any{"user_turn_count": users, "ordinal": ord, "segment_ordinal": ord, "prefix_user_count": 0}}
}

func promptBackground(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Text string `json:"text"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Text) == "" {
		return nil, rpcErr(codeTextRequired, "text required")
	}
	rec := l.s.Record()
	side, err := c.g.eng.Create(ctx, engine.CreateOptions{Model: rec.Model, Cwd: rec.Cwd, Source: "background", Meta: map[string]string{"parent": rec.ID}, Principal: rec.Principal})
	if err != nil {
		return nil, err
	}
	taskID := "bg_" + randHex(3)
	adm, err := side.Submit(ctx, engine.Prompt{Text: p.Text, Origin: "background"})
	if err != nil {
		return nil, err
	}
	c.g.bg.Add(1)
	go func() { // owned by the Server; Close waits for it
		defer c.g.bg.Done()
		out, err := side.Wait(c.g.ctx, adm.TurnID)
		text := out.Text
		switch {
		case err != nil:
			side.Interrupt("shutdown")
			text = "error: " + err.Error()
		case out.Status != engine.StatusCompleted && out.Error != "":
			text = "error: " + out.Error
		}
		_ = side.Close(context.Background(), "background_done")
		l.s.Emit("background.complete", map[string]any{"task_id": taskID, "text": text, "status": out.Status})
	}()
	return map[string]any{"task_id": taskID}, nil
}

func clarifyLock(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		RequestID  string `json:"request_id"`
		QuestionID string `json:"question_id"`
		Answer     any    `json:"answer"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	l, req, ok := c.findRequest(p.RequestID)
	if !ok {
		return map[string]any{"status": "expired"}, nil
	}
	qs, _ := req.Payload["questions"].([]map[string]any)
	var qids []string
	for _, q := range qs {
		if id, ok := q["qid"].(string); ok {
			qids = append(qids, id)
		}
	}
	if len(qids) == 0 {
		return nil, rpcErr(codeInvalidArg, "request %s is not a batch clarify", p.RequestID)
	}
	known := false
	for _, q := range qids {
		known = known || q == p.QuestionID
	}
	if !known {
		return nil, rpcErr(codeInvalidArg, "unknown question_id %q", p.QuestionID)
	}
	ans := p.Answer
	if _, isStr := ans.(string); !isStr {
		b, _ := json.Marshal(ans)
		ans = string(b)
	}
	c.g.mu.Lock()
	locked := c.g.locks[p.RequestID]
	if locked == nil {
		locked = map[string]any{}
		c.g.locks[p.RequestID] = locked
	}
	locked[p.QuestionID] = ans
	var remaining []string
	for _, q := range qids {
		if _, ok := locked[q]; !ok {
			remaining = append(remaining, q)
		}
	}
	all := map[string]any{}
	for k, v := range locked {
		all[k] = v
	}
	if len(remaining) == 0 {
		delete(c.g.locks, p.RequestID)
	}
	c.g.mu.Unlock()
	if len(remaining) == 0 {
		if err := l.s.Answer(p.RequestID, map[string]any{"answers": all}); err != nil {
			return map[string]any{"status": "expired"}, nil
		}
	}
	return map[string]any{"status": "ok", "remaining": append([]string{}, remaining...)}, nil
}

// findRequest finds an open request among the live sessions the connection's principal sees;
// a request of another principal's session is not found.
func (c *client) findRequest(id string) (*live, engine.Request, bool) {
	for _, l := range c.g.liveList() {
		if !c.sees(l.s) {
			continue
		}
		for _, r := range l.s.OpenRequests() {
			if r.ID == id {
				return l, r, true
			}
		}
	}
	return nil, engine.Request{}, false
}

func requestAnswer(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		ID     string         `json:"id"`
		Result map[string]any `json:"result"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	l, _, ok := c.findRequest(p.ID)
	if !ok {
		return map[string]any{"status": "expired"}, nil
	}
	if err := l.s.Answer(p.ID, p.Result); err != nil {
		if errors.Is(err, engine.ErrUnknownRequest) {
			return map[string]any{"status": "expired"}, nil
		}
		return nil, rpcErr(codeInvalidArg, "%v", err)
	}
	return map[string]any{"status": "ok"}, nil
}

func approvalRespond(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Choice    string `json:"choice"`
		All       bool   `json:"all"`
		RequestID string `json:"request_id"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	choice := p.Choice
	if choice == "" {
		choice = engine.ChoiceDeny
	}
	resolved := 0
	for _, r := range l.s.OpenRequests() {
		if r.Kind != engine.KindApproval || (p.RequestID != "" && r.ID != p.RequestID) {
			continue
		}
		if err := l.s.Answer(r.ID, map[string]any{"choice": choice}); err != nil {
			if errors.Is(err, engine.ErrInvalidAnswer) {
				return nil, rpcErr(codeInvalidArg, "%v", err)
			}
			continue
		}
		resolved++
		if !p.All && p.RequestID == "" {
			break
		}
	}
	return map[string]any{"resolved": resolved}, nil
}
