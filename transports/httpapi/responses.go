package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// Store keys of the Responses API. Records live in the session store's key-value space, so
// they survive restarts and are shared by every server on that store.
const (
	kvResponse     = "httpapi/response/"
	kvConversation = "httpapi/conversation/"
	// kvConversationOf prefixes the conversations of principals other than the local owner.
	kvConversationOf = "httpapi/conversation@"
)

type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"` // a name, or {"id": name}
	Store              *wire.FlexBool  `json:"store"`
	Stream             wire.FlexBool   `json:"stream"`
}

type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

// storedResponse is what the store keeps per response: the object served by GET, and the
// session that continues the chain.
type storedResponse struct {
	Response     map[string]any `json:"response"`
	SessionID    string         `json:"session_id"`
	Conversation string         `json:"conversation,omitempty"`
	// Owner is the principal that created the response (engine.Principal.ID; "" is the local
	// owner, as for records stored before owners were recorded).
	Owner string `json:"owner,omitempty"`
	// LastRowID is the session's last row when the response was stored (the end of its turn;
	// 0 in records stored before it was kept): a response that continues this one sees the
	// conversation up to there, not a turn the session took after it.
	LastRowID uint64 `json:"last_row_id,omitempty"`
}

// conversationKey is the store key of a conversation name. Names are per principal: the
// local owner's keep the original key space, another principal's live under its own prefix.
func conversationKey(owner, name string) string {
	if owner == "" {
		return kvConversation + name
	}
	return kvConversationOf + owner + "/" + name
}

// parseInput returns the rows before the new prompt and the prompt (the last user message).
func parseInput(raw json.RawMessage, now time.Time) ([]engine.Row, string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "", wire.BadRequest("input", "missing_input", "Missing required parameter: 'input'")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || strings.TrimSpace(s) == "" {
			return nil, "", wire.BadRequest("input", "missing_input", "'input' must be a non-empty string or array")
		}
		return nil, s, nil
	}
	var items []inputItem
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return nil, "", wire.BadRequest("input", "invalid_type", "'input' must be a string or array")
	}
	var rows []engine.Row
	for i, it := range items {
		switch it.Type {
		case "", "message":
			text, err := flatten(it.Content, i)
			if err != nil {
				return nil, "", wire.WithParam(err, "input["+strconv.Itoa(i)+"].content")
			}
			switch it.Role {
			case "user", "assistant", "system":
			case "developer":
				it.Role = "system"
			default:
				return nil, "", wire.BadRequest("input["+strconv.Itoa(i)+"].role", "invalid_value", "unknown role "+strconv.Quote(it.Role))
			}
			rows = append(rows, engine.Row{Role: it.Role, Content: text, Time: now})
		case "function_call_output":
			text, err := flatten(it.Output, i)
			if err != nil {
				return nil, "", wire.BadRequest("input["+strconv.Itoa(i)+"].output", "invalid_type", "output must be a string or text parts")
			}
			rows = append(rows, engine.Row{Role: "user", Content: "[tool result]\n" + text, Time: now})
		case "function_call", "reasoning":
			// Replayed output items of earlier calls: the session already has them.
		default:
			return nil, "", wire.BadRequest("input["+strconv.Itoa(i)+"].type", "unsupported_content_type", "input item type "+strconv.Quote(it.Type)+" is not supported")
		}
	}
	last := len(rows) - 1
	if last < 0 || rows[last].Role != "user" || strings.TrimSpace(rows[last].Content) == "" {
		return nil, "", wire.BadRequest("input", "no_user_message", "the last input item must be a non-empty user message")
	}
	return rows[:last], rows[last].Content, nil
}

func conversationName(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var name string
	if json.Unmarshal(raw, &name) != nil {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return "", wire.BadRequest("conversation", "invalid_type", "'conversation' must be a string or {\"id\": string}")
		}
		name = obj.ID
	}
	if len(name) > wire.MaxHeaderID || wire.HasControl(name) {
		return "", wire.BadRequest("conversation", "invalid_value", "invalid conversation name")
	}
	return name, nil
}

// loadResponse reads stored response id if principal p sees it; another principal's is
// engine.ErrNotFound, like one that does not exist.
func (s *Server) loadResponse(ctx context.Context, p engine.Principal, id string) (storedResponse, error) {
	var rec storedResponse
	b, err := s.eng.Setting(ctx, kvResponse+id)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, err
	}
	if !p.Sees(rec.Owner) {
		return storedResponse{}, engine.ErrNotFound
	}
	return rec, nil
}

func (s *Server) createResponse(c *fiber.Ctx) error {
	var req responsesRequest
	if err := wire.DecodeJSON(c.Body(), &req); err != nil {
		return err
	}
	modelName, err := s.pickModel(req.Model)
	if err != nil {
		return err
	}
	conv, err := conversationName(req.Conversation)
	if err != nil {
		return err
	}
	prev := ""
	if req.PreviousResponseID != nil {
		prev = *req.PreviousResponseID
	}
	if conv != "" && prev != "" {
		return wire.BadRequest("conversation", "invalid_request", "Cannot use both 'conversation' and 'previous_response_id'")
	}
	key := c.Get(HeaderSessionKey)
	if key != "" {
		if err := wire.ValidSessionKey(key); err != nil {
			return err
		}
	}
	now := time.Now().UTC()
	history, prompt, err := parseInput(req.Input, now)
	if err != nil {
		return err
	}
	at, err := s.begin(c)
	if err != nil {
		return err
	}
	if at.prev != nil {
		run := at.replayed(c)
		return s.respond(c, run, at.prev.ans.rb, bool(req.Stream), at)
	}
	if conv != "" {
		if b, err := s.eng.Setting(s.ctx, conversationKey(who(c).ID, conv)); err == nil {
			prev = string(b) // a new name simply starts the conversation
		} else if !errors.Is(err, engine.ErrNotFound) {
			at.abandon()
			return err
		}
	}
	if req.Instructions != nil && *req.Instructions != "" {
		// Instructions apply from this call on; OpenAI does not inherit them implicitly, and a
		// chain that wants them resends them.
		history = append([]engine.Row{{Role: "system", Content: *req.Instructions, Time: now}}, history...)
	}
	sess, err := s.responseSession(c, prev, modelName, key, history)
	if err != nil {
		at.abandon()
		return err
	}
	at.session(c, sess.ID(), key)
	run, err := s.startOrCommand(c, sess, prompt)
	if err != nil {
		at.abandon()
		return err
	}
	rb := &respBuilder{
		id: "resp_" + wire.NewHex(14), msgID: "msg_" + wire.NewHex(12), model: sess.Record().Model, created: now.Unix(),
		prev: prev, store: req.Store == nil || bool(*req.Store), instructions: req.Instructions,
		conv: conv, sessionID: sess.ID(), owner: who(c).ID,
	}
	return s.respond(c, run, rb, bool(req.Stream), at)
}

// responseSession opens the session a response continues (prev, the previous response) and
// appends the new history to it, or seeds a new one; a model named by the request applies to it.
func (s *Server) responseSession(c *fiber.Ctx, prev, modelName, key string, history []engine.Row) (*engine.Session, error) {
	ctx := s.ctx
	var sess *engine.Session
	if prev != "" {
		rec, err := s.loadResponse(ctx, who(c), prev)
		if errors.Is(err, engine.ErrNotFound) {
			return nil, &wire.Error{Status: fiber.StatusBadRequest, Message: "Previous response with id '" + prev + "' not found.", Type: "invalid_request_error", Param: "previous_response_id", Code: "previous_response_not_found"}
		}
		if err != nil {
			return nil, err
		}
		if sess, err = s.continueAt(ctx, rec); err != nil {
			return nil, err
		}
		if len(history) > 0 {
			if err := sess.Append(ctx, history...); err != nil {
				return nil, err
			}
		}
	} else {
		var err error
		if sess, err = s.openOrSeed(ctx, who(c), "resp-"+wire.NewHex(12), modelName, key, history); err != nil {
			return nil, err
		}
	}
	return sess, switchModel(ctx, sess, modelName)
}

// continueAt opens the session a stored response continues. When the session took another
// turn after that response (one whose request was never answered, cut by a client's timeout or
// an outage, or another response continuing the same one), the conversation is branched at the
// response's end, so the model sees exactly the chain of responses the client holds.
func (s *Server) continueAt(ctx context.Context, rec storedResponse) (*engine.Session, error) {
	if rec.LastRowID != 0 {
		later, err := s.eng.History(ctx, rec.SessionID, engine.RowQuery{AfterID: rec.LastRowID})
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(later, func(r engine.Row) bool { return r.Role == "user" }) {
			b, err := s.eng.Branch(ctx, rec.SessionID, engine.BranchOptions{UptoRowID: rec.LastRowID})
			if err == nil {
				return b, nil
			}
			if !errors.Is(err, engine.ErrStaleRow) {
				return nil, err
			}
			// Its end is no longer an active row (compacted): go on from the session as it is.
		}
	}
	return s.eng.Open(ctx, rec.SessionID)
}

// HeaderResponseID carries the id of the response a /v1/responses request made, on every
// reply: a failed turn answers with an error object, and the id is how a client reads the
// failed response that was stored.
const HeaderResponseID = "X-Hermes-Response-Id"

// respond follows the turn and answers: the Response object, or its event stream. A turn that
// failed is stored as a failed response and, without a stream, answered with the error
// (turnError), so every client raises it.
func (s *Server) respond(c *fiber.Ctx, run *turnRun, rb *respBuilder, stream bool, at *attempt) error {
	c.Set(HeaderResponseID, rb.id)
	if !stream {
		s.reqs.Add(1)
		defer s.reqs.Done()
		defer run.close("shutdown")
		if err := s.pump(run, nil, nil, nil); err != nil {
			at.abandon()
			return err
		}
		obj := rb.final(run.out)
		if at.prev == nil { // a replay's response was stored by the request that ran it
			if err := s.saveResponse(rb, obj); err != nil {
				// Not stored: not acknowledged either (a 503 when the store is out); a
				// retry with the same Idempotency-Key runs again.
				at.abandon()
				return err
			}
		}
		at.finish(answer{out: run.out, rb: rb})
		if obj["status"] == "failed" {
			e := turnError(run.out)
			e.ResponseID = rb.id
			return writeError(c, e)
		}
		return c.JSON(obj)
	}
	return s.streamSSE(c, func(sse *sseWriter) { s.responseStream(sse, run, rb, at) })
}

// saveResponse persists a stored response and moves its conversation to it, before the
// response is answered: an id a client was given names a stored response. A store that is
// out is waited for up to saveWithin (a database restart); past it the error is returned and
// the response is not acknowledged.
func (s *Server) saveResponse(rb *respBuilder, obj map[string]any) error {
	if !rb.store {
		return nil
	}
	ctx := context.WithoutCancel(s.ctx)
	var last uint64
	if rows, err := s.eng.History(ctx, rb.sessionID, engine.RowQuery{Tail: true, Limit: 1}); err == nil && len(rows) > 0 {
		last = rows[0].ID
	}
	b, err := json.Marshal(storedResponse{Response: obj, SessionID: rb.sessionID, Conversation: rb.conv, Owner: rb.owner, LastRowID: last})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(saveWithin)
	for {
		err = s.eng.PutSetting(ctx, kvResponse+rb.id, b)
		if err == nil && rb.conv != "" {
			err = s.eng.PutSetting(ctx, conversationKey(rb.owner, rb.conv), []byte(rb.id))
		}
		if err == nil || !errors.Is(err, engine.ErrStoreUnavailable) || time.Now().After(deadline) || s.ctx.Err() != nil {
			break
		}
		time.Sleep(saveRetry)
	}
	if err != nil {
		s.log.Error("storing response failed", "id", rb.id, "err", err)
	}
	return err
}

// How long, and how often, storing a response is tried while the store is out.
const (
	saveWithin = 5 * time.Second
	saveRetry  = 250 * time.Millisecond
)

func (s *Server) getResponse(c *fiber.Ctx) error {
	if err := wire.CheckID("response_id", "invalid_response_id", "response id", c.Params("id")); err != nil {
		return err
	}
	rec, err := s.loadResponse(s.ctx, who(c), c.Params("id"))
	if errors.Is(err, engine.ErrNotFound) {
		return responseNotFound(c.Params("id"))
	}
	if err != nil {
		return err
	}
	return c.JSON(rec.Response)
}

func (s *Server) deleteResponse(c *fiber.Ctx) error {
	id := c.Params("id")
	if err := wire.CheckID("response_id", "invalid_response_id", "response id", id); err != nil {
		return err
	}
	rec, err := s.loadResponse(s.ctx, who(c), id)
	if errors.Is(err, engine.ErrNotFound) {
		return responseNotFound(id)
	}
	if err != nil {
		return err
	}
	if rec.Conversation != "" {
		if b, err := s.eng.Setting(s.ctx, conversationKey(rec.Owner, rec.Conversation)); err == nil && string(b) == id {
			if err := s.eng.DeleteSetting(s.ctx, conversationKey(rec.Owner, rec.Conversation)); err != nil {
				return err
			}
		}
	}
	if err := s.eng.DeleteSetting(s.ctx, kvResponse+id); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"id": id, "object": "response", "deleted": true})
}

func responseNotFound(id string) error {
	return &wire.Error{Status: fiber.StatusNotFound, Message: "Response with id '" + id + "' not found.", Type: "invalid_request_error", Param: "response_id", Code: "response_not_found"}
}

// respBuilder assembles Response objects of one call.
type respBuilder struct {
	id, msgID, model, prev, conv, sessionID string
	owner                                   string // principal of the request (storedResponse.Owner)
	created                                 int64
	store                                   bool
	instructions                            *string
}

func (rb *respBuilder) object(status string, output []any, usage, errObj any) map[string]any {
	var prev, instr, completed any
	if rb.prev != "" {
		prev = rb.prev
	}
	if rb.instructions != nil {
		instr = *rb.instructions
	}
	if status == "completed" {
		completed = time.Now().Unix()
	}
	if output == nil {
		output = []any{}
	}
	return map[string]any{
		"id": rb.id, "object": "response", "created_at": rb.created, "status": status, "completed_at": completed,
		"error": errObj, "incomplete_details": nil, "instructions": instr, "model": rb.model,
		"output": output, "parallel_tool_calls": true, "previous_response_id": prev, "store": rb.store,
		"temperature": nil, "top_p": nil, "tools": []any{}, "tool_choice": "auto", "metadata": map[string]any{},
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "truncation": "disabled",
		"reasoning": nil, "max_output_tokens": nil, "user": nil, "usage": usage,
		"hermes": map[string]any{"session_id": rb.sessionID},
	}
}

func (rb *respBuilder) message(text, status string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = append(content, textPart(text))
	}
	return map[string]any{"type": "message", "id": rb.msgID, "role": "assistant", "status": status, "content": content}
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func respUsage(u model.Usage) map[string]any {
	return map[string]any{
		"input_tokens": u.PromptTokens, "input_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
		"output_tokens": u.CompletionTokens, "output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens": u.TotalTokens,
	}
}

// final is the terminal object: completed (with output_text), incomplete (a truncated but
// usable answer) or failed (with error).
func (rb *respBuilder) final(o engine.Outcome) map[string]any {
	var output []any
	if o.Text != "" {
		output = append(output, rb.message(o.Text, "completed"))
	}
	reason, ok := finish(o)
	switch {
	case !ok:
		e := wire.OutcomeError(o)
		obj := rb.object("failed", output, respUsage(o.Usage), map[string]any{"code": "server_error", "message": e.Message, "type": e.Type, "param": nil})
		return obj
	case reason == "length", reason == "content_filter":
		why := "max_output_tokens"
		if reason == "content_filter" { // the model refused: OpenAI's incomplete reason for it
			why = reason
		}
		obj := rb.object("incomplete", output, respUsage(o.Usage), nil)
		obj["incomplete_details"] = map[string]any{"reason": why}
		obj["output_text"] = o.Text
		return obj
	}
	obj := rb.object("completed", output, respUsage(o.Usage), nil)
	obj["output_text"] = o.Text
	return obj
}

// responseStream writes the Responses event sequence; every event has an event: line equal
// to its type and a sequence_number counting from 0.
func (s *Server) responseStream(sse *sseWriter, run *turnRun, rb *respBuilder, at *attempt) {
	reason := "client disconnected"
	unsaved := false
	defer func() {
		run.close(reason)
		if unsaved {
			at.abandon() // not acknowledged: a retry with the same Idempotency-Key runs again
			return
		}
		at.finish(answer{out: s.outcomeOf(run), rb: rb})
	}()
	seq := 0
	emit := func(typ string, m map[string]any) {
		m["type"], m["sequence_number"] = typ, seq
		seq++
		sse.event(typ, m)
	}
	// emitError writes the error event in both published forms, flat (the schema) and nested
	// (what OpenAI sends): each SDK raises on one of them.
	emitError := func(e *wire.Error) {
		var code any
		if e.Code != "" {
			code = e.Code
		}
		emit("error", map[string]any{"code": code, "message": e.Message, "param": nil, "error": wire.Body(e)["error"]})
	}
	inProgress := rb.object("in_progress", nil, nil, nil)
	emit("response.created", map[string]any{"response": inProgress})
	emit("response.in_progress", map[string]any{"response": inProgress})
	if sse.Flush() != nil {
		return
	}
	opened := false
	open := func() {
		if !opened {
			opened = true
			emit("response.output_item.added", map[string]any{"output_index": 0, "item": rb.message("", "in_progress")})
			emit("response.content_part.added", map[string]any{"item_id": rb.msgID, "output_index": 0, "content_index": 0, "part": textPart("")})
		}
	}
	var text strings.Builder
	err := s.pump(run, sse, func(ev engine.Event) bool {
		if ev.Type != engine.EvMessageDelta || ev.Text == "" {
			return false
		}
		open()
		text.WriteString(ev.Text)
		emit("response.output_text.delta", map[string]any{"item_id": rb.msgID, "output_index": 0, "content_index": 0, "delta": ev.Text, "logprobs": []any{}})
		return true
	}, func() { sse.comment("keepalive") })
	if errors.Is(err, errClientGone) {
		return
	}
	if err != nil {
		reason = "shutdown"
		emitError(wire.Classify(err))
		_ = sse.Flush()
		return
	}
	// The turn is over: give its slot back before the client sees the end.
	run.close(reason)
	o := run.out
	if o.Text != "" || text.Len() > 0 {
		if rest, ok := strings.CutPrefix(o.Text, text.String()); ok && rest != "" {
			open() // deltas lost to a lagging subscription: send what is missing
			emit("response.output_text.delta", map[string]any{"item_id": rb.msgID, "output_index": 0, "content_index": 0, "delta": rest, "logprobs": []any{}})
		}
		open()
		emit("response.output_text.done", map[string]any{"item_id": rb.msgID, "output_index": 0, "content_index": 0, "text": o.Text, "logprobs": []any{}})
		emit("response.content_part.done", map[string]any{"item_id": rb.msgID, "output_index": 0, "content_index": 0, "part": textPart(o.Text)})
		emit("response.output_item.done", map[string]any{"output_index": 0, "item": rb.message(o.Text, "completed")})
	}
	obj := rb.final(o)
	if at.prev == nil {
		if err := s.saveResponse(rb, obj); err != nil {
			// Not stored: the stream ends with the error, not with a response it names.
			unsaved = true
			emitError(wire.Classify(err))
			_ = sse.Flush()
			return
		}
	}
	switch obj["status"] {
	case "failed":
		// The error event first: the openai SDKs (and LangChain over them) raise on it, the
		// AI SDK and openai-go on either; response.failed then ends the stream as OpenAI's do.
		emitError(wire.OutcomeError(o))
		emit("response.failed", map[string]any{"response": obj})
	case "incomplete":
		emit("response.incomplete", map[string]any{"response": obj})
	default:
		emit("response.completed", map[string]any{"response": obj})
	}
	_ = sse.Flush()
}
