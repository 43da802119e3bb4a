package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

func configGet(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		SessionID string `json:"session_id"`
		Key       string `json:"key"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	switch p.Key {
	case "busy":
		mode := policy.Interrupt
		if c.g.opts.BusyMode != nil {
			mode = c.g.opts.BusyMode()
		}
		return map[string]any{"key": "busy", "value": mode}, nil
	case "model":
		if p.SessionID != "" {
			l, err := c.sess(p.SessionID)
			if err != nil {
				return nil, err
			}
			return map[string]any{"key": "model", "value": l.s.Record().Model}, nil
		}
		return map[string]any{"key": "model", "value": c.g.eng.DefaultModel()}, nil
	case "cols":
		l, err := c.sess(p.SessionID)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return map[string]any{"key": "cols", "value": l.cols}, nil
	case "", "all":
		mode := policy.Interrupt
		if c.g.opts.BusyMode != nil {
			mode = c.g.opts.BusyMode()
		}
		return map[string]any{"busy": mode, "model": c.g.eng.DefaultModel(), "providers": c.g.eng.Providers(), "version": c.g.opts.Version}, nil
	}
	return nil, rpcErr(codeInvalidArg, "unknown config key %q (known: busy, model, cols)", p.Key)
}

func configSet(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		SessionID string          `json:"session_id"`
		Key       string          `json:"key"`
		Value     json.RawMessage `json:"value"`
		Scope     string          `json:"scope"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	var val string
	if err := json.Unmarshal(p.Value, &val); err != nil {
		return nil, rpcErr(codeInvalidArg, "value must be a string")
	}
	switch p.Key {
	case "busy":
		if val == "" || val == "status" {
			return configGet(ctx, c, "config.get", json.RawMessage(`{"key":"busy"}`))
		}
		if val != policy.Interrupt && val != policy.Queue && val != policy.Steer {
			return nil, rpcErr(codeInvalidArg, "unknown busy mode %q (interrupt, queue or steer)", val)
		}
		if !c.operator() {
			return nil, rpcErr(codeInvalidArg, "the busy mode is process-wide; this API key may not change it")
		}
		if c.g.opts.SetBusyMode == nil {
			return nil, rpcErr(codeInvalidArg, "the busy mode is set by the policy script here")
		}
		if err := c.g.opts.SetBusyMode(val); err != nil {
			return nil, rpcErr(codeInvalidArg, "%v", err)
		}
		return map[string]any{"key": "busy", "value": val}, nil
	case "model":
		l, err := c.sess(p.SessionID)
		if err != nil {
			return nil, err
		}
		if l.s.Snapshot().Inflight != nil {
			return nil, rpcErr(codeBusy, "session busy — the model changes between turns")
		}
		name, err := c.g.checkModel(val, "")
		if err != nil {
			return nil, err
		}
		got, err := l.s.SetModel(ctx, name)
		if err != nil {
			return nil, err
		}
		return map[string]any{"key": "model", "value": got, "info": liveInfo(l)}, nil
	}
	return nil, rpcErr(codeInvalidArg, "unknown config key %q (settable: busy, model)", p.Key)
}

// slash commands the gateway understands.
var slashCommands = []map[string]any{
	{"name": "model", "description": "show or switch the model: /model provider:model", "args": "[provider:model]"},
	{"name": "title", "description": "show or set the session title", "args": "[title]"},
	{"name": "compress", "description": "summarise older turns to free context", "args": "[focus]"},
	{"name": "steer", "description": "guide the running turn without interrupting it", "args": "<text>"},
	{"name": "queue", "description": "queue a prompt for after the current turn", "args": "<text>"},
	{"name": "retry", "description": "resend the last prompt (drops the last answer)", "args": ""},
	{"name": "undo", "description": "remove the last exchange and return its prompt for editing", "args": ""},
	{"name": "branch", "description": "fork this session into a new one", "args": "[name]"},
	{"name": "status", "description": "show session status", "args": ""},
	{"name": "usage", "description": "show token usage", "args": ""},
	{"name": "interrupt", "description": "stop the running turn", "args": ""},
}

func commandsCatalog(_ context.Context, _ *client, m string, raw json.RawMessage) (any, error) {
	if _, err := decode[struct {
		common
		SessionID string `json:"session_id"`
	}](m, raw); err != nil {
		return nil, err
	}
	return map[string]any{"commands": slashCommands}, nil
}

func findCommand(name string) (map[string]any, bool) {
	name = strings.TrimPrefix(strings.TrimSpace(name), "/")
	for _, c := range slashCommands {
		if c["name"] == name {
			return c, true
		}
	}
	return nil, false
}

func commandResolve(_ context.Context, _ *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		SessionID string `json:"session_id"`
		Name      string `json:"name"`
		Text      string `json:"text"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	name, arg := p.Name, ""
	if name == "" {
		name, arg, _ = strings.Cut(strings.TrimSpace(p.Text), " ")
	}
	cmd, ok := findCommand(name)
	if !ok {
		return map[string]any{"found": false, "name": strings.TrimPrefix(name, "/")}, nil
	}
	return map[string]any{"found": true, "name": cmd["name"], "description": cmd["description"], "args": cmd["args"], "arg": arg}, nil
}

func commandDispatch(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		SessionID string `json:"session_id"`
		Name      string `json:"name"`
		Arg       string `json:"arg"`
		Command   string `json:"command"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	name, arg := p.Name, p.Arg
	if p.Command != "" { // the seeds' form: {"command": "/model claude-sonnet-4"}
		if p.Name != "" || p.Arg != "" {
			return nil, rpcErr(jsonrpc.CodeInvalidParams, "invalid params for command.dispatch: give either command or name and arg, not both")
		}
		name, arg, _ = strings.Cut(strings.TrimSpace(p.Command), " ")
	}
	name = strings.TrimPrefix(strings.TrimSpace(name), "/")
	arg = strings.TrimSpace(arg)
	if _, ok := findCommand(name); !ok {
		return nil, rpcErr(codeRewindInvalid, "unknown command /%s", name)
	}
	l, err := c.sess(p.SessionID)
	if err != nil {
		return nil, rpcErr(codeNoSession, "no active session")
	}
	exec := func(out string) map[string]any { return map[string]any{"type": "exec", "output": out} }
	switch name {
	case "model":
		if arg == "" {
			return exec("model: " + l.s.Record().Model), nil
		}
		if l.s.Snapshot().Inflight != nil {
			return nil, rpcErr(codeBusy, "session busy — the model changes between turns")
		}
		canon, err := c.g.checkModel(arg, "")
		if err != nil {
			return nil, err
		}
		got, err := l.s.SetModel(ctx, canon)
		if err != nil {
			return nil, err
		}
		return exec("model switched to " + got), nil
	case "title":
		if arg == "" {
			return exec("title: " + l.s.Record().Title), nil
		}
		if err := l.s.SetTitle(ctx, arg); err != nil {
			return nil, toWire("session.title", err)
		}
		return exec("title set to " + arg), nil
	case "compress":
		r, err := l.s.Compress(ctx, arg)
		if errors.Is(err, engine.ErrBusy) {
			return nil, rpcErr(codeBusy, "session busy — /interrupt the current turn before /compress")
		}
		if err != nil {
			return nil, rpcErr(5005, "compress failed: %v", err)
		}
		if r.Status != "compressed" {
			return exec("nothing compressed: " + r.Reason), nil
		}
		return exec(fmt.Sprintf("compressed %d messages into a summary", r.Removed)), nil
	case "steer":
		if arg == "" {
			return nil, rpcErr(codeRewindInvalid, "usage: /steer <text>")
		}
		if _, err := l.s.Steer(arg); err == nil {
			return exec("Steer queued — arrives after the next tool call"), nil
		}
		return map[string]any{"type": "send", "message": arg}, nil
	case "queue":
		if arg == "" {
			return nil, rpcErr(codeRewindInvalid, "usage: /queue <text>")
		}
		return map[string]any{"type": "send", "message": arg, "notice": "queued"}, nil
	case "retry", "undo":
		u, err := l.s.Undo(ctx)
		switch {
		case errors.Is(err, engine.ErrBusy):
			return nil, rpcErr(codeBusy, "session busy — interrupt the current turn first")
		case errors.Is(err, engine.ErrNothingToUndo):
			return nil, rpcErr(codeRewindStale, "nothing to %s", name)
		case err != nil:
			return nil, err
		}
		if name == "retry" {
			return map[string]any{"type": "send", "message": u.Text}, nil
		}
		return map[string]any{"type": "prefill", "text": u.Text, "removed": u.Archived}, nil
	case "branch":
		b, err := c.g.eng.Branch(ctx, l.s.ID(), engine.BranchOptions{Title: arg, Source: "tui"})
		if err != nil {
			return nil, err
		}
		nl := c.g.register(b)
		c.attach(nl, nil)
		return map[string]any{"type": "exec", "output": "branched into " + nl.rid, "session_id": nl.rid, "stored_session_id": b.ID()}, nil
	case "status":
		return exec(statusText(l)), nil
	case "usage":
		u := l.s.Record().Usage
		line := fmt.Sprintf("%d input + %d output tokens (%d cached, %d reasoning), %d model calls, %d tool calls", u.InputTokens, u.OutputTokens, u.CachedTokens, u.ReasoningTokens, u.APICalls, u.ToolCalls)
		if u.CostUSD != 0 {
			line += fmt.Sprintf(", $%.4f at list prices", u.CostUSD)
		}
		return exec(line), nil
	case "interrupt":
		if l.s.Interrupt("user") {
			return exec("interrupted"), nil
		}
		return exec("nothing to interrupt"), nil
	}
	return nil, rpcErr(codeRewindInvalid, "unknown command /%s", name)
}

func cliExec(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	var probe struct {
		Argv json.RawMessage `json:"argv"`
	}
	_ = json.Unmarshal(raw, &probe)
	var argv []string
	if len(probe.Argv) == 0 || json.Unmarshal(probe.Argv, &argv) != nil || len(argv) == 0 {
		return nil, rpcErr(codeArgv, "argv must be a non-empty list of strings")
	}
	if _, err := decode[struct {
		common
		Argv    []string `json:"argv"`
		Timeout int      `json:"timeout"`
	}](m, raw); err != nil {
		return nil, err
	}
	// The CLI runs as the local owner: it would show every principal's sessions.
	if !c.operator() {
		return nil, rpcErr(codeArgv, "command %q is not allowed for this API key", argv[0])
	}
	if c.g.opts.CLI == nil || !slices.Contains(c.g.opts.CLIAllow, argv[0]) {
		return nil, rpcErr(codeArgv, "command %q is not allowed (allowed: %s)", argv[0], strings.Join(c.g.opts.CLIAllow, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, code, err := c.g.opts.CLI(ctx, argv)
	if err != nil {
		return nil, rpcErr(codeFailed, "cli.exec failed: %v", err)
	}
	return map[string]any{"output": out, "exit_code": code}, nil
}

func reloadMCP(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	if _, err := decode[struct {
		common
		SessionID string `json:"session_id"`
	}](m, raw); err != nil {
		return nil, err
	}
	if !c.operator() {
		return nil, rpcErr(codeFailed, "reload.mcp is not allowed for this API key")
	}
	if c.g.opts.ReloadMCP == nil {
		return map[string]any{"status": "ok", "servers": []any{}}, nil
	}
	servers, err := c.g.opts.ReloadMCP(ctx)
	if err != nil {
		return nil, rpcErr(codeFailed, "reload.mcp failed: %v", err)
	}
	return map[string]any{"status": "ok", "servers": servers}, nil
}

func reloadEnv(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	if _, err := decode[common](m, raw); err != nil {
		return nil, err
	}
	if !c.operator() {
		return nil, rpcErr(codeFailed, "reload.env is not allowed for this API key")
	}
	if c.g.opts.ReloadEnv == nil {
		return map[string]any{"status": "ok", "updated": []string{}}, nil
	}
	changed, err := c.g.opts.ReloadEnv()
	if err != nil {
		return nil, rpcErr(codeFailed, "reload.env failed: %v", err)
	}
	if changed == nil {
		changed = []string{}
	}
	return map[string]any{"status": "ok", "updated": changed}, nil
}

func processList(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	l, err := c.sessionOf(m, raw)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, pr := range l.s.Processes().List() {
		running := true
		select {
		case <-pr.Done:
			running = false
		default:
		}
		e := map[string]any{"process_id": pr.ID, "command": pr.Command, "pid": pr.PID, "running": running}
		if !running {
			e["exit_code"] = pr.ExitCode()
		}
		out = append(out, e)
	}
	return map[string]any{"processes": out}, nil
}

func processStop(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		ProcessID string `json:"process_id"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	if p.ProcessID == "" {
		return nil, rpcErr(codeTextRequired, "process_id required")
	}
	pr, ok := l.s.Processes().Get(p.ProcessID)
	if !ok {
		return nil, rpcErr(codeNoProcess, "no such process %q", p.ProcessID)
	}
	select {
	case <-pr.Done:
		return map[string]any{"stopped": false, "process_id": pr.ID, "exit_code": pr.ExitCode()}, nil
	default:
	}
	if err := pr.Stop(); err != nil {
		return nil, rpcErr(codeFailed, "stop failed: %v", err)
	}
	return map[string]any{"stopped": true, "process_id": pr.ID}, nil
}

func delegationStatus(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	l, err := c.sessionOf(m, raw)
	if err != nil {
		return nil, err
	}
	tree := c.g.eng.SpawnTree(l.s.ID())
	active := 0
	var walk func(n engine.SpawnNode)
	walk = func(n engine.SpawnNode) {
		for _, k := range n.Children {
			if k.Status == string(engine.StatusWorking) || k.Status == string(engine.StatusWaiting) {
				active++
			}
			walk(k)
		}
	}
	walk(tree)
	return map[string]any{"tree": tree, "subagents": tree.Children, "active": active}, nil
}

// subagent finds a delegated child of a session live in this process.
func (c *client) subagent(id string) (*engine.Session, bool) {
	if id == "" {
		return nil, false
	}
	s, ok := c.g.eng.Live(id)
	if !ok || s.Record().ParentKind != "delegate" || !c.sees(s) {
		return nil, false
	}
	return s, true
}

func subagentInterrupt(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		SubagentID string `json:"subagent_id"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	if p.SubagentID == "" {
		return nil, rpcErr(codeUnknownParam, "subagent_id required")
	}
	s, ok := c.subagent(p.SubagentID)
	if !ok {
		return map[string]any{"found": false, "subagent_id": p.SubagentID}, nil
	}
	return map[string]any{"found": true, "subagent_id": p.SubagentID, "interrupted": s.Interrupt("user")}, nil
}

func subagentSteer(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		SubagentID string `json:"subagent_id"`
		Text       string `json:"text"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	if p.SubagentID == "" {
		return nil, rpcErr(codeUnknownParam, "subagent_id required")
	}
	if strings.TrimSpace(p.Text) == "" {
		return nil, rpcErr(codeInvalidArg, "text is required")
	}
	s, ok := c.subagent(p.SubagentID)
	if !ok {
		return map[string]any{"found": false, "subagent_id": p.SubagentID}, nil
	}
	if _, err := s.Steer(p.Text); err != nil {
		return map[string]any{"found": true, "subagent_id": p.SubagentID, "status": "rejected", "reason": err.Error()}, nil
	}
	return map[string]any{"found": true, "subagent_id": p.SubagentID, "status": "queued"}, nil
}

const spawnTreePrefix = "spawn_tree/"

// seesID reports whether the connection's principal sees the session with stored id (live or
// stored); an unknown session is not seen.
func (c *client) seesID(ctx context.Context, id string) bool {
	if c.who.Admin {
		return true
	}
	if s, ok := c.g.eng.Peek(id); ok {
		return c.sees(s)
	}
	rec, err := c.g.eng.Record(ctx, id)
	return err == nil && c.who.Sees(rec.Principal)
}

func spawnTreeSave(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Name string `json:"name"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	snap := map[string]any{"session_id": l.s.ID(), "name": p.Name, "saved_at": time.Now().UTC().Format(time.RFC3339Nano), "tree": c.g.eng.SpawnTree(l.s.ID())}
	b, _ := json.Marshal(snap)
	key := spawnTreePrefix + l.s.ID() + "/" + time.Now().UTC().Format("20060102T150405.000000000")
	if err := c.g.eng.PutSetting(ctx, key, b); err != nil {
		return nil, err
	}
	return map[string]any{"path": key, "session_id": l.s.ID()}, nil
}

func spawnTreeList(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		SessionID string `json:"session_id"`
		Limit     int    `json:"limit"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	prefix := spawnTreePrefix
	if p.SessionID != "" {
		if l, ok := c.g.lookup(p.SessionID); ok && c.sees(l.s) {
			prefix += l.s.ID() + "/"
		} else {
			prefix += p.SessionID + "/"
		}
	}
	kv, err := c.g.eng.Settings(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	entries := []map[string]any{}
	for _, k := range keys {
		var snap map[string]any
		if json.Unmarshal(kv[k], &snap) != nil {
			continue
		}
		if sid, _ := snap["session_id"].(string); !c.seesID(ctx, sid) {
			continue
		}
		entries = append(entries, map[string]any{"path": k, "session_id": snap["session_id"], "name": snap["name"], "saved_at": snap["saved_at"]})
		if p.Limit > 0 && len(entries) >= p.Limit {
			break
		}
	}
	return map[string]any{"entries": entries}, nil
}

func spawnTreeLoad(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		Path string `json:"path"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(p.Path, spawnTreePrefix) {
		return nil, rpcErr(codeInvalidArg, "path must come from spawn_tree.list")
	}
	b, err := c.g.eng.Setting(ctx, p.Path)
	if err == nil {
		var snap struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(b, &snap) != nil || !c.seesID(ctx, snap.SessionID) {
			err = engine.ErrNotFound
		}
	}
	if errors.Is(err, engine.ErrNotFound) {
		return nil, rpcErr(codeStoredNotFound, "no saved spawn tree at %q", p.Path)
	}
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

func terminalResize(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Cols int `json:"cols"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.Cols > 0 {
		l.cols = min(p.Cols, 10000)
	}
	return map[string]any{"cols": l.cols}, nil
}

// maxImage bounds an attached image.
const maxImage = 20 << 20

var imageTypes = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/bmp": ".bmp"}

func (l *live) addImage(path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.images = append(l.images, path)
	return len(l.images)
}

func clipboardPaste(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		ContentBase64 string `json:"content_base64"`
		Data          string `json:"data"`
		Filename      string `json:"filename"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	data := p.ContentBase64
	if data == "" {
		data = p.Data
	}
	if data == "" {
		return map[string]any{"attached": false, "message": "no image on the clipboard: send its bytes as content_base64"}, nil
	}
	if i := strings.Index(data, ";base64,"); strings.HasPrefix(data, "data:") && i > 0 {
		data = data[i+len(";base64,"):]
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(b) == 0 {
		return nil, rpcErr(4017, "invalid base64 image data")
	}
	if len(b) > maxImage {
		return nil, rpcErr(4018, "image too large (%d bytes, limit %d)", len(b), maxImage)
	}
	ext, ok := imageTypes[http.DetectContentType(b)]
	if !ok {
		return nil, rpcErr(codeBadImage, "unsupported image (PNG, JPEG, GIF, WebP or BMP)")
	}
	dir := filepath.Join(c.g.opts.Home, "images")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, rpcErr(5027, "clipboard unavailable: %v", err)
	}
	path := filepath.Join(dir, "paste_"+time.Now().UTC().Format("20060102_150405_")+randHex(3)+ext)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, rpcErr(5027, "clipboard unavailable: %v", err)
	}
	n := l.addImage(path)
	return map[string]any{"attached": true, "path": path, "count": n, "name": filepath.Base(path)}, nil
}

func imageAttach(_ context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, l, err := decodeSession[struct {
		sessionParams
		Path string `json:"path"`
	}](c, m, raw)
	if err != nil {
		return nil, err
	}
	path, remainder := splitDrop(strings.TrimSpace(p.Path))
	if path == "" {
		return nil, rpcErr(codePathRequired, "path required")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(l.s.Record().Cwd, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, rpcErr(codeBadImage, "image not found: %s", filepath.Base(path))
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := f.Read(head)
	if _, ok := imageTypes[http.DetectContentType(head[:n])]; !ok {
		return nil, rpcErr(codeBadImage, "unsupported image: %s", filepath.Base(path))
	}
	if st, err := f.Stat(); err == nil && st.Size() > maxImage {
		return nil, rpcErr(4018, "image too large")
	}
	count := l.addImage(path)
	return map[string]any{"attached": true, "path": path, "count": count, "remainder": remainder, "text": remainder, "name": filepath.Base(path)}, nil
}

// splitDrop takes a dropped path (possibly quoted, possibly followed by text).
func splitDrop(s string) (path, rest string) {
	if s == "" {
		return "", ""
	}
	if q := s[0]; q == '"' || q == '\'' {
		if i := strings.IndexByte(s[1:], q); i >= 0 {
			return s[1 : i+1], strings.TrimSpace(s[i+2:])
		}
	}
	if _, err := os.Stat(s); err == nil {
		return s, ""
	}
	path, rest, _ = strings.Cut(s, " ")
	return path, strings.TrimSpace(rest)
}
