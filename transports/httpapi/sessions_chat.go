package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// sessionChatInput is a parsed session chat body.
type sessionChatInput struct {
	prompt string
	system string // system_message / instructions: a system row added before the turn
}

// parseSessionChat reads {input | message, system_message? | instructions?}. input is a
// string, an array of content parts, or an array of messages whose last user message is the
// prompt; message is a string, a {role, content} object or an array of parts.
func parseSessionChat(body []byte) (sessionChatInput, error) {
	var in sessionChatInput
	m, err := fields(body)
	if err != nil {
		return in, err
	}
	var raw json.RawMessage
	param := ""
	for _, k := range []string{"input", "message"} {
		if v, ok := m[k]; ok && string(bytes.TrimSpace(v)) != "null" {
			raw, param = v, k
			break
		}
	}
	if raw == nil {
		return in, wire.BadRequest("input", "missing_input", "Missing 'input' field (a string, content parts or messages)")
	}
	if in.prompt, err = userText(raw, param); err != nil {
		return in, err
	}
	if strings.TrimSpace(in.prompt) == "" {
		return in, wire.BadRequest(param, "no_user_message", "No user message found in '"+param+"'")
	}
	for _, k := range []string{"system_message", "instructions"} {
		v, present, err := strField(m, k, "invalid_system_message")
		if err != nil {
			return in, err
		}
		if present && in.system == "" {
			in.system = v
		}
	}
	if len(in.system) > maxSystemPrompt {
		return in, wire.BadRequest("system_message", "invalid_system_message", "system_message too long")
	}
	return in, nil
}

// userText flattens one input value to the prompt text.
func userText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	bad := wire.BadRequest(param, "invalid_type", "'"+param+"' must be a string, an array of content parts or an array of messages")
	switch {
	case len(raw) == 0:
		return "", bad
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", bad
		}
		return s, nil
	case raw[0] == '{':
		var msg struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &msg) != nil || (msg.Role != "" && msg.Role != "user") {
			return "", wire.BadRequest(param, "invalid_type", "'"+param+"' must be a user message {role:\"user\", content}")
		}
		return flattenAs(msg.Content, param+".content")
	case raw[0] == '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return "", bad
		}
		// Messages carry a role; parts carry a type. A message array's last user message
		// is the prompt (earlier ones are already in the session).
		var probe []struct {
			Role *string `json:"role"`
		}
		if json.Unmarshal(raw, &probe) == nil && len(probe) > 0 && probe[0].Role != nil {
			for i := len(items) - 1; i >= 0; i-- {
				var msg struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				}
				if json.Unmarshal(items[i], &msg) != nil {
					return "", bad
				}
				if msg.Role == "user" {
					return flattenAs(msg.Content, param+"["+strconv.Itoa(i)+"].content")
				}
			}
			return "", wire.BadRequest(param, "no_user_message", "No user message found in '"+param+"'")
		}
		return flattenAs(raw, param)
	}
	return "", bad
}

// flattenAs is flatten with the error naming param.
func flattenAs(raw json.RawMessage, param string) (string, error) {
	s, err := flatten(raw, 0)
	return s, wire.WithParam(err, param)
}

// sessionTurn validates a session chat request and starts its turn.
func (s *Server) sessionTurn(c *fiber.Ctx) (*turnRun, sessionChatInput, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, sessionChatInput{}, err
	}
	in, err := parseSessionChat(c.Body())
	if err != nil {
		return nil, in, err
	}
	if _, err := s.record(s.ctx, who(c), id); err != nil {
		return nil, in, err
	}
	sess, err := s.eng.Open(s.ctx, id)
	if err != nil {
		return nil, in, storeErr(err, id)
	}
	// The turn's slot is taken before anything is written, so a request refused for want of
	// one leaves no row behind.
	if err := s.takeSlot(); err != nil {
		return nil, in, err
	}
	if strings.TrimSpace(in.system) != "" {
		// The engine has one system prompt per engine; per-turn instructions become a system
		// message in the transcript, just before this turn's prompt. A busy session is refused
		// first, so a refused request leaves no row behind.
		if sess.Status() != engine.StatusIdle {
			s.release()
			return nil, in, &wire.Error{Status: fiber.StatusConflict, Message: "session " + id + " is busy with another turn", Type: "invalid_request_error", Code: "session_busy", NoRetry: true}
		}
		if err := sess.Append(s.ctx, engine.Row{Role: "system", Content: in.system}); err != nil {
			s.release()
			if errors.Is(err, engine.ErrBusy) { // a turn started since the check above
				return nil, in, &wire.Error{Status: fiber.StatusConflict, Message: "session " + id + " is busy with another turn", Type: "invalid_request_error", Code: "session_busy", NoRetry: true}
			}
			return nil, in, storeErr(err, id)
		}
	}
	c.Set(HeaderSessionID, id)
	if k := c.Get(HeaderSessionKey); k != "" {
		c.Set(HeaderSessionKey, k)
	}
	run, err := s.startTurnHeld(s.turnCtx(c), sess, in.prompt)
	if err != nil {
		return nil, in, err
	}
	return run, in, nil
}

// turnMessages is this turn's transcript as stored (the user row, tool traffic, the answer).
func (s *Server) turnMessages(run *turnRun) []fiber.Map {
	rows, err := run.sess.History(s.ctx, engine.RowQuery{Tail: true, Limit: 500})
	out := []fiber.Map{}
	if err != nil {
		return out
	}
	for _, r := range rows {
		if r.TurnID == run.turnID {
			out = append(out, rowJSON(r))
		}
	}
	return out
}

func sessionUsage(o engine.Outcome) fiber.Map {
	return fiber.Map{"input_tokens": o.Usage.PromptTokens, "output_tokens": o.Usage.CompletionTokens, "total_tokens": o.Usage.TotalTokens}
}

// sessionChat runs one turn and answers when it is over.
func (s *Server) sessionChat(c *fiber.Ctx) error {
	run, _, err := s.sessionTurn(c)
	if err != nil {
		return err
	}
	s.reqs.Add(1)
	defer s.reqs.Done()
	defer run.close("shutdown")
	if err := s.pump(run, nil, nil, nil); err != nil {
		return err
	}
	run.close("")
	o := run.out
	if _, ok := finish(o); !ok && o.Text == "" {
		return wire.OutcomeError(o)
	}
	runID := "run_" + wire.NewHex(16)
	body := fiber.Map{
		"object": "hermes.session.chat.completion", "id": runID, "run_id": runID, "session_id": run.sess.ID(), "turn_id": run.turnID,
		"status": o.Status, "message": fiber.Map{"id": "msg_" + wire.NewHex(12), "role": "assistant", "content": o.Text},
		"completed": o.Completed, "partial": o.Partial, "interrupted": o.Interrupted,
		"usage": sessionUsage(o), "messages": s.turnMessages(run),
	}
	if o.ExitReason != "" {
		body["turn_exit_reason"] = o.ExitReason
	}
	if o.Error != "" {
		body["error"] = fiber.Map{"message": o.Error, "type": "server_error"}
	}
	if o.PendingSteer != "" {
		body["pending_steer"] = o.PendingSteer
	}
	return c.JSON(body)
}

// sessionStream frames the named events of a session chat stream: every payload carries
// session_id, run_id, seq (1, 2, ...) and ts.
type sessionStream struct {
	sse       *sseWriter
	sessionID string
	runID     string
	seq       int
}

func (st *sessionStream) emit(name string, m fiber.Map) {
	st.seq++
	m["session_id"], m["run_id"], m["seq"], m["ts"] = st.sessionID, st.runID, st.seq, float64(time.Now().UnixMilli())/1000
	st.sse.event(name, m)
}

// sessionChatStream runs one turn as named SSE events (run.started, message.started,
// assistant.delta, tool.*, assistant.completed, then run.completed / run.failed /
// run.cancelled, or error, and done). A client that leaves interrupts the turn.
func (s *Server) sessionChatStream(c *fiber.Ctx) error {
	run, in, err := s.sessionTurn(c)
	if err != nil {
		return err
	}
	return s.streamSSE(c, func(sse *sseWriter) { s.streamSessionTurn(sse, run, in.prompt) })
}

func (s *Server) streamSessionTurn(sse *sseWriter, run *turnRun, prompt string) {
	st := &sessionStream{sse: sse, sessionID: run.sess.ID(), runID: "run_" + wire.NewHex(16)}
	reason := "client disconnected"
	defer func() { run.close(reason) }()
	msgID := "msg_" + wire.NewHex(12)
	st.emit("run.started", fiber.Map{"user_message": fiber.Map{"role": "user", "content": prompt}})
	st.emit("message.started", fiber.Map{"message": fiber.Map{"id": msgID, "role": "assistant"}})
	if st.sse.Flush() != nil {
		return
	}
	err := s.pump(run, st.sse, func(ev engine.Event) bool {
		switch ev.Type {
		case engine.EvMessageDelta:
			if ev.Text == "" {
				return false
			}
			st.emit("assistant.delta", fiber.Map{"message_id": msgID, "delta": ev.Text})
		case engine.EvReasoningDelta:
			if ev.Text == "" {
				return false
			}
			st.emit("tool.progress", fiber.Map{"message_id": msgID, "tool_name": "_thinking", "delta": ev.Text})
		case engine.EvToolStart:
			ts, ok := ev.Data.(engine.ToolStart)
			if !ok {
				return false
			}
			st.emit("tool.started", fiber.Map{"message_id": msgID, "tool_name": ts.Name, "tool_call_id": ts.CallID, "preview": toolLabel(ts.Args), "args": argsObject(ts.Args)})
		case engine.EvToolComplete:
			tc, ok := ev.Data.(engine.ToolComplete)
			if !ok {
				return false
			}
			name := "tool.completed"
			if tc.Result.IsError || tc.Blocked {
				name = "tool.failed"
			}
			st.emit(name, fiber.Map{"message_id": msgID, "tool_name": tc.Name, "tool_call_id": tc.CallID, "preview": toolLabel(tc.Args), "args": argsObject(tc.Args),
				"result": clipText(tc.Result.Content, 500), "duration": float64(tc.Duration.Milliseconds()) / 1000, "blocked": tc.Blocked})
		default:
			return false
		}
		return true
	}, func() { st.sse.comment("keepalive") })
	if errors.Is(err, errClientGone) {
		return
	}
	if err != nil {
		reason = "shutdown"
		st.emit("error", fiber.Map{"message": wire.Classify(err).Message})
		st.emit("done", fiber.Map{})
		_ = st.sse.Flush()
		return
	}
	run.close("")
	o := run.out
	st.emit("assistant.completed", fiber.Map{"message_id": msgID, "content": o.Text, "completed": o.Completed, "partial": o.Partial, "interrupted": o.Interrupted})
	term := fiber.Map{"message_id": msgID, "completed": o.Completed, "partial": o.Partial, "interrupted": o.Interrupted, "messages": s.turnMessages(run), "usage": sessionUsage(o)}
	if o.ExitReason != "" {
		term["turn_exit_reason"] = o.ExitReason
	}
	if o.PendingSteer != "" {
		term["pending_steer"] = o.PendingSteer
	}
	name := "run.completed"
	switch {
	case o.Status == engine.StatusCancelled || o.Interrupted:
		name = "run.cancelled"
	case o.Status != engine.StatusCompleted || !o.Completed || o.Partial:
		name = "run.failed"
		msg := o.Error
		if msg == "" {
			msg = "the agent did not complete the turn (" + o.ExitReason + ")"
		}
		term["error"] = msg
	}
	st.emit(name, term)
	st.emit("done", fiber.Map{})
	_ = st.sse.Flush()
}

// argsObject passes tool arguments through as JSON when they are an object.
func argsObject(raw json.RawMessage) any {
	if len(raw) > 0 && json.Valid(raw) && bytes.TrimSpace(raw)[0] == '{' {
		return raw
	}
	return fiber.Map{}
}

// clipText clips s to n bytes on a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
