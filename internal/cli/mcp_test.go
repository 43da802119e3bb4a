package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
)

// mcpClient starts `hermes mcp serve` as a real subprocess and connects an MCP client to it.
func mcpClient(t *testing.T, dir string, env []string) *client.Client {
	t.Helper()
	tr := transport.NewStdioWithOptions("hermes", nil, nil, transport.WithCommandFunc(
		func(context.Context, string, []string, []string) (*exec.Cmd, error) {
			return hermesCmd(t, dir, env, "mcp", "serve"), nil
		}))
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return c
}

func mcpCall(t *testing.T, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var structured map[string]any
	raw := res.RawStructuredContent
	if raw == nil && res.StructuredContent != nil {
		raw, _ = json.Marshal(res.StructuredContent)
	}
	if raw != nil {
		if err := json.Unmarshal(raw, &structured); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, raw, err)
		}
	}
	return res, structured
}

func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMCPServeDrivesASession drives `hermes mcp serve` with an MCP client: a prompt whose turn
// needs an approval (denied, since nobody can answer over MCP), then history and listing.
func TestMCPServeDrivesASession(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}),
		openaitest.Text("I did not delete build."),
	)
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=test"}
	c := mcpClient(t, work, env)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "create_session,get_history,list_sessions,prompt" {
		t.Fatalf("tools %v", names)
	}

	res, created := mcpCall(t, c, "create_session", map[string]any{"cwd": work})
	id, _ := created["session_id"].(string)
	if res.IsError || id == "" || created["model"] != "openai:fake-agent" {
		t.Fatalf("create_session: %s %v", resultText(res), created)
	}

	res, out := mcpCall(t, c, "prompt", map[string]any{"session_id": id, "text": "clean the build"})
	if res.IsError || resultText(res) != "I did not delete build." {
		t.Fatalf("prompt: %q %v", resultText(res), out)
	}
	if out["status"] != "completed" || out["refused_requests"] != float64(1) {
		t.Fatalf("prompt outcome %v", out)
	}
	if _, err := os.Stat(filepath.Join(work, "build")); err != nil {
		t.Fatal("the unapproved command ran")
	}

	res, hist := mcpCall(t, c, "get_history", map[string]any{"session_id": id})
	rows, _ := hist["rows"].([]any)
	if res.IsError || len(rows) < 4 {
		t.Fatalf("get_history: %s", resultText(res))
	}
	first, _ := rows[0].(map[string]any)
	last, _ := rows[len(rows)-1].(map[string]any)
	if first["role"] != "user" || first["content"] != "clean the build" || last["content"] != "I did not delete build." {
		t.Fatalf("history rows %v", rows)
	}
	if !strings.Contains(resultText(res), "BLOCKED") {
		t.Errorf("the tool row does not say the call was blocked: %s", resultText(res))
	}

	res, list := mcpCall(t, c, "list_sessions", map[string]any{})
	sessions, _ := list["sessions"].([]any)
	if res.IsError || len(sessions) != 1 || sessions[0].(map[string]any)["session_id"] != id || sessions[0].(map[string]any)["source"] != "mcp" {
		t.Fatalf("list_sessions: %s", resultText(res))
	}

	res, _ = mcpCall(t, c, "prompt", map[string]any{"session_id": "nope", "text": "hi"})
	if !res.IsError || !strings.Contains(resultText(res), "nope") {
		t.Fatalf("unknown session: %s", resultText(res))
	}
}

// TestChatUsesConfiguredMCPServer configures `hermes mcp serve` (another real subprocess, with
// its own home) as an MCP server of `hermes chat`: the model calls inner__create_session and
// the turn uses the result.
func TestChatUsesConfiguredMCPServer(t *testing.T) {
	home, innerHome, work := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := "mcp:\n  servers:\n" + hermesMCPServer("inner", innerHome) + "    broken:\n      command: /nonexistent/mcp-server\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "inner__create_session", Args: []string{`{"title":"from outside"}`}}),
		openaitest.Text("Created it."),
	)
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=test"}
	r := hermes(t, work, env, "chat", "-q", "make a session")
	if r.code != 0 || !strings.Contains(r.stdout, "Created it.") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.err)
	}
	if !strings.Contains(r.err, "broken") {
		t.Errorf("the server that never started was not reported: %s", r.err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), `"inner__prompt"`) {
		t.Errorf("MCP tools not offered to the model")
	}
	if !strings.Contains(string(reqs[1].Body), `session_id`) {
		t.Errorf("the model did not see the MCP result: %s", reqs[1].Body)
	}
	// The inner server stored the session in its own home.
	list := hermes(t, work, []string{"HERMES_HOME=" + innerHome}, "sessions")
	if list.code != 0 || !strings.Contains(list.stdout, "from outside") {
		t.Fatalf("inner sessions: %+v", list)
	}
}

// TestGatewayReloadMCP checks the gateway's reload.mcp hook: it re-reads config.yaml (a
// server added since the start is connected and reported), restarts the servers, and the
// sessions live before it keep working, MCP tools included.
func TestGatewayReloadMCP(t *testing.T) {
	home, innerHome, secondHome := t.TempDir(), t.TempDir(), t.TempDir()
	writeCfg := func(servers string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("mcp:\n  servers:\n"+servers), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg(hermesMCPServer("inner", innerHome))
	srv := openaitest.New(t)
	env := map[string]string{"HERMES_HOME": home, "HERMES_MODEL": "openai:fake-agent", "OPENAI_BASE_URL": srv.URL(), "OPENAI_API_KEY": "test"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := build(cfg, st, runtimeOpts{logger: logger, cwd: t.TempDir()})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := a.eng.Create(ctx, engine.CreateOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	pidBefore := a.mcp.Status()[0].PID

	writeCfg(hermesMCPServer("inner", innerHome) + hermesMCPServer("second", secondHome))
	got, err := gatewayOptions(cfg, a, logger).ReloadMCP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status, ok := got.([]mcptool.Status)
	if !ok || len(status) != 2 || status[0].Name != "inner" || !status[0].Connected || status[0].Tools != 4 ||
		status[1].Name != "second" || !status[1].Connected || status[1].Tools != 4 {
		t.Fatalf("reload.mcp: %#v", got)
	}
	if status[0].PID == pidBefore {
		t.Errorf("inner was not restarted (pid %d)", pidBefore)
	}

	// The session is still live and its MCP tools reach the restarted server.
	if _, ok := a.eng.Live(sess.Record().ID); !ok {
		t.Fatal("the session was lost by the reload")
	}
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "inner__list_sessions", Args: []string{`{}`}}),
		openaitest.Text("listed"),
	)
	adm, err := sess.Submit(ctx, engine.Prompt{Text: "list them"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Wait(ctx, adm.TurnID)
	if err != nil || out.Status != engine.StatusCompleted || out.Text != "listed" {
		t.Fatalf("turn after the reload: %+v %v", out, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "sessions") {
		t.Fatalf("the MCP result did not reach the model")
	}
	// The server added by the reload contributed its tools to the running engine: the model
	// was offered them in this turn, without a restart.
	if _, err := a.eng.Tools().Get("second__list_sessions"); err != nil {
		t.Fatalf("the added server's tools are not registered: %v", err)
	}
	if !strings.Contains(string(reqs[0].Body), `"second__list_sessions"`) {
		t.Fatal("the model was not offered the added server's tools")
	}

	// Removing a server from the configuration removes its tools from the next request.
	writeCfg(hermesMCPServer("second", secondHome))
	if _, err := gatewayOptions(cfg, a, logger).ReloadMCP(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.eng.Tools().Get("inner__list_sessions"); err == nil {
		t.Fatal("the removed server's tools are still registered")
	}
	srv.Enqueue(openaitest.Text("fewer tools"))
	adm, err = sess.Submit(ctx, engine.Prompt{Text: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := sess.Wait(ctx, adm.TurnID); err != nil || out.Text != "fewer tools" {
		t.Fatalf("turn after removal: %+v %v", out, err)
	}
	var req struct {
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(srv.Requests()[len(srv.Requests())-1].Body, &req); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	offered := strings.Join(names, ",")
	if strings.Contains(offered, "inner__") || !strings.Contains(offered, "second__list_sessions") {
		t.Fatalf("tools offered after removing a server: %s", offered)
	}
}

// TestMCPServeHTTP runs `hermes mcp serve --http` as a subprocess, drives it with mcp-go's
// client over streamable HTTP (create a session, prompt it, read its history, list), and stops
// it with SIGTERM.
func TestMCPServeHTTP(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("Answered over HTTP."))
	url, stop := startMCPHTTP(t, t.TempDir(), []string{"HERMES_HOME=" + t.TempDir(), "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=test"})
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	res, created := mcpCall(t, c, "create_session", map[string]any{"title": "over http"})
	id, _ := created["session_id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("create_session: %s", resultText(res))
	}
	res, out := mcpCall(t, c, "prompt", map[string]any{"session_id": id, "text": "question over http"})
	if res.IsError || resultText(res) != "Answered over HTTP." || out["status"] != "completed" {
		t.Fatalf("prompt: %s %v", resultText(res), out)
	}
	res, hist := mcpCall(t, c, "get_history", map[string]any{"session_id": id, "limit": 1})
	rows, _ := hist["rows"].([]any)
	if res.IsError || len(rows) != 1 || rows[0].(map[string]any)["content"] != "Answered over HTTP." {
		t.Fatalf("get_history: %s", resultText(res))
	}
	res, list := mcpCall(t, c, "list_sessions", map[string]any{"limit": 5})
	if sessions, _ := list["sessions"].([]any); res.IsError || len(sessions) != 1 || sessions[0].(map[string]any)["title"] != "over http" {
		t.Fatalf("list_sessions: %s", resultText(res))
	}
	c.Close()
	if err := stop(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestMCPStatus(t *testing.T) {
	home, innerHome := t.TempDir(), t.TempDir()
	r := hermes(t, t.TempDir(), []string{"HERMES_HOME=" + home}, "mcp", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "no MCP servers configured") {
		t.Fatalf("no servers: %+v", r)
	}
	cfg := "mcp:\n  servers:\n" + hermesMCPServer("inner", innerHome) + "    broken:\n      command: /nonexistent/mcp-server\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r = hermes(t, t.TempDir(), []string{"HERMES_HOME=" + home}, "mcp", "status")
	if r.code != 1 {
		t.Fatalf("exit %d with a broken server: %+v", r.code, r)
	}
	for _, want := range []string{"broken (stdio): FAIL", "/nonexistent/mcp-server", "inner (stdio): ok, 4 tools", "  inner__prompt\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestGatewaySessionInfoMCPStatus checks that MCP server status (connected, tool count, error)
// reaches gateway clients in session info and session.status: one server that serves and one
// that cannot start.
func TestGatewaySessionInfoMCPStatus(t *testing.T) {
	inner := t.TempDir()
	tg := stdioTarget(t, "mcp:\n  servers:\n"+hermesMCPServer("inner", inner)+
		"    broken:\n      command: "+filepath.Join(t.TempDir(), "no-such-server")+"\n")
	c := open(t, tg, false)
	created := call(t, c, "session.create", map[string]any{})
	check := func(where string, v any) {
		t.Helper()
		list, _ := v.([]any)
		byName := map[string]map[string]any{}
		for _, s := range list {
			m, _ := s.(map[string]any)
			name, _ := m["name"].(string)
			byName[name] = m
		}
		in, br := byName["inner"], byName["broken"]
		if len(list) != 2 || in == nil || br == nil {
			t.Fatalf("%s: mcp_servers = %v", where, v)
		}
		if in["connected"] != true || in["tools"] != float64(4) {
			t.Errorf("%s: inner = %v, want connected with 4 tools", where, in)
		}
		if br["connected"] == true || br["error"] == nil || br["error"] == "" {
			t.Errorf("%s: broken = %v, want not connected with an error", where, br)
		}
	}
	info, _ := created["info"].(map[string]any)
	check("session.create info", info["mcp_servers"])
	st := call(t, c, "session.status", map[string]any{"session_id": created["session_id"]})
	check("session.status", st["mcp_servers"])
}

// TestChatReloadMCP: `/reload-mcp` in `hermes chat` re-reads config.yaml in the running
// process: a server added after the start serves the same session's next turn.
func TestChatReloadMCP(t *testing.T) {
	home, work, inner := t.TempDir(), t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "inner__list_sessions", Args: []string{`{}`}}),
		openaitest.Text("listed"),
	)
	cfgPath := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("mcp:\n  servers: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := hermesCmd(t, work, []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=k"}, "chat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var log []string
	waitFor := func(sub string) {
		t.Helper()
		for l := range lines {
			log = append(log, l)
			if strings.Contains(l, sub) {
				return
			}
		}
		t.Fatalf("no %q on stderr:\n%s", sub, strings.Join(log, "\n"))
	}
	waitFor("hermes chat — session") // the configuration (no servers) has been read
	server := "mcp:\n  servers:\n" + hermesMCPServer("inner", inner)
	if err := os.WriteFile(cfgPath, []byte(server), 0o600); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "/reload-mcp\n")
	waitFor("mcp inner (stdio): connected, 4 tools")
	io.WriteString(stdin, "list the sessions\n")
	stdin.Close()
	for l := range lines {
		log = append(log, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("chat: %v\n%s", err, strings.Join(log, "\n"))
	}
	if !strings.Contains(stdout.String(), "listed") {
		t.Fatalf("stdout %q\n%s", stdout.String(), strings.Join(log, "\n"))
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"inner__list_sessions"`) || !strings.Contains(string(reqs[1].Body), "sessions") {
		t.Fatalf("the reloaded server's tool did not serve the turn (%d requests)", len(reqs))
	}
}

// hermesMCPServer is a config.yaml entry (under mcp.servers) for this test binary serving as
// `hermes mcp serve` on home.
func hermesMCPServer(name, home string) string {
	return "    " + name + ":\n      command: " + os.Args[0] + "\n      args: [mcp, serve]\n" +
		"      env: {HERMES_TEST_AS_MAIN: \"1\", HERMES_HOME: \"" + home + "\"}\n"
}
