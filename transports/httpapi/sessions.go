package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/ids"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// Sessions REST: stored sessions as resources (/api/sessions…). A session is soft-deleted:
// the store keeps its transcript, and these routes treat it as gone.

const (
	maxTitle        = 100
	maxSystemPrompt = 100_000
	sessionsDefault = 50
	sessionsMax     = 200
	messagesDefault = 200
	messagesMax     = 1000
)

func (s *Server) sessionRoutes() {
	s.app.Get("/api/sessions", s.sessionHeaders, s.listSessions)
	s.app.Post("/api/sessions", s.sessionHeaders, s.createSession)
	s.app.Get("/api/sessions/:id", s.sessionHeaders, s.getSession)
	s.app.Patch("/api/sessions/:id", s.sessionHeaders, s.patchSession)
	s.app.Delete("/api/sessions/:id", s.sessionHeaders, s.deleteSession)
	s.app.Get("/api/sessions/:id/messages", s.sessionHeaders, s.sessionMessages)
	s.app.Post("/api/sessions/:id/fork", s.sessionHeaders, s.forkSession)
	s.app.Post("/api/sessions/:id/chat", s.sessionHeaders, s.sessionChat)
	s.app.Post("/api/sessions/:id/chat/stream", s.sessionHeaders, s.sessionChatStream)
}

// sessionHeaders applies the session header rules to these routes too: a malformed
// X-Hermes-Session-Id or X-Hermes-Session-Key is a 400 before anything else happens.
func (s *Server) sessionHeaders(c *fiber.Ctx) error {
	if id := c.Get(HeaderSessionID); id != "" {
		if err := wire.ValidSessionID(id); err != nil {
			return err
		}
	}
	if k := c.Get(HeaderSessionKey); k != "" {
		if err := wire.ValidSessionKey(k); err != nil {
			return err
		}
	}
	return c.Next()
}

func sessionNotFound(id string) *wire.Error {
	return &wire.Error{Status: fiber.StatusNotFound, Message: "Session not found: " + id, Type: "invalid_request_error", Code: "session_not_found"}
}

// storeErr maps a store failure: a missing session is a 404, anything else means the store
// cannot serve (503 session_db_unavailable), never a bare 500.
func storeErr(err error, id string) error {
	switch {
	case errors.Is(err, engine.ErrSessionNotFound):
		return sessionNotFound(id)
	case errors.Is(err, context.Canceled), errors.Is(err, engine.ErrEngineClosed):
		return err
	case errors.Is(err, ids.ErrInvalid): // refused again below the edge: still the client's error
		return wire.BadRequest("id", "invalid_session_id", "invalid session id")
	}
	return wire.StoreUnavailable(err)
}

// pathID reads and checks the :id parameter.
func pathID(c *fiber.Ctx) (string, error) {
	id := c.Params("id")
	if id == "" {
		return "", wire.BadRequest("id", "invalid_session_id", "missing session id")
	}
	if err := wire.ValidSessionID(id); err != nil {
		return "", wire.WithParam(err, "id")
	}
	return id, nil
}

// record returns the stored, not deleted, session id if principal p sees it; a session of
// another principal is not found, exactly like one that does not exist. A session made live but
// not yet stored (a lazy one) exists for its owner.
func (s *Server) record(ctx context.Context, p engine.Principal, id string) (engine.Record, error) {
	rec, err := s.eng.Record(ctx, id)
	if err != nil {
		return engine.Record{}, storeErr(err, id)
	}
	if !p.Sees(rec.Principal) {
		return engine.Record{}, sessionNotFound(id)
	}
	return rec, nil
}

func unixOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Unix()
}

// sessionJSON is the session resource.
func (s *Server) sessionJSON(rec engine.Record) fiber.Map {
	status := "stored"
	var ctxInfo any // the live session's context use (engine.ContextInfo), null when not live
	// Peek, not Live: reading a session (a UI polls the list) is not using it, and must not
	// keep it from the idle sweep.
	if sess, ok := s.eng.Peek(rec.ID); ok {
		status = string(sess.Status())
		// The live copy's title and model, when it is newer than what was read (a lazy
		// session's, not stored yet); a change another process made is newer in the store.
		if live := sess.Record(); live.Version > rec.Version || !sess.Stored() {
			rec.Title, rec.Model = live.Title, live.Model
		}
		ctxInfo = sess.Context()
	}
	if !rec.EndedAt.IsZero() && status == "stored" {
		status = "ended"
	}
	var parent any
	if rec.ParentID != "" {
		parent = rec.ParentID
	}
	usage := fiber.Map{
		"input_tokens": rec.Usage.InputTokens, "output_tokens": rec.Usage.OutputTokens,
		"total_tokens": rec.Usage.InputTokens + rec.Usage.OutputTokens, "api_calls": rec.Usage.APICalls, "tool_calls": rec.Usage.ToolCalls,
	}
	if rec.Usage.CostUSD != 0 { // priced models only (the model catalogue), as the CLI and gateway show it
		usage["cost_usd"] = rec.Usage.CostUSD
	}
	return fiber.Map{
		"id": rec.ID, "object": "hermes.session.record", "title": rec.Title, "source": rec.Source, "model": rec.Model,
		"cwd": rec.Cwd, "parent_id": parent, "parent_kind": rec.ParentKind, "status": status,
		"created_at": rec.CreatedAt.Unix(), "updated_at": rec.UpdatedAt.Unix(), "ended_at": unixOrNil(rec.EndedAt),
		"end_reason": rec.EndReason, "message_count": rec.RowCount, "context": ctxInfo,
		"usage": usage,
	}
}

func (s *Server) sessionEnvelope(rec engine.Record) fiber.Map {
	return fiber.Map{"object": "hermes.session", "session": s.sessionJSON(rec)}
}

func queryBool(c *fiber.Ctx, name string) (bool, error) {
	switch c.Query(name) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, wire.BadRequest(name, "invalid_value", "'"+name+"' must be true, false, 1 or 0")
}

// listSessions: ?limit (default 50, at most 200) &offset &source &include_children. Children
// (sub-agent sessions and compression continuations) are left out unless asked for; branches
// are listed, they are sessions a user made.
func (s *Server) listSessions(c *fiber.Ctx) error {
	limit, err := wire.QueryInt(c, "limit", sessionsDefault)
	if err != nil {
		return err
	}
	limit = min(max(limit, 1), sessionsMax)
	offset, err := wire.QueryInt(c, "offset", 0)
	if err != nil {
		return err
	}
	children, err := queryBool(c, "include_children")
	if err != nil {
		return err
	}
	all, err := s.eng.List(s.ctx, engine.ListOptions{Source: c.Query("source")})
	if err != nil {
		return storeErr(err, "")
	}
	var kept []engine.Record
	for _, rec := range all {
		if !sees(c, rec.Principal) {
			continue
		}
		if !children && (rec.ParentKind == "delegate" || rec.ParentKind == "compression") {
			continue
		}
		kept = append(kept, rec)
	}
	data := []fiber.Map{}
	for i := offset; i < len(kept) && len(data) < limit; i++ {
		data = append(data, s.sessionJSON(kept[i]))
	}
	return c.JSON(fiber.Map{"object": "list", "data": data, "total": len(kept), "limit": limit, "offset": offset, "has_more": offset+len(data) < len(kept)})
}

// fields decodes a JSON object body into its raw members.
func fields(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := wire.DecodeJSON(body, &m); err != nil {
		var ae *wire.Error
		if errors.As(err, &ae) && ae.Code == "invalid_type" {
			return nil, wire.BadRequest("", "invalid_type", "the request body must be a JSON object")
		}
		return nil, err
	}
	if m == nil {
		return nil, wire.BadRequest("", "invalid_type", "the request body must be a JSON object")
	}
	return m, nil
}

// strField reads an optional string member; present reports whether it was there (null
// counts as absent).
func strField(m map[string]json.RawMessage, name, code string) (v string, present bool, err error) {
	raw, ok := m[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false, wire.BadRequest(name, code, "'"+name+"' must be a string")
	}
	return v, true, nil
}

func onlyFields(m map[string]json.RawMessage, allowed ...string) error {
	for k := range m {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return wire.BadRequest(k, "unsupported_session_field", fmt.Sprintf("unsupported field %q (allowed: %s)", k, strings.Join(allowed, ", ")))
		}
	}
	return nil
}

func checkTitle(t string) error {
	if len(t) > maxTitle {
		return wire.BadRequest("title", "invalid_title", fmt.Sprintf("title too long (max %d characters)", maxTitle))
	}
	if wire.HasControl(t) || strings.ContainsFunc(t, func(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }) {
		// Bidirectional controls (U+202E and the like) would let a title print reversed or
		// spill its direction into what a listing shows after it.
		return wire.BadRequest("title", "invalid_title", "title must not contain control characters")
	}
	return nil
}

// titleErr maps a taken title to invalid_title (titles are unique).
func titleErr(err error) error {
	if errors.Is(err, engine.ErrTitleTaken) {
		return wire.BadRequest("title", "invalid_title", err.Error())
	}
	return err
}

// createSession: {id?|session_id?, title?, model?, system_prompt?} → 201. A system prompt
// becomes the first (system) row of the transcript.
func (s *Server) createSession(c *fiber.Ctx) error {
	m, err := fields(c.Body())
	if err != nil {
		return err
	}
	if err := onlyFields(m, "id", "session_id", "title", "model", "system_prompt"); err != nil {
		return err
	}
	id, _, err := strField(m, "id", "invalid_session_id")
	if err != nil {
		return err
	}
	sid, _, err := strField(m, "session_id", "invalid_session_id")
	if err != nil {
		return err
	}
	if id != "" && sid != "" && id != sid {
		return wire.BadRequest("session_id", "invalid_session_id", "'id' and 'session_id' disagree")
	}
	if id == "" {
		id = sid
	}
	if id != "" {
		if err := wire.ValidSessionID(id); err != nil {
			return wire.WithParam(err, "id")
		}
	}
	title, _, err := strField(m, "title", "invalid_title")
	if err != nil {
		return err
	}
	if err := checkTitle(title); err != nil {
		return err
	}
	system, _, err := strField(m, "system_prompt", "invalid_system_prompt")
	if err != nil {
		return err
	}
	if len(system) > maxSystemPrompt {
		return wire.BadRequest("system_prompt", "invalid_system_prompt", fmt.Sprintf("system_prompt too long (max %d bytes)", maxSystemPrompt))
	}
	modelName, present, err := strField(m, "model", "invalid_type")
	if err != nil {
		return err
	}
	if present {
		if modelName, err = s.pickModel(modelName); err != nil {
			return err
		}
	}
	var history []engine.Row
	if strings.TrimSpace(system) != "" {
		history = []engine.Row{{Role: "system", Content: system}}
	}
	sess, err := s.eng.Create(s.ctx, engine.CreateOptions{ID: id, Title: strings.TrimSpace(title), Model: modelName, Source: Surface, Principal: who(c).ID, History: history})
	switch {
	case errors.Is(err, engine.ErrSessionExists):
		return &wire.Error{Status: fiber.StatusConflict, Message: "Session already exists: " + id, Type: "invalid_request_error", Param: "id", Code: "session_exists", NoRetry: true}
	case err != nil:
		return titleErr(err)
	}
	rec, err := s.record(s.ctx, who(c), sess.ID())
	if err != nil {
		return err
	}
	c.Set(HeaderSessionID, rec.ID)
	return c.Status(fiber.StatusCreated).JSON(s.sessionEnvelope(rec))
}

func (s *Server) getSession(c *fiber.Ctx) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	rec, err := s.record(s.ctx, who(c), id)
	if err != nil {
		return err
	}
	return c.JSON(s.sessionEnvelope(rec))
}

// patchSession: {title?, model?, end_reason?}. Everything is validated before anything is
// changed; end_reason ends the session (a running turn is interrupted).
func (s *Server) patchSession(c *fiber.Ctx) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	m, err := fields(c.Body())
	if err != nil {
		return err
	}
	if err := onlyFields(m, "title", "model", "end_reason"); err != nil {
		return err
	}
	title, setTitle, err := strField(m, "title", "invalid_title")
	if err != nil {
		return err
	}
	if err := checkTitle(title); err != nil {
		return err
	}
	modelName, setModel, err := strField(m, "model", "invalid_type")
	if err != nil {
		return err
	}
	if setModel {
		if modelName, err = s.pickModel(modelName); err != nil {
			return err
		}
	}
	reason, end, err := strField(m, "end_reason", "invalid_type")
	if err != nil {
		return err
	}
	if end && (strings.TrimSpace(reason) == "" || len(reason) > 200 || wire.HasControl(reason)) {
		return wire.BadRequest("end_reason", "invalid_value", "end_reason must be a non-empty single line of at most 200 characters")
	}
	if _, err := s.record(s.ctx, who(c), id); err != nil {
		return err
	}
	sess, err := s.eng.Open(s.ctx, id)
	if err != nil {
		return storeErr(err, id)
	}
	if setTitle {
		if err := sess.SetTitle(s.ctx, title); err != nil {
			return titleErr(err)
		}
	}
	if setModel && modelName != "" { // hermes-agent: keep the session's model
		if _, err := sess.SetModel(s.ctx, modelName); err != nil {
			return err
		}
	}
	if end {
		if err := sess.Close(s.ctx, reason); err != nil {
			return storeErr(err, id)
		}
	}
	rec, err := s.record(s.ctx, who(c), id)
	if err != nil {
		return err
	}
	return c.JSON(s.sessionEnvelope(rec))
}

// deleteSession ends the session (interrupting a running turn) and hides it from these routes.
func (s *Server) deleteSession(c *fiber.Ctx) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	rec, err := s.record(s.ctx, who(c), id)
	if err != nil {
		return err
	}
	if err := s.eng.Delete(s.ctx, id); err != nil {
		return storeErr(err, id)
	}
	return c.JSON(fiber.Map{"object": "hermes.session.deleted", "id": rec.ID, "deleted": true})
}

func rowJSON(r engine.Row) fiber.Map {
	m := fiber.Map{"id": r.ID, "object": "hermes.session.message", "role": r.Role, "content": r.Content, "created_at": r.Time.Unix()}
	if r.TurnID != "" {
		m["turn_id"] = r.TurnID
	}
	if r.Reasoning != "" {
		m["reasoning"] = r.Reasoning
	}
	if len(r.ToolCalls) > 0 {
		m["tool_calls"] = r.ToolCalls
	}
	if r.ToolCallID != "" {
		m["tool_call_id"] = r.ToolCallID
	}
	if r.ToolName != "" {
		m["tool_name"] = r.ToolName
	}
	if r.DisplayKind != "" {
		m["display_kind"] = r.DisplayKind
	}
	return m
}

// sessionMessages lists the active transcript: ?after_id (row id) &limit (default 200, at
// most 1000).
func (s *Server) sessionMessages(c *fiber.Ctx) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	after, err := wire.QueryInt(c, "after_id", 0)
	if err != nil {
		return err
	}
	limit, err := wire.QueryInt(c, "limit", messagesDefault)
	if err != nil {
		return err
	}
	limit = min(max(limit, 1), messagesMax)
	if _, err := s.record(s.ctx, who(c), id); err != nil {
		return err
	}
	rows, err := s.eng.History(s.ctx, id, engine.RowQuery{AfterID: uint64(after), Limit: limit + 1})
	if err != nil && !errors.Is(err, engine.ErrSessionNotFound) {
		return storeErr(err, id)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	data := make([]fiber.Map, 0, len(rows))
	for _, r := range rows {
		data = append(data, rowJSON(r))
	}
	body := fiber.Map{"object": "list", "session_id": id, "data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(rows) > 0 {
		body["first_id"], body["last_id"] = rows[0].ID, rows[len(rows)-1].ID
	}
	return c.JSON(body)
}

// forkSession: {id?, title?, upto_row_id?} → 201 with the branch, whose transcript is a copy
// of the parent's (up to and including upto_row_id).
func (s *Server) forkSession(c *fiber.Ctx) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(c.Body())) > 0 {
		if m, err = fields(c.Body()); err != nil {
			return err
		}
	}
	if err := onlyFields(m, "id", "title", "upto_row_id"); err != nil {
		return err
	}
	newID, _, err := strField(m, "id", "invalid_session_id")
	if err != nil {
		return err
	}
	if newID != "" {
		if err := wire.ValidSessionID(newID); err != nil {
			return wire.WithParam(err, "id")
		}
	}
	title, _, err := strField(m, "title", "invalid_title")
	if err != nil {
		return err
	}
	if err := checkTitle(title); err != nil {
		return err
	}
	var upto uint64
	if raw, ok := m["upto_row_id"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &upto) != nil {
			return wire.BadRequest("upto_row_id", "invalid_type", "'upto_row_id' must be a row id (a non-negative integer)")
		}
	}
	if _, err := s.record(s.ctx, who(c), id); err != nil {
		return err
	}
	child, err := s.eng.Branch(s.ctx, id, engine.BranchOptions{ID: newID, UptoRowID: upto, Title: strings.TrimSpace(title), Source: Surface})
	if err != nil {
		return s.forkErr(err, id, newID)
	}
	childID := child.ID()
	rec, err := s.record(s.ctx, who(c), childID)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(s.sessionEnvelope(rec))
}

func (s *Server) forkErr(err error, parent, id string) error {
	switch {
	case errors.Is(err, engine.ErrSessionExists):
		return &wire.Error{Status: fiber.StatusConflict, Message: "Session already exists: " + id, Type: "invalid_request_error", Param: "id", Code: "session_exists", NoRetry: true}
	case errors.Is(err, engine.ErrTitleTaken):
		return titleErr(err)
	case errors.Is(err, engine.ErrStaleRow):
		return wire.BadRequest("upto_row_id", "invalid_value", "upto_row_id is not an active row of session "+parent)
	case errors.Is(err, engine.ErrNothingToBranch):
		return &wire.Error{Status: fiber.StatusConflict, Message: err.Error(), Type: "invalid_request_error", Code: "nothing_to_fork", NoRetry: true}
	}
	return storeErr(err, parent)
}
