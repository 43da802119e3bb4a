package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/internal/textdist"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

type handler func(ctx context.Context, c *client, method string, raw json.RawMessage) (any, error)

var methods map[string]handler

func init() {
	methods = map[string]handler{
		"ping":                 ping,
		"gateway.capabilities": gatewayCapabilities,
		"client.capabilities":  clientCapabilities,
		"session.create":       sessionCreate,
		"session.resume":       sessionResume,
		"session.activate":     sessionActivate,
		"session.active_list":  sessionActiveList,
		"session.list":         sessionList,
		"session.close":        sessionClose,
		"session.interrupt":    sessionInterrupt,
		"session.steer":        sessionSteer,
		"session.history":      sessionHistory,
		"session.compress":     sessionCompress,
		"session.branch":       sessionBranch,
		"session.title":        sessionTitle,
		"session.usage":        sessionUsageM,
		"session.status":       sessionStatus,
		"session.events.since": sessionEventsSince,
		"prompt.submit":        promptSubmit,
		"prompt.background":    promptBackground,
		"clarify.lock":         clarifyLock,
		"request.answer":       requestAnswer,
		"approval.respond":     approvalRespond,
		"config.get":           configGet,
		"config.set":           configSet,
		"model.options":        modelOptions,
		"commands.catalog":     commandsCatalog,
		"command.resolve":      commandResolve,
		"command.dispatch":     commandDispatch,
		"cli.exec":             cliExec,
		"reload.mcp":           reloadMCP,
		"reload.env":           reloadEnv,
		"process.stop":         processStop,
		"process.list":         processList,
		"delegation.status":    delegationStatus,
		"subagent.interrupt":   subagentInterrupt,
		"subagent.steer":       subagentSteer,
		"spawn_tree.save":      spawnTreeSave,
		"spawn_tree.list":      spawnTreeList,
		"spawn_tree.load":      spawnTreeLoad,
		"terminal.resize":      terminalResize,
		"clipboard.paste":      clipboardPaste,
		"image.attach":         imageAttach,

		// context accounting (engine/context.go)
		"session.context_breakdown": sessionContextBreakdown,
	}
}

// sess resolves a runtime session id (4001 when unknown).
func (c *client) sess(rid string) (*live, error) {
	if rid == "" {
		return nil, rpcErr(codeNoSession, "session not found")
	}
	l, ok := c.g.lookup(rid)
	if !ok {
		if who, was := c.g.wasGone(rid); was && c.who.Sees(who) {
			return nil, rpcErr(codeStoredNotFound, "session not found")
		}
	}
	if ok && c.sees(l.s) && c.g.gone(l) {
		// deleted over another surface: gone here too, as for session.resume
		return nil, rpcErr(codeStoredNotFound, "session not found")
	}
	if !ok || !c.sees(l.s) {
		return nil, rpcErr(codeNoSession, "session not found")
	}
	l.mu.Lock()
	l.lastActive = time.Now()
	l.mu.Unlock()
	return l, nil
}

type sessionParams struct {
	common
	SessionID string `json:"session_id"`
}

func (p sessionParams) sessionID() string { return p.SessionID }

// sessionOf decodes params that name only a session and resolves it.
func (c *client) sessionOf(method string, raw json.RawMessage) (*live, error) {
	_, l, err := decodeSession[sessionParams](c, method, raw)
	return l, err
}

// decodeSession decodes params that name a session (sessionParams embedded) and resolves
// it: a decoding error first, then the session's (4001 when unknown).
func decodeSession[T interface{ sessionID() string }](c *client, method string, raw json.RawMessage) (T, *live, error) {
	p, err := decode[T](method, raw)
	if err != nil {
		return p, nil, err
	}
	l, err := c.sess(p.sessionID())
	return p, l, err
}

func ping(context.Context, *client, string, json.RawMessage) (any, error) {
	return map[string]any{"pong": true}, nil
}

func gatewayCapabilities(_ context.Context, _ *client, m string, raw json.RawMessage) (any, error) {
	if _, err := decode[common](m, raw); err != nil {
		return nil, err
	}
	return map[string]any{"per_session_exclusive_submit": true, "server_requests": serverRequestMethods, "replay": true}, nil
}

var serverRequestMethods = []string{"approval", "clarify", "sudo", "secret"}

func clientCapabilities(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		ServerRequests      bool     `json:"server_requests"`
		Confirm             []string `json:"confirm"`
		SessionChangeCursor bool     `json:"session_change_cursor"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	c.serverRequests.Store(p.ServerRequests)
	return map[string]any{"server_requests": serverRequestMethods}, nil
}

// snapshot is a LiveSessionSnapshot (session.resume / session.activate): the session as it is
// wherever it runs, a turn another process runs for it included.
func snapshot(ctx context.Context, l *live, withMessages bool) (map[string]any, error) {
	snap := l.s.LiveSnapshot(ctx)
	out := map[string]any{
		"session_id": l.rid, "stored_session_id": l.s.ID(), "session_key": l.s.ID(),
		"info": liveInfoOf(l, snap), "status": snap.Info.Status, "running": snap.Inflight != nil,
		"open_requests": openRequests(l), "latest_seq": snap.LastSeq,
	}
	if withMessages {
		rows, err := l.s.History(ctx, engine.RowQuery{})
		if err != nil {
			return nil, err
		}
		msgs := transcript(rows)
		out["messages"], out["message_count"] = msgs, len(msgs)
	}
	if in := inflight(snap); in != nil {
		out["inflight"] = in
	}
	if snap.Inflight != nil {
		out["turn_started_at"] = snap.Inflight.Started.Unix()
	}
	if snap.Queued != "" {
		out["queued"] = map[string]any{"user": snap.Queued}
	}
	return out, nil
}

// inflight is the running turn as InflightTurn, or the last turn when it failed (with
// status "error", its error, whether it is recoverable and where it failed); nil when idle.
// Steers delivered during the turn are its corrections, with the offsets in assistant at
// which they arrived.
func inflight(snap engine.Snapshot) map[string]any {
	in := snap.Inflight
	if in == nil {
		in = snap.Failed
	}
	if in == nil {
		return nil
	}
	out := map[string]any{"user": in.Prompt, "assistant": in.Text, "streaming": snap.Inflight != nil}
	if len(in.Corrections) > 0 {
		texts, offsets := make([]string, len(in.Corrections)), make([]int, len(in.Corrections))
		for i, c := range in.Corrections {
			texts[i] = c.Text
			if c.Iteration == in.Iteration {
				offsets[i] = c.Offset // delivered before this call's text: 0
			}
		}
		out["corrections"], out["correction_offsets"] = texts, offsets
	}
	if snap.Inflight == nil {
		surface := errorSurface(in.ExitReason)
		out["status"], out["error"], out["turn_exit_reason"] = "error", in.Error, in.ExitReason
		out["recoverable"], out["error_surface"] = surface["retryable"], surface
	}
	return out
}

// errorSurface says where a failed turn failed: {layer, code, retryable}.
func errorSurface(exitReason string) map[string]any {
	layer, code, retry := "runtime", exitReason, false
	switch {
	case strings.HasPrefix(exitReason, "provider_error"):
		layer, code, retry = "provider", "provider_error", true
	case exitReason == "store_error":
		layer, retry = "storage", true
	case exitReason == "context_exceeded":
		layer = "provider"
	case strings.HasPrefix(exitReason, "max_iterations_reached"):
		code, retry = "max_iterations_reached", true
	case exitReason == "empty_response_exhausted":
		layer, retry = "provider", true
	case exitReason == "unknown":
		code = "model_unavailable"
	}
	return map[string]any{"layer": layer, "code": code, "retryable": retry}
}

func openRequests(l *live) []map[string]any {
	reqs := l.s.OpenRequests()
	out := make([]map[string]any, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, map[string]any{"id": r.ID, "method": r.Kind, "params": requestParams(l, r)})
	}
	return out
}

type seedMessage struct {
	Role        string `json:"role"`
	Content     string `json:"content"`
	Text        string `json:"text"`
	DisplayKind string `json:"display_kind"`
}

func sessionCreate(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		Cols              int           `json:"cols"`
		Source            string        `json:"source"`
		Cwd               string        `json:"cwd"`
		Messages          []seedMessage `json:"messages"`
		Title             string        `json:"title"`
		Model             string        `json:"model"`
		Provider          string        `json:"provider"`
		CloseOnDisconnect bool          `json:"close_on_disconnect"`
		Hidden            bool          `json:"hidden"`
		ReasoningEffort   string        `json:"reasoning_effort"`
		Fast              *bool         `json:"fast"`
		ParentSessionID   string        `json:"parent_session_id"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	name, err := c.g.checkModel(p.Model, p.Provider)
	if err != nil {
		return nil, err
	}
	src := p.Source
	if src == "" {
		src = "tui"
	}
	history := make([]engine.Row, 0, len(p.Messages))
	for i, sm := range p.Messages {
		text := sm.Content
		if text == "" {
			text = sm.Text
		}
		if sm.Role != "user" && sm.Role != "assistant" && sm.Role != "system" {
			return nil, rpcErr(jsonrpc.CodeInvalidParams, "invalid params for session.create: messages[%d].role must be user, assistant or system", i)
		}
		if sm.DisplayKind != "" && sm.DisplayKind != "hidden" {
			return nil, rpcErr(jsonrpc.CodeInvalidParams, "invalid params for session.create: messages[%d].display_kind: only \"hidden\" is accepted", i)
		}
		history = append(history, engine.Row{Role: sm.Role, Content: text, DisplayKind: sm.DisplayKind})
	}
	s, err := c.g.eng.Create(ctx, engine.CreateOptions{Title: strings.TrimSpace(p.Title), Model: name, Cwd: p.Cwd, Source: src, Principal: c.who.ID, History: history})
	if err != nil {
		return nil, err
	}
	l := c.g.register(s)
	l.lazy.Store(len(history) == 0)
	l.mu.Lock()
	if p.Cols > 0 {
		l.cols = p.Cols
	}
	l.closeOnDisconnect = p.CloseOnDisconnect
	l.mu.Unlock()
	c.attach(l, nil)
	rows, err := s.History(ctx, engine.RowQuery{})
	if err != nil {
		return nil, err
	}
	msgs := transcript(rows)
	return map[string]any{"session_id": l.rid, "stored_session_id": s.ID(), "message_count": len(msgs), "messages": msgs, "info": liveInfo(l)}, nil
}

// checkModel validates a requested model/provider pair offline. A provider that lists its
// models refuses names it does not serve, with close suggestions; unknown providers are
// refused with the configured ones; providers without a list accept any name.
func (g *Server) checkModel(modelName, provider string) (string, error) {
	if modelName == "" && provider == "" {
		return "", nil
	}
	name := modelName
	if provider != "" {
		if p, m := model.ParseName(modelName); p != "" && p != provider {
			return "", modelErr(modelName, provider, "model names provider "+p+" but provider is "+provider, nil)
		} else {
			name = provider + ":" + m
		}
	}
	canon, _, err := g.eng.ResolveModel(name)
	var mm *engine.ModelMismatchError
	if errors.As(err, &mm) {
		return "", modelErr(mm.Model, mm.Provider, mm.Mismatch.Error(), mm.Suggestions)
	}
	if err != nil {
		prov, _ := model.ParseName(name)
		return "", modelErr(modelName, prov, err.Error(), suggest(prov, g.eng.Providers()))
	}
	if g.opts.Models != nil {
		prov, m := model.ParseName(canon)
		if known := g.opts.Models(prov); len(known) > 0 && !slices.Contains(known, m) {
			return "", modelErr(m, prov, fmt.Sprintf("provider %s does not serve model %q", prov, m), suggest(m, known))
		}
	}
	return canon, nil
}

func modelErr(m, prov, msg string, sugg []string) error {
	if sugg == nil {
		sugg = []string{}
	}
	if list := strings.Join(sugg, ", "); len(sugg) > 0 && !strings.Contains(msg, list) {
		msg += " (try: " + list + ")" // error.message repeats the suggestions
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg, Data: map[string]any{"model": m, "provider": prov, "suggestions": sugg}}
}

// suggest returns up to five candidates closest to s (shared prefix, then edit distance).
func suggest(s string, candidates []string) []string {
	type scored struct {
		name string
		d    int
	}
	var list []scored
	for _, c := range candidates {
		list = append(list, scored{c, textdist.Levenshtein(strings.ToLower(s), strings.ToLower(c))})
	}
	slices.SortFunc(list, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	out := []string{}
	for i := 0; i < len(list) && i < 5; i++ {
		out = append(out, list[i].name)
	}
	return out
}

func sessionResume(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		SessionID         string `json:"session_id"`
		Cols              int    `json:"cols"`
		Source            string `json:"source"`
		Lazy              bool   `json:"lazy"`
		DeferHistory      bool   `json:"defer_history"`
		OmitMessages      bool   `json:"omit_messages"`
		EagerBuild        bool   `json:"eager_build"`
		CloseOnDisconnect bool   `json:"close_on_disconnect"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		return nil, rpcErr(codeIDRequired, "session_id required")
	}
	id := p.SessionID
	if l, ok := c.g.lookup(id); ok && c.sees(l.s) { // a runtime id of this process: attach
		id = l.s.ID()
	}
	// Another principal's session is not even loaded: it is unknown here.
	var s *engine.Session
	err = engine.ErrSessionNotFound
	if c.seesID(ctx, id) {
		s, err = c.g.eng.Open(ctx, id)
	}
	if errors.Is(err, engine.ErrSessionNotFound) { // an exact title
		list, lerr := c.g.eng.List(ctx, engine.ListOptions{})
		if lerr != nil {
			return nil, lerr
		}
		for _, rec := range list {
			if rec.Title == p.SessionID && c.who.Sees(rec.Principal) {
				s, err = c.g.eng.Open(ctx, rec.ID)
				break
			}
		}
	}
	if err != nil || !c.sees(s) {
		return nil, rpcErr(codeStoredNotFound, "session not found")
	}
	l := c.g.register(s)
	if p.CloseOnDisconnect {
		l.mu.Lock()
		l.closeOnDisconnect = true
		l.mu.Unlock()
	}
	c.attach(l, nil)
	snap, err := snapshot(ctx, l, !p.OmitMessages)
	if err != nil {
		return nil, err
	}
	snap["resumed"] = s.ID()
	return snap, nil
}

func sessionActivate(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Cols         int  `json:"cols"`
		OmitMessages bool `json:"omit_messages"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	c.attach(l, nil)
	return snapshot(ctx, l, !p.OmitMessages)
}

func sessionActiveList(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		CurrentSessionID string `json:"current_session_id"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, l := range c.g.liveList() {
		rec := l.s.Record()
		if !c.who.Sees(rec.Principal) {
			continue
		}
		l.mu.Lock()
		last := l.lastActive
		l.mu.Unlock()
		out = append(out, map[string]any{
			"id": l.rid, "current": l.rid == p.CurrentSessionID, "session_key": rec.ID, "title": rec.Title,
			"model": rec.Model, "status": l.s.Status(), "message_count": rec.RowCount,
			"started_at": rec.CreatedAt.Unix(), "last_active": last.Unix(),
		})
	}
	return map[string]any{"sessions": out}, nil
}

func sessionList(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		Title         string `json:"title"`
		Limit         int    `json:"limit"`
		IncludeHidden bool   `json:"include_hidden"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	list, err := c.g.eng.List(ctx, engine.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, s := range list {
		if s.Source == "delegate" || s.Source == "background" || !c.who.Sees(s.Principal) {
			continue
		}
		if p.Title != "" && s.Title != p.Title {
			continue
		}
		if engine.Untouched(s) && !p.IncludeHidden { // opened and left without a word: no clutter
			continue
		}
		out = append(out, map[string]any{"id": s.ID, "title": s.Title, "started_at": s.CreatedAt.Unix(), "message_count": s.RowCount, "source": s.Source, "model": s.Model})
		if p.Limit > 0 && len(out) >= p.Limit {
			break
		}
	}
	return map[string]any{"sessions": out}, nil
}

func sessionClose(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[sessionParams](m, raw)
	if err != nil {
		return nil, err
	}
	l, ok := c.g.lookup(p.SessionID)
	if !ok || !c.sees(l.s) {
		return map[string]any{"closed": false}, nil
	}
	if err := c.g.closeLive(ctx, l, "tui_close"); err != nil {
		return nil, err
	}
	return map[string]any{"closed": true}, nil
}

func sessionInterrupt(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	_, l, err := decodeSession[struct {
		sessionParams
		ExpectedHostedTaskID string `json:"expected_hosted_task_id"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	if l.s.Interrupt("user") {
		return map[string]any{"status": "interrupted", "interrupted": true}, nil
	}
	return map[string]any{"status": "not_interrupted", "interrupted": false}, nil
}

func sessionSteer(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Text string `json:"text"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Text) == "" {
		return nil, rpcErr(codeInvalidArg, "text is required")
	}
	r, err := l.s.SteerOrHold(p.Text)
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "queued", "text": strings.TrimSpace(p.Text), "steer_id": r.ID}, nil
}

func sessionHistory(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	l, err := c.sessionOf(m, raw)
	if err != nil {
		return nil, err
	}
	rows, err := l.s.History(ctx, engine.RowQuery{})
	if err != nil {
		return nil, err
	}
	msgs := transcript(rows)
	return map[string]any{"count": len(msgs), "messages": msgs}, nil
}

func sessionCompress(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		FocusTopic string `json:"focus_topic"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	r, err := l.s.Compress(ctx, p.FocusTopic)
	if errors.Is(err, engine.ErrBusy) {
		return nil, rpcErr(codeBusy, "session busy — /interrupt the current turn before /compress")
	}
	if err != nil {
		return nil, rpcErr(5005, "compress failed: %v", err)
	}
	rows, err := l.s.History(ctx, engine.RowQuery{})
	if err != nil {
		return nil, err
	}
	status := r.Status
	return map[string]any{
		"status": status, "compressed": status == "compressed", "removed": r.Removed,
		"before_messages": r.Before, "after_messages": r.After,
		"summary": map[string]any{"noop": status != "compressed", "aborted": status == "aborted", "headline": trimText(r.Summary, 200), "note": r.Reason},
		"usage":   sessionUsage(l.s.Record()), "info": liveInfo(l), "messages": transcript(rows),
	}, nil
}

func sessionBranch(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Name  string `json:"name"`
		Count int    `json:"count"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	rows, err := l.s.History(ctx, engine.RowQuery{})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 { // stored at birth, but nothing said yet
		return nil, engine.ErrNothingToBranch
	}
	var upto uint64
	if p.Count > 0 && p.Count < len(rows) {
		upto = rows[p.Count-1].ID
	}
	b, err := c.g.eng.Branch(ctx, l.s.ID(), engine.BranchOptions{UptoRowID: upto, Title: strings.TrimSpace(p.Name), Source: "tui"})
	if err != nil {
		return nil, err
	}
	nl := c.g.register(b)
	c.attach(nl, nil)
	rows, err = b.History(ctx, engine.RowQuery{})
	if err != nil {
		return nil, err
	}
	msgs := transcript(rows)
	return map[string]any{"session_id": nl.rid, "stored_session_id": b.ID(), "title": b.Record().Title, "parent": l.s.ID(), "message_count": len(msgs), "messages": msgs, "info": liveInfo(nl)}, nil
}

func sessionTitle(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Title *string `json:"title"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	if p.Title == nil {
		return map[string]any{"title": l.s.Record().Title, "session_key": l.s.ID()}, nil
	}
	t := strings.TrimSpace(*p.Title)
	if t == "" {
		return nil, rpcErr(codeTitleRequired, "title required")
	}
	if len(t) > 200 || strings.ContainsAny(t, "\n\r\x00") {
		return nil, rpcErr(codeTitleInvalid, "invalid title: at most 200 characters on one line")
	}
	if err := l.s.SetTitle(ctx, t); err != nil {
		return nil, err
	}
	return map[string]any{"title": t, "session_key": l.s.ID(), "pending": !l.s.Stored()}, nil
}

func sessionUsageM(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	l, err := c.sessionOf(m, raw)
	if err != nil {
		return nil, err
	}
	u := sessionUsage(l.s.Record())
	ci := l.s.Context()
	u["context_used"], u["context_max"], u["context_percent"] = ci.Used, ci.Max, ci.Percent
	u["context_estimated"], u["compressions"] = ci.Estimated, ci.Compressions
	return u, nil
}

func statusText(l *live) string {
	rec := l.s.Record()
	snap := l.s.Snapshot()
	var b strings.Builder
	fmt.Fprintf(&b, "Session %s (%s)\n", l.rid, rec.ID)
	if rec.Title != "" {
		fmt.Fprintf(&b, "Title: %s\n", rec.Title)
	}
	fmt.Fprintf(&b, "Model: %s\nCwd: %s\nStatus: %s\n", rec.Model, rec.Cwd, snap.Info.Status)
	fmt.Fprintf(&b, "Usage: %d in / %d out tokens, %d calls, %d tool calls\n", rec.Usage.InputTokens, rec.Usage.OutputTokens, rec.Usage.APICalls, rec.Usage.ToolCalls)
	ci := l.s.Context()
	fmt.Fprintf(&b, "Context: %d of %d tokens (%d%%)", ci.Used, ci.Max, ci.Percent)
	if ci.Compressions > 0 {
		fmt.Fprintf(&b, ", compacted %d time(s)", ci.Compressions)
	}
	b.WriteString("\n")
	if snap.Queued != "" {
		fmt.Fprintf(&b, "Queued: %s\n", trimText(snap.Queued, 80))
	}
	if n := len(snap.OpenRequests); n > 0 {
		fmt.Fprintf(&b, "Waiting on %d request(s)\n", n)
	}
	return b.String()
}

func sessionStatus(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	l, err := c.sessionOf(m, raw)
	if err != nil {
		return nil, err
	}
	ci := l.s.Context()
	out := map[string]any{"output": statusText(l), "status": l.s.Status(), "context_used": ci.Used, "context_max": ci.Max, "context_percent": ci.Percent}
	if st := mcpStatus(l); st != nil {
		out["mcp_servers"] = st
	}
	return out, nil
}

func sessionEventsSince(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		LastSeen   uint64 `json:"last_seen"`
		Generation string `json:"replay_generation"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	since := p.LastSeen
	// A cursor from another journal generation, or past the end, cannot be replayed: send
	// everything retained and say truncated so the client refetches history.
	reset := (p.Generation != "" && p.Generation != l.s.Generation()) || since > l.s.LastSeq()
	if reset {
		since = 0
	}
	evs, ok := l.s.EventsSince(since)
	out := make([]eventParams, 0, len(evs))
	for _, ev := range evs {
		if ev.Type == engine.EvRequestOpen {
			continue // open requests are listed separately
		}
		if ep, ok := render(l, ev); ok {
			out = append(out, ep)
		}
	}
	latest := l.s.LastSeq()
	if n := len(evs); n > 0 {
		latest = evs[n-1].Seq
	}
	// Follow live from here on, so nothing falls between the replay and the stream.
	if !c.attached(l) {
		c.attach(l, &latest)
	}
	res := map[string]any{"events": out, "latest_seq": latest, "truncated": !ok || reset, "count": len(out), "epoch": c.g.epoch,
		"replay_generation": l.s.Generation(), "open_requests": openRequests(l)}
	if in := inflight(l.s.Snapshot()); in != nil {
		res["inflight"] = in
	}
	return res, nil
}
