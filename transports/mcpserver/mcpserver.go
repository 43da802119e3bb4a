// Package mcpserver serves a Hermes engine as a Model Context Protocol server, so another
// agent or editor can drive Hermes sessions as tools: create_session, prompt, list_sessions
// and get_history.
//
// A prompt call submits the text and waits for the turn to end, returning the answer and the
// outcome status. MCP has no channel for the engine's server-to-client requests, so nothing
// can answer them during such a turn: an approval request is denied (a call the approval
// policy allows outright still runs; one it would ask about does not), and clarify, sudo and
// secret requests are withdrawn. The model sees those refusals like any other.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/propagation"

	"github.com/hermes-go/hermes/engine"
)

// Source is the session source recorded for sessions created over MCP.
const Source = "mcp"

// Options configure the server.
type Options struct {
	Version string       // reported to clients
	Logger  *slog.Logger // nil discards
}

// Server is the MCP face of one engine. Its handlers run on the MCP library's goroutines; the
// goroutine a prompt starts to refuse requests is waited for before the call returns.
type Server struct {
	eng *engine.Engine
	log *slog.Logger
	mcp *server.MCPServer
}

// New builds the MCP server for eng.
func New(eng *engine.Engine, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{eng: eng, log: o.Logger}
	ms := server.NewMCPServer("hermes", o.Version, server.WithToolCapabilities(false), server.WithRecovery(),
		server.WithToolHandlerMiddleware(continueTrace))
	ms.AddTool(mcp.NewTool("create_session",
		mcp.WithDescription("Create a Hermes agent session. Returns its session_id for prompt and get_history."),
		mcp.WithString("model", mcp.Description("provider:model; the configured default when empty")),
		mcp.WithString("cwd", mcp.Description("working directory of the session's tools; the server's default when empty")),
		mcp.WithString("title", mcp.Description("optional title")),
	), s.createSession)
	ms.AddTool(mcp.NewTool("prompt",
		mcp.WithDescription("Send a prompt to a session and wait for the agent's turn to finish. Returns the answer text; "+
			"the structured result carries the outcome status (completed, failed, cancelled). Approvals the policy does not "+
			"allow are denied, since no one can answer them over MCP."),
		mcp.WithString("session_id", mcp.Required()),
		mcp.WithString("text", mcp.Required()),
	), s.prompt)
	ms.AddTool(mcp.NewTool("list_sessions",
		mcp.WithDescription("List stored sessions, newest first."),
		mcp.WithNumber("limit", mcp.Description("at most this many (default 20)")),
	), s.listSessions)
	ms.AddTool(mcp.NewTool("get_history",
		mcp.WithDescription("The transcript of a session: its active rows in order."),
		mcp.WithString("session_id", mcp.Required()),
		mcp.WithNumber("limit", mcp.Description("only the last this many rows (default all)")),
	), s.getHistory)
	s.mcp = ms
	return s
}

// ServeStdio serves newline-delimited JSON-RPC on in/out until in ends or ctx is done.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	// mcp-go reads what the guard passes on; what it refuses, the guard answers itself.
	w := &frameWriter{w: out}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(guard(in, pw, w, maxFrame)) }() // ends with in, or once pr is closed
	err := server.NewStdioServer(s.mcp).Listen(ctx, pr, w)
	pr.Close()
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// HTTPHandler serves the streamable HTTP transport. A request's traceparent header is the
// parent of its tool call's spans unless the call's _meta names another.
func (s *Server) HTTPHandler() http.Handler {
	return server.NewStreamableHTTPServer(s.mcp, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}))
}

// continueTrace runs a tool call in the W3C trace context its params._meta carries
// (traceparent, tracestate), so the turn a prompt starts is a child of the caller's span.
// Without one, or with an invalid one, the call keeps its context.
func continueTrace(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if m := req.Params.Meta; m != nil {
			if tp, _ := m.AdditionalFields["traceparent"].(string); tp != "" {
				ts, _ := m.AdditionalFields["tracestate"].(string)
				ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
			}
		}
		return next(ctx, req)
	}
}

func toolError(format string, a ...any) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf(format, a...))
}

func jsonResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultStructured(v, string(b)), nil
}

func (s *Server) createSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var model, cwd, title string
	for name, dst := range map[string]*string{"model": &model, "cwd": &cwd, "title": &title} {
		v, err := optString(req, name)
		if err != nil {
			return toolError("create_session: %v", err), nil
		}
		*dst = v
	}
	sess, err := s.eng.Create(ctx, engine.CreateOptions{Model: model, Cwd: cwd, Title: title, Source: Source})
	if err != nil {
		return toolError("create_session: %v", err), nil
	}
	rec := sess.Record()
	return jsonResult(map[string]any{"session_id": rec.ID, "model": rec.Model, "cwd": rec.Cwd})
}

// PromptResult is the structured result of the prompt tool.
type PromptResult struct {
	SessionID  string `json:"session_id"`
	TurnID     string `json:"turn_id,omitempty"`
	Status     string `json:"status"` // completed | failed | cancelled, or the admission status
	ExitReason string `json:"exit_reason,omitempty"`
	Text       string `json:"text"`
	Error      string `json:"error,omitempty"`
	Refused    int    `json:"refused_requests,omitempty"` // approvals denied and questions withdrawn
}

func (s *Server) prompt(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, err := req.RequireString("session_id")
	if err != nil {
		return toolError("%v", err), nil
	}
	text, err := req.RequireString("text")
	if err != nil {
		return toolError("%v", err), nil
	}
	sess, err := s.eng.Open(ctx, id)
	if err != nil {
		return toolError("prompt: %v", err), nil
	}
	adm, f, err := sess.Run(ctx, engine.Prompt{Text: text, Origin: Source})
	if err != nil {
		return toolError("prompt: %v", err), nil
	}
	defer f.Close()
	res := PromptResult{SessionID: id, TurnID: adm.TurnID, Status: adm.Status}
	// The busy policy interrupted the running turn for this prompt, which runs next: this call
	// waits for it as for a turn it started (the interrupted prompt's call answers cancelled).
	runsNext := adm.Status == engine.AdmitQueued && adm.Interrupted
	if adm.Status != engine.AdmitStarted && !runsNext {
		// Queued behind, or steered into, a running turn; rejected; or a command. There is no
		// turn of this call's own to wait for: report the admission and return.
		res.Text = adm.Message
		if adm.Message == "" {
			res.Text = "the session is busy; the prompt was " + adm.Status + " (read the result later with get_history)"
		}
		r, err := jsonResult(res)
		if r != nil {
			r.Content = []mcp.Content{mcp.NewTextContent(fmt.Sprintf("[%s] %s", adm.Status, res.Text))}
			r.IsError = adm.Status == engine.AdmitRejected
		}
		return r, err
	}
	for ev, err := range f.Events(ctx) {
		if err != nil {
			if ctx.Err() != nil {
				// The client cancelled the call or went away: nobody will read this turn's answer.
				f.Interrupt("the MCP client cancelled the prompt")
			}
			return toolError("prompt: waiting for the turn: %v", err), nil
		}
		if r, ok := ev.Data.(engine.Request); ok && s.refuse(sess, r) {
			res.Refused++
		}
	}
	out, _ := f.Outcome()
	res.TurnID = firstNonEmpty(out.TurnID, res.TurnID)
	res.Status, res.ExitReason, res.Text, res.Error = out.Status, out.ExitReason, out.Text, out.Error
	answer := out.Text
	if out.Status != engine.StatusCompleted {
		answer = fmt.Sprintf("[%s: %s] %s", out.Status, firstNonEmpty(out.Error, out.ExitReason), out.Text)
	}
	r := mcp.NewToolResultStructured(res, answer)
	r.IsError = out.Status == engine.StatusFailed
	return r, nil
}

// refuse answers a request the session opens while a prompt call waits: an approval is
// denied, another question withdrawn. It reports whether it did.
func (s *Server) refuse(sess *engine.Session, r engine.Request) bool {
	var err error
	if r.Kind == engine.KindApproval {
		err = sess.Answer(r.ID, map[string]any{"choice": "deny"})
	} else {
		err = sess.Withdraw(r.ID, "no interactive client over MCP")
	}
	if err != nil {
		s.log.Warn("mcp: could not refuse a request", "session", sess.ID(), "request", r.ID, "err", err)
		return false
	}
	return true
}

func firstNonEmpty(a ...string) string {
	for _, s := range a {
		if s != "" {
			return s
		}
	}
	return ""
}

// SessionSummary is one entry of list_sessions.
type SessionSummary struct {
	ID        string `json:"session_id"`
	Title     string `json:"title,omitempty"`
	Model     string `json:"model,omitempty"`
	Source    string `json:"source,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	Rows      int64  `json:"rows"`
	UpdatedAt string `json:"updated_at"`
}

func (s *Server) listSessions(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	limit, err := optCount(req, "limit")
	if err != nil {
		return toolError("list_sessions: %v", err), nil
	}
	if limit == 0 {
		limit = 20
	}
	list, err := s.eng.List(ctx, engine.ListOptions{Limit: limit})
	if err != nil {
		return toolError("list_sessions: %v", err), nil
	}
	out := make([]SessionSummary, 0, len(list))
	for _, r := range list {
		out = append(out, SessionSummary{ID: r.ID, Title: r.Title, Model: r.Model, Source: r.Source, Cwd: r.Cwd, Rows: r.RowCount, UpdatedAt: r.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z")})
	}
	return jsonResult(map[string]any{"sessions": out})
}

// HistoryRow is one transcript entry of get_history.
type HistoryRow struct {
	ID         uint64          `json:"id"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolName   string          `json:"tool_name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	Time       string          `json:"time"`
}

func (s *Server) getHistory(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, err := req.RequireString("session_id")
	if err != nil {
		return toolError("%v", err), nil
	}
	limit, err := optCount(req, "limit")
	if err != nil {
		return toolError("get_history: %v", err), nil
	}
	sess, err := s.eng.Open(ctx, id)
	if err != nil {
		return toolError("get_history: %v", err), nil
	}
	rows, err := sess.History(ctx, engine.RowQuery{})
	if err != nil {
		return toolError("get_history: %v", err), nil
	}
	if limit > 0 && len(rows) > limit {
		rows = rows[len(rows)-limit:]
	}
	out := make([]HistoryRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, HistoryRow{ID: r.ID, Role: r.Role, Content: r.Content, ToolName: r.ToolName, ToolCallID: r.ToolCallID, ToolCalls: r.ToolCalls, Time: r.Time.UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	return jsonResult(map[string]any{"session_id": id, "rows": out})
}

// optString is an optional string argument: "" when absent or null; a value of another type is
// an error naming the argument (not silently the default).
func optString(req mcp.CallToolRequest, name string) (string, error) {
	switch v := req.GetArguments()[name].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	default:
		return "", fmt.Errorf("%s must be a string, not %T", name, v)
	}
}

// optCount is an optional non-negative integer argument: 0 when absent or null; a fraction, a
// negative number or another type is an error naming the argument.
func optCount(req mcp.CallToolRequest, name string) (int, error) {
	switch v := req.GetArguments()[name].(type) {
	case nil:
		return 0, nil
	case float64:
		if v >= 0 && v == math.Trunc(v) && v <= math.MaxInt32 {
			return int(v), nil
		}
	case int:
		if v >= 0 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%s must be a non-negative integer, got %v", name, req.GetArguments()[name])
}
