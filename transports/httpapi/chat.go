package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        wire.FlexBool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage wire.FlexBool `json:"include_usage"`
	} `json:"stream_options"`
	N *int `json:"n"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// flatten reads string-or-parts content; only text parts are understood.
func flatten(raw json.RawMessage, i int) (string, error) {
	param := "messages[" + strconv.Itoa(i) + "].content"
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", wire.BadRequest(param, "invalid_type", "content must be a string or an array of parts")
		}
		return s, nil
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", wire.BadRequest(param, "invalid_type", "content parts must be objects with a type")
		}
		var b strings.Builder
		for _, p := range parts {
			switch p.Type {
			case "text", "input_text", "output_text":
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(p.Text)
			default:
				return "", wire.BadRequest(param, "unsupported_content_type", "content part type "+strconv.Quote(p.Type)+" is not supported (text only)")
			}
		}
		return b.String(), nil
	}
	return "", wire.BadRequest(param, "invalid_type", "content must be a string or an array of parts")
}

// chatTurn is what a chat request resolved to.
type chatTurn struct {
	sess   *engine.Session
	prompt string
	key    string
}

// resolveChat validates the request and maps it onto a session. With X-Hermes-Session-Id the
// stored session's history is used and only the last user message is new; without it the
// session id is derived from the conversation's start, and a new session is seeded with the
// messages before the last one.
func (s *Server) resolveChat(ctx context.Context, c *fiber.Ctx, req *chatRequest) (chatTurn, error) {
	if len(req.Messages) == 0 {
		return chatTurn{}, wire.BadRequest("messages", "missing_messages", "Missing or invalid 'messages' field")
	}
	if req.N != nil && *req.N != 1 {
		return chatTurn{}, wire.BadRequest("n", "unsupported_value", "only n=1 is supported")
	}
	modelName, err := s.pickModel(req.Model)
	if err != nil {
		return chatTurn{}, err
	}
	id := c.Get(HeaderSessionID)
	key := c.Get(HeaderSessionKey)
	if id != "" {
		if err := wire.ValidSessionID(id); err != nil {
			return chatTurn{}, err
		}
	}
	if key != "" {
		if err := wire.ValidSessionKey(key); err != nil {
			return chatTurn{}, err
		}
	}
	var system []string
	var firstUser string
	var rows []engine.Row
	last := -1
	texts := make([]string, len(req.Messages))
	for i, m := range req.Messages {
		t, err := flatten(m.Content, i)
		if err != nil {
			return chatTurn{}, err
		}
		texts[i] = t
		switch m.Role {
		case "system", "developer":
			system = append(system, t)
		case "user":
			if firstUser == "" {
				firstUser = t
			}
			last = i
		case "assistant", "tool", "function":
		default:
			return chatTurn{}, wire.BadRequest("messages["+strconv.Itoa(i)+"].role", "invalid_value", "unknown role "+strconv.Quote(m.Role))
		}
	}
	if last < 0 || last != len(req.Messages)-1 || strings.TrimSpace(texts[last]) == "" {
		return chatTurn{}, wire.BadRequest("messages", "no_user_message", "No user message found in messages (the last message must be a non-empty user message)")
	}
	if id == "" {
		id = derivedSessionID(s.keyOf(c), strings.Join(system, "\n"), firstUser)
	}
	now := time.Now().UTC()
	if len(system) > 0 {
		rows = append(rows, engine.Row{Role: "system", Content: strings.Join(system, "\n"), Time: now})
	}
	for i, m := range req.Messages[:last] {
		// Earlier tool traffic is summarised as text: the model of this session never made
		// those calls, so replaying them as calls would be a lie to the provider.
		switch m.Role {
		case "user":
			rows = append(rows, engine.Row{Role: "user", Content: texts[i], Time: now})
		case "assistant":
			if texts[i] != "" {
				rows = append(rows, engine.Row{Role: "assistant", Content: texts[i], Time: now})
			}
		case "tool", "function":
			if texts[i] != "" {
				rows = append(rows, engine.Row{Role: "user", Content: "[tool result]\n" + texts[i], Time: now})
			}
		}
	}
	sess, err := s.openOrSeed(ctx, who(c), id, modelName, key, rows)
	if err != nil {
		return chatTurn{}, err
	}
	if err := switchModel(ctx, sess, modelName); err != nil {
		return chatTurn{}, err
	}
	return chatTurn{sess: sess, prompt: texts[last], key: key}, nil
}

// keyOf is the API key the request authenticated with.
func (s *Server) keyOf(c *fiber.Ctx) []byte {
	d := principal(c)
	for _, k := range s.keys {
		if k.digest == d {
			return k.secret
		}
	}
	return nil
}

// Session headers.
const (
	HeaderSessionID  = wire.HeaderSessionID
	HeaderSessionKey = wire.HeaderSessionKey
)

// HeaderToolProgress asks a chat-completions stream for tool progress: with "true" the stream
// also carries named hermes.tool.progress events (and SSE comments as keep-alive). Without it
// the stream holds chat.completion.chunk data lines only, which every client parses.
const HeaderToolProgress = "X-Hermes-Tool-Progress"

func (s *Server) chatCompletions(c *fiber.Ctx) error {
	var req chatRequest
	if err := wire.DecodeJSON(c.Body(), &req); err != nil {
		return err
	}
	at, err := s.begin(c)
	if err != nil {
		return err
	}
	k := chunker{id: "chatcmpl-" + wire.NewHex(14), created: time.Now().Unix(),
		usage:    req.StreamOptions != nil && bool(req.StreamOptions.IncludeUsage),
		progress: strings.EqualFold(c.Get(HeaderToolProgress), "true")}
	var run *turnRun
	if at.prev != nil {
		run = at.replayed(c)
		k.id, k.created, k.model = at.prev.ans.id, at.prev.ans.created, at.prev.ans.model
	} else {
		ct, err := s.resolveChat(s.ctx, c, &req)
		if err != nil {
			at.abandon()
			return err
		}
		at.session(c, ct.sess.ID(), ct.key)
		if run, err = s.startOrCommand(c, ct.sess, ct.prompt); err != nil {
			at.abandon()
			return err
		}
		k.model = ct.sess.Record().Model
	}
	if !bool(req.Stream) {
		return s.chatJSON(c, run, k, at)
	}
	return s.streamSSE(c, func(sse *sseWriter) { s.chatStream(sse, run, k, at) })
}

// switchModel moves sess to model m (a resolved provider:model; "" keeps the session's). A
// session busy with another turn keeps its model: the request is refused (409) right after.
func switchModel(ctx context.Context, sess *engine.Session, m string) error {
	if m == "" || sess.Record().Model == m || (sess.Status() != engine.StatusIdle && !sess.Released()) {
		return nil
	}
	_, err := sess.SetModel(ctx, m)
	return err
}

// startOrCommand starts the turn of prompt, or answers a /model command sent as a prompt
// (the engine handles it without a turn) with a finished turn whose text is its answer.
func (s *Server) startOrCommand(c *fiber.Ctx, sess *engine.Session, prompt string) (*turnRun, error) {
	if name, ok := strings.CutPrefix(strings.TrimSpace(prompt), "/model"); ok && (name == "" || name[0] == ' ') {
		adm, err := sess.Submit(s.ctx, engine.Prompt{Text: prompt, Origin: Surface})
		if err != nil {
			return nil, err
		}
		return finishedRun(engine.Outcome{Status: engine.StatusCompleted, Completed: true, Text: adm.Message, ExitReason: "command"}), nil
	}
	return s.startTurn(s.turnCtx(c), sess, prompt)
}

func (s *Server) chatJSON(c *fiber.Ctx, run *turnRun, k chunker, at *attempt) error {
	s.reqs.Add(1)
	defer s.reqs.Done()
	defer run.close("shutdown")
	if err := s.pump(run, nil, nil, nil); err != nil {
		at.abandon()
		return err
	}
	o := run.out
	at.finish(answer{out: o, id: k.id, created: k.created, model: k.model})
	reason, ok := finish(o)
	if !ok && o.Text == "" {
		c.Set("X-Hermes-Completed", "false")
		return writeError(c, turnError(o))
	}
	body := fiber.Map{
		"id": k.id, "object": "chat.completion", "created": k.created, "model": k.model,
		"choices": []fiber.Map{{"index": 0, "message": fiber.Map{"role": "assistant", "content": o.Text, "refusal": nil}, "finish_reason": reason, "logprobs": nil}},
		"usage":   usageJSON(o.Usage),
	}
	if reason != "stop" && reason != "content_filter" { // a refusal is a completed turn
		c.Set("X-Hermes-Completed", "false")
		c.Set("X-Hermes-Partial", strconv.FormatBool(o.Partial || !ok))
		if o.Error != "" {
			c.Set("X-Hermes-Error", headerSafe(o.Error, 200))
		}
		body["hermes"] = fiber.Map{"completed": o.Completed, "partial": o.Partial, "failed": !ok, "error": o.Error, "turn_exit_reason": o.ExitReason}
	}
	return c.JSON(body)
}

// turnError is the error a turn that started and did not complete answers with, before any
// byte of the reply was sent: 409 turn_failed for a failed turn (its prompt is recorded and
// its tools may have run, so it must not be repeated; see replay.go), the 502 of
// wire.OutcomeError for an interrupted one.
func turnError(o engine.Outcome) *wire.Error {
	e := wire.OutcomeError(o)
	if failedTurn(o) {
		e.Status, e.Code = fiber.StatusConflict, "turn_failed"
	}
	return e
}

func usageJSON(u model.Usage) fiber.Map {
	return fiber.Map{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens}
}

// headerSafe clips s to n bytes and drops control characters.
func headerSafe(s string, n int) string {
	b := make([]byte, 0, min(len(s), n))
	for i := 0; i < len(s) && len(b) < n; i++ {
		if s[i] >= 0x20 && s[i] != 0x7f {
			b = append(b, s[i])
		}
	}
	return string(b)
}

// chunker builds chat.completion.chunk objects with a constant id and created.
type chunker struct {
	id       string
	created  int64
	model    string
	usage    bool
	progress bool // hermes.tool.progress events were asked for (HeaderToolProgress)
}

func (k chunker) chunk(delta any, finish any) []byte {
	m := fiber.Map{"id": k.id, "object": "chat.completion.chunk", "created": k.created, "model": k.model,
		"choices": []fiber.Map{{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
	if k.usage {
		m["usage"] = nil
	}
	b, _ := json.Marshal(m)
	return b
}

// toolEmoji is the icon hermes.tool.progress carries for well-known tools.
var toolEmoji = map[string]string{
	"terminal": "💻", "read_file": "📖", "write_file": "✍️", "patch": "🔧", "search_files": "🔎",
	"clarify": "❓", "delegate_task": "🔀", "process": "⚙️",
}

// toolLabel previews a call for a progress line: the command for terminal-like tools,
// otherwise the path or the raw arguments, clipped.
func toolLabel(args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) == nil {
		for _, k := range []string{"command", "path", "pattern", "query", "goal"} {
			if v, ok := m[k].(string); ok {
				return headerSafe(v, 120)
			}
		}
	}
	return headerSafe(string(args), 120)
}

// chatStream writes the canonical chunk sequence: a role chunk, content deltas (reasoning as
// reasoning_content in deltas without content), one finish chunk, the usage chunk when asked,
// then [DONE]. Nothing else is on the line unless the client asked for tool progress
// (HeaderToolProgress): then named hermes.tool.progress events, and SSE comments as keep-alive.
// Otherwise a quiet turn is kept alive with an empty content delta, because go-openai reads a
// comment or a named event as the start of an error body. A turn that fails after the 200 ends
// with an in-band error event instead. A write error, or a connection the client closed
// (sseWriter.gone), means the client left: the turn is interrupted.
func (s *Server) chatStream(sse *sseWriter, run *turnRun, k chunker, at *attempt) {
	reason := "client disconnected"
	defer func() {
		run.close(reason)
		at.finish(answer{out: s.outcomeOf(run), id: k.id, created: k.created, model: k.model})
	}()
	sse.data(k.chunk(fiber.Map{"role": "assistant", "content": ""}, nil))
	if sse.Flush() != nil {
		return
	}
	running := map[string]bool{}
	var text strings.Builder
	err := s.pump(run, sse, func(ev engine.Event) bool {
		switch ev.Type {
		case engine.EvMessageDelta:
			if ev.Text != "" {
				text.WriteString(ev.Text)
				sse.data(k.chunk(fiber.Map{"content": ev.Text}, nil))
			}
		case engine.EvReasoningDelta:
			if ev.Text != "" {
				sse.data(k.chunk(fiber.Map{"reasoning_content": ev.Text}, nil))
			}
		case engine.EvToolStart:
			if ts, ok := ev.Data.(engine.ToolStart); ok && k.progress && !strings.HasPrefix(ts.Name, "_") {
				running[ts.CallID] = true
				sse.event("hermes.tool.progress", fiber.Map{"choices": []any{}, "tool": ts.Name, "emoji": emoji(ts.Name), "label": toolLabel(ts.Args), "toolCallId": ts.CallID, "status": "running"})
			}
		case engine.EvToolComplete:
			if tc, ok := ev.Data.(engine.ToolComplete); ok && running[tc.CallID] {
				delete(running, tc.CallID)
				m := fiber.Map{"choices": []any{}, "tool": tc.Name, "emoji": emoji(tc.Name), "toolCallId": tc.CallID, "status": "completed"}
				if tc.Blocked {
					m["blocked"] = true // denied or hard-blocked: it never ran
				}
				sse.event("hermes.tool.progress", m)
			}
		case engine.EvStatus:
			name, fields, ok := wire.CompactionEvent(ev, run.sess)
			if !ok || !k.progress {
				return false
			}
			sse.event("hermes.status", fiber.Map{"choices": []any{}, "kind": strings.TrimPrefix(name, "run."), "text": fields["text"]})
		default:
			return false
		}
		return true
	}, func() {
		if k.progress {
			sse.comment("keepalive")
		} else {
			sse.data(k.chunk(fiber.Map{"content": ""}, nil))
		}
	})
	if errors.Is(err, errClientGone) {
		return
	}
	if err != nil {
		reason = "shutdown"
		sse.error(wire.Classify(err))
		_ = sse.Flush()
		return
	}
	// The turn is over: give its slot back before the client sees the end.
	run.close(reason)
	if rest, ok := strings.CutPrefix(run.out.Text, text.String()); ok && rest != "" {
		// Deltas lost to a lagging subscription, or a finished turn (a replay, a command):
		// send what is missing.
		sse.data(k.chunk(fiber.Map{"content": rest}, nil))
	}
	fr, ok := finish(run.out)
	if !ok {
		sse.error(wire.OutcomeError(run.out))
		_ = sse.Flush()
		return
	}
	sse.data(k.chunk(fiber.Map{}, fr))
	if k.usage {
		b, _ := json.Marshal(fiber.Map{"id": k.id, "object": "chat.completion.chunk", "created": k.created, "model": k.model, "choices": []any{}, "usage": usageJSON(run.out.Usage)})
		sse.data(b)
	}
	sse.data([]byte("[DONE]"))
	_ = sse.Flush()
}

func emoji(tool string) string {
	if e, ok := toolEmoji[tool]; ok {
		return e
	}
	return "🛠️"
}
