package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
)

// TestMain lets the test binary act as an MCP server in a child process, so the client is
// tested against a real subprocess speaking stdio.
func TestMain(m *testing.M) {
	switch os.Getenv("MCPTOOL_TEST_SERVER") {
	case "":
		os.Exit(m.Run())
	case "never":
		fmt.Fprintln(os.Stderr, "fatal: cannot open the database")
		os.Exit(1)
	case "sleep": // a grandchild that outlives its parent unless its group is killed; a mute server
		if f := os.Getenv("MCPTOOL_TEST_PIDFILE"); f != "" {
			os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644)
		}
		time.Sleep(time.Hour)
		os.Exit(0)
	case "env": // the usual tools and one that reports the server's environment
		s := testServer()
		s.AddTool(mcp.NewTool("env", mcp.WithDescription("Report the server's environment.")),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text(strings.Join(os.Environ(), "\n")), nil
			})
		if err := server.ServeStdio(s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	default:
		if err := server.ServeStdio(testServer()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func text(s string) *mcp.CallToolResult { return mcp.NewToolResultText(s) }

// testServer offers one tool per behaviour under test.
func testServer() *server.MCPServer {
	s := server.NewMCPServer("testsrv", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo the text."), mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			t, err := req.RequireString("text")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return text("echo: " + t), nil
		})
	s.AddTool(mcp.NewTool("args", mcp.WithDescription("Report the raw arguments received.")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw := string(req.Params.RawArguments)
			if raw == "" {
				b, _ := json.Marshal(req.Params.Arguments)
				raw = string(b)
			}
			return text(raw), nil
		})
	s.AddTool(mcp.NewTool("fail"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("disk full"), nil
	})
	s.AddTool(mcp.NewTool("crash"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(mcp.NewTool("pid"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(strconv.Itoa(os.Getpid())), nil
	})
	s.AddTool(mcp.NewTool("spawn"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MCPTOOL_TEST_SERVER=sleep")
		if err := cmd.Start(); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return text(strconv.Itoa(cmd.Process.Pid)), nil
	})
	s.AddTool(mcp.NewTool("big"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(strings.Repeat("é", 1<<19)), nil // 1 MiB of two-byte runes
	})
	s.AddTool(mcp.NewTool("binary"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// A stray non-JSON, non-UTF-8 line on the protocol stream, then a result whose text
		// holds invalid bytes.
		os.Stdout.Write([]byte("\xff\xfe stray output\n"))
		return text("before \xff\xfe after"), nil
	})
	s.AddTool(mcp.NewTool("media"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewTextContent("a chart:"),
			mcp.NewImageContent("aGVsbG8=", "image/png"),
			mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "note body"}),
			mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: "file:///a.bin", MIMEType: "application/octet-stream", Blob: "AAAA"}),
		}}, nil
	})
	s.AddTool(mcp.NewTool("slow"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return text("late"), nil
	})
	s.AddTool(mcp.NewToolWithRawSchema("badschema", "A tool whose schema is not an object.", json.RawMessage(`{"type":"string"}`)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("unreachable"), nil
		})
	return s
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func stdioServer(mode string) mcptool.ServerConfig {
	return mcptool.ServerConfig{
		Command: os.Args[0],
		Args:    []string{"-test.run=^$"},
		Env:     map[string]string{"MCPTOOL_TEST_SERVER": mode},
	}
}

func newManager(t *testing.T, servers map[string]mcptool.ServerConfig, maxBytes int) (*mcptool.Manager, map[string]tool.Tool, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	m := mcptool.New(servers, mcptool.Options{
		Logger:         slog.New(slog.NewTextHandler(logs, nil)),
		MaxResultBytes: maxBytes,
		StartTimeout:   20 * time.Second,
	})
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	tools := map[string]tool.Tool{}
	for _, tl := range m.Tools(context.Background()) {
		tools[tl.Spec().Name] = tl
	}
	return m, tools, logs
}

func call(t *testing.T, tools map[string]tool.Tool, name, args string) (tool.Result, error) {
	t.Helper()
	tl, ok := tools[name]
	if !ok {
		t.Fatalf("tool %q not offered; have %v", name, keys(tools))
	}
	return tl.Call(context.Background(), tool.Call{ID: "c1", Name: name, Args: json.RawMessage(args)}, &tool.Env{})
}

func keys(m map[string]tool.Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestListAndCall(t *testing.T) {
	_, tools, logs := newManager(t, map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, 0)
	for _, n := range []string{"t__echo", "t__args", "t__fail", "t__crash", "t__pid", "t__spawn", "t__big", "t__binary", "t__media", "t__slow"} {
		if _, ok := tools[n]; !ok {
			t.Errorf("missing %s", n)
		}
	}
	if _, ok := tools["t__badschema"]; ok {
		t.Error("a tool with a non-object schema was offered")
	}
	if !strings.Contains(logs.String(), "badschema") || !strings.Contains(logs.String(), "malformed input schema") {
		t.Errorf("no clear log for the skipped tool: %s", logs)
	}
	spec := tools["t__echo"].Spec()
	var schema struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil || len(schema.Required) != 1 {
		t.Fatalf("schema %s (%v)", spec.Parameters, err)
	}
	if spec.Description != "Echo the text." {
		t.Errorf("description %q", spec.Description)
	}

	r, err := call(t, tools, "t__echo", `{"text":"hi"}`)
	if err != nil || r.IsError || r.Content != "echo: hi" {
		t.Fatalf("echo: %+v %v", r, err)
	}
	if r.Meta["mcp_server"] != "t" || r.Meta["mcp_tool"] != "echo" {
		t.Errorf("meta %v", r.Meta)
	}
	// No arguments, and explicit null, go on the wire as an empty object.
	for _, a := range []string{``, `null`, `{}`} {
		r, err = call(t, tools, "t__args", a)
		if err != nil || r.Content != "{}" {
			t.Fatalf("args %q: server saw %q (%v)", a, r.Content, err)
		}
	}
	r, err = call(t, tools, "t__args", `[1]`)
	if err != nil || !r.IsError || !strings.Contains(r.Content, "Invalid arguments") {
		t.Fatalf("non-object arguments: %+v %v", r, err)
	}
}

func TestErrorResultAndMedia(t *testing.T) {
	_, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, 0)
	r, err := call(t, tools, "t__fail", `{}`)
	if err != nil || !r.IsError || r.Content != "disk full" {
		t.Fatalf("fail: %+v %v", r, err)
	}
	r, err = call(t, tools, "t__media", `{}`)
	if err != nil || r.IsError {
		t.Fatalf("media: %+v %v", r, err)
	}
	for _, want := range []string{"a chart:", "[image image/png, 8 bytes base64]", "[resource file:///notes.txt text/plain]\nnote body", "[resource file:///a.bin application/octet-stream, 4 bytes base64]"} {
		if !strings.Contains(r.Content, want) {
			t.Errorf("media content lacks %q:\n%s", want, r.Content)
		}
	}
}

func TestCrashedServerRestartsOnNextCall(t *testing.T) {
	m, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, 0)
	r, err := call(t, tools, "t__pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid1 := r.Content
	_, err = call(t, tools, "t__crash", `{}`)
	if !errors.Is(err, mcptool.ErrUnavailable) {
		t.Fatalf("crash mid-call: want ErrUnavailable, got %v", err)
	}
	if st := m.Status(); st[0].Connected {
		t.Errorf("status after crash: %+v", st)
	}
	r, err = call(t, tools, "t__pid", `{}`)
	if err != nil {
		t.Fatalf("call after crash: %v", err)
	}
	if r.Content == pid1 || r.Content == "" {
		t.Fatalf("not restarted: pid %s then %s", pid1, r.Content)
	}
	if st := m.Status(); !st[0].Connected || st[0].Transport != "stdio" {
		t.Errorf("status after restart: %+v", st)
	}
}

func TestServerThatNeverStarts(t *testing.T) {
	m, tools, logs := newManager(t, map[string]mcptool.ServerConfig{
		"broken":  stdioServer("never"),
		"missing": {Command: "/nonexistent/mcp-server"},
		"both":    {Command: "x", URL: "http://127.0.0.1:1"},
		"t":       stdioServer("ok"),
	}, 0)
	for name := range tools {
		if !strings.HasPrefix(name, "t__") {
			t.Errorf("tool %s from a server that never started", name)
		}
	}
	if r, err := call(t, tools, "t__echo", `{"text":"still here"}`); err != nil || r.Content != "echo: still here" {
		t.Fatalf("working server: %+v %v", r, err)
	}
	out := logs.String()
	for _, want := range []string{"broken", "cannot open the database", "missing", "both", "exactly one of command and url"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, st := range m.Status() {
		if st.Name != "t" && (st.Connected || st.Error == "") {
			t.Errorf("status %+v", st)
		}
	}
}

func TestHugeAndNonUTF8Results(t *testing.T) {
	const max = 10_001 // odd, so the cut lands inside a two-byte rune
	_, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, max)
	r, err := call(t, tools, "t__big", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(r.Content) || !strings.Contains(r.Content, "[output truncated: 10000 of 1048576 bytes shown]") {
		t.Fatalf("big result not capped cleanly: %d bytes, tail %q", len(r.Content), r.Content[len(r.Content)-60:])
	}
	if len(r.Content) > max+100 {
		t.Fatalf("big result is %d bytes", len(r.Content))
	}
	r, err = call(t, tools, "t__binary", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(r.Content) || !strings.HasPrefix(r.Content, "before ") || !strings.HasSuffix(r.Content, " after") {
		t.Fatalf("binary: %q", r.Content)
	}
	// The stray line did not break the connection.
	if r, err := call(t, tools, "t__echo", `{"text":"ok"}`); err != nil || r.Content != "echo: ok" {
		t.Fatalf("after stray output: %+v %v", r, err)
	}
}

func TestCallTimeout(t *testing.T) {
	cfg := stdioServer("ok")
	cfg.Timeout = 200 * time.Millisecond
	_, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"t": cfg}, 0)
	if _, err := call(t, tools, "t__slow", `{}`); !errors.Is(err, mcptool.ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	if r, err := call(t, tools, "t__echo", `{"text":"alive"}`); err != nil || r.Content != "echo: alive" {
		t.Fatalf("server unusable after a timeout: %+v %v", r, err)
	}
}

func TestCloseStopsChildAndRefusesCalls(t *testing.T) {
	m := mcptool.New(map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, mcptool.Options{})
	tools := map[string]tool.Tool{}
	for _, tl := range m.Tools(context.Background()) {
		tools[tl.Spec().Name] = tl
	}
	r, err := call(t, tools, "t__pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(r.Content)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the child: signal 0 to its pid fails once it is reaped.
	if p, err := os.FindProcess(pid); err == nil {
		if err := p.Signal(syscall.Signal(0)); err == nil {
			t.Fatalf("child %d still running after Close", pid)
		}
	}
	if _, err := call(t, tools, "t__pid", `{}`); !errors.Is(err, mcptool.ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
}

func TestStreamableHTTP(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	h := server.NewStreamableHTTPServer(testServer())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Token"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	m, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"web": {URL: srv.URL + "/mcp", Headers: map[string]string{"X-Token": "s3cret"}}}, 0)
	r, err := call(t, tools, "web__echo", `{"text":"over http"}`)
	if err != nil || r.Content != "echo: over http" {
		t.Fatalf("%+v %v", r, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("no request reached the server")
	}
	for _, v := range seen {
		if v != "s3cret" {
			t.Fatalf("header missing on a request: %q", seen)
		}
	}
	if st := m.Status(); st[0].Transport != "http" || !st[0].Connected || st[0].Tools == 0 {
		t.Errorf("status %+v", st)
	}
}

func TestToolName(t *testing.T) {
	cases := map[[2]string]string{
		{"fs", "read_file"}:            "fs__read_file",
		{"my server", "get.sum"}:       "my_server__get_sum",
		{"x", strings.Repeat("a", 80)}: "x__" + strings.Repeat("a", 61),
	}
	for in, want := range cases {
		if got := mcptool.ToolName(in[0], in[1]); got != want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
}

func TestConvert(t *testing.T) {
	r := mcptool.Convert(&mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}, IsError: true}, 100)
	if r.Content != `{"n":1}` || !r.IsError {
		t.Fatalf("%+v", r)
	}
	r = mcptool.Convert(&mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("a\xffb")}}, 100)
	if r.Content != "a\uFFFDb" {
		t.Fatalf("%q", r.Content)
	}
}

func FuzzConvert(f *testing.F) {
	f.Add("hello", 10)
	f.Add("é\xff\xfe", 2)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max <= 0 || max > 1<<20 {
			return
		}
		r := mcptool.Convert(&mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(s)}}, max)
		if !utf8.ValidString(r.Content) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
		if len(s) <= max && r.Content != strings.ToValidUTF8(s, "\uFFFD") && len(strings.ToValidUTF8(s, "\uFFFD")) <= max {
			t.Fatalf("short text changed: %q -> %q", s, r.Content)
		}
	})
}

func TestReloadRestartsAndClearsBackoff(t *testing.T) {
	m, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"t": stdioServer("ok"), "broken": stdioServer("never")}, 0)
	// The broken server is in backoff after its failed start: a second attempt is refused
	// without spawning it again.
	if st := m.Status(); st[0].Name != "broken" || st[0].Error == "" {
		t.Fatalf("status %+v", st)
	}
	r, err := call(t, tools, "t__pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	st := m.Reload(context.Background())
	if len(st) != 2 || st[0].Connected || !strings.Contains(st[0].Error, "cannot open the database") || !st[1].Connected || st[1].Tools != 10 {
		t.Fatalf("reload status %+v", st)
	}
	r2, err := call(t, tools, "t__pid", `{}`)
	if err != nil || r2.Content == r.Content {
		t.Fatalf("not restarted by reload: %s then %s (%v)", r.Content, r2.Content, err)
	}
}

// BenchmarkCallStdio measures one tool call round trip to a stdio child.
func BenchmarkCallStdio(b *testing.B) {
	m := mcptool.New(map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, mcptool.Options{})
	defer m.Close()
	var echo tool.Tool
	for _, tl := range m.Tools(context.Background()) {
		if tl.Spec().Name == "t__echo" {
			echo = tl
		}
	}
	if echo == nil {
		b.Fatal("no echo tool")
	}
	c := tool.Call{Name: "t__echo", Args: json.RawMessage(`{"text":"x"}`)}
	b.ResetTimer()
	for b.Loop() {
		if r, err := echo.Call(context.Background(), c, &tool.Env{}); err != nil || r.Content != "echo: x" {
			b.Fatal(r, err)
		}
	}
}

// running reports whether pid is a live (not zombie) process, from /proc.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func TestCloseKillsWhatTheServerSpawned(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	m := mcptool.New(map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, mcptool.Options{})
	tools := map[string]tool.Tool{}
	for _, tl := range m.Tools(context.Background()) {
		tools[tl.Spec().Name] = tl
	}
	r, err := call(t, tools, "t__spawn", `{}`)
	if err != nil || r.IsError {
		t.Fatal(r, err)
	}
	gpid, _ := strconv.Atoi(r.Content)
	if !running(gpid) {
		t.Fatalf("grandchild %d not running", gpid)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// SIGKILL is delivered asynchronously and the orphan is reaped by init: poll for it (no
	// channel can report another parent's child), bounded so a leak fails the test.
	deadline := time.Now().Add(20 * time.Second)
	for running(gpid) {
		if time.Now().After(deadline) {
			syscall.Kill(gpid, syscall.SIGKILL)
			t.Fatalf("grandchild %d survived Close", gpid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConcurrentCallsAndCancellation(t *testing.T) {
	_, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			want := fmt.Sprintf("echo: n%d", i)
			r, err := tools["t__echo"].Call(context.Background(), tool.Call{Args: json.RawMessage(fmt.Sprintf(`{"text":"n%d"}`, i))}, &tool.Env{})
			if err != nil || r.Content != want {
				errs <- fmt.Errorf("call %d: %q %v", i, r.Content, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A call whose context ends returns the context's error, and the connection survives.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tools["t__slow"].Call(ctx, tool.Call{Args: json.RawMessage(`{}`)}, &tool.Env{})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if r, err := call(t, tools, "t__echo", `{"text":"after"}`); err != nil || r.Content != "echo: after" {
		t.Fatalf("after a cancelled call: %+v %v", r, err)
	}
}

// TestHTTPServerRestart: calls keep working when the HTTP server behind the URL is replaced
// by a fresh instance that knows nothing of earlier connections.
func TestHTTPServerRestart(t *testing.T) {
	var mu sync.Mutex
	h := server.NewStreamableHTTPServer(testServer())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cur := h
		mu.Unlock()
		cur.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	_, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"web": {URL: srv.URL + "/mcp"}}, 0)
	if r, err := call(t, tools, "web__echo", `{"text":"one"}`); err != nil || r.Content != "echo: one" {
		t.Fatalf("%+v %v", r, err)
	}
	mu.Lock()
	h = server.NewStreamableHTTPServer(testServer()) // a restarted server: no sessions
	mu.Unlock()
	for _, w := range []string{"two", "three"} {
		r, err := call(t, tools, "web__echo", `{"text":"`+w+`"}`)
		if err != nil && !errors.Is(err, mcptool.ErrUnavailable) {
			t.Fatalf("call %s after the restart: %v", w, err)
		}
		if w == "three" && (err != nil || r.Content != "echo: three") {
			t.Fatalf("no recovery after the restart: %+v %v", r, err)
		}
	}
}

// TestReloadReadsTheNewConfiguration: Reload takes the server set from Reconfigure: a changed
// server restarts with its new settings, a removed one stops (its tools fail with ErrRemoved),
// an added one starts. A Reconfigure error keeps the servers it had.
func TestReloadReadsTheNewConfiguration(t *testing.T) {
	var mu sync.Mutex
	next := map[string]mcptool.ServerConfig{"keep": stdioServer("ok"), "drop": stdioServer("ok")}
	var reconfErr error
	logs := &logBuffer{}
	m := mcptool.New(next, mcptool.Options{
		Logger:       slog.New(slog.NewTextHandler(logs, nil)),
		StartTimeout: 20 * time.Second,
		Reconfigure: func() (map[string]mcptool.ServerConfig, error) {
			mu.Lock()
			defer mu.Unlock()
			return next, reconfErr
		},
	})
	t.Cleanup(func() { m.Close() })
	tools := map[string]tool.Tool{}
	for _, tl := range m.Tools(context.Background()) {
		tools[tl.Spec().Name] = tl
	}
	keepPid, err := call(t, tools, "keep__pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	dropPid, err := call(t, tools, "drop__pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}

	changed := stdioServer("ok")
	changed.Timeout = 100 * time.Millisecond // takes effect: slow now times out
	mu.Lock()
	next = map[string]mcptool.ServerConfig{"keep": changed, "added": stdioServer("ok")}
	mu.Unlock()
	st := m.Reload(context.Background())
	if len(st) != 2 || st[0].Name != "added" || !st[0].Connected || st[0].Tools != 10 || st[1].Name != "keep" || !st[1].Connected {
		t.Fatalf("status after reload %+v", st)
	}
	if r, err := call(t, tools, "keep__pid", `{}`); err != nil || r.Content == keepPid.Content {
		t.Fatalf("kept server not restarted: %s then %s (%v)", keepPid.Content, r.Content, err)
	}
	if _, err := call(t, tools, "keep__slow", `{}`); !errors.Is(err, mcptool.ErrTimeout) {
		t.Fatalf("the changed timeout was not applied: %v", err)
	}
	if _, err := call(t, tools, "drop__pid", `{}`); !errors.Is(err, mcptool.ErrRemoved) {
		t.Fatalf("removed server's tool: %v", err)
	}
	pid, _ := strconv.Atoi(dropPid.Content)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("removed server %d still running: %v", pid, err)
	}

	// Back in the configuration, the removed server's tools work again.
	st = m.Update(context.Background(), map[string]mcptool.ServerConfig{"keep": changed, "added": stdioServer("ok"), "drop": stdioServer("ok")})
	if len(st) != 3 || st[1].Name != "drop" || !st[1].Connected {
		t.Fatalf("status after re-adding %+v", st)
	}
	if r, err := call(t, tools, "drop__pid", `{}`); err != nil || r.Content == dropPid.Content {
		t.Fatalf("re-added server: %+v %v", r, err)
	}
	mu.Lock()
	reconfErr = errors.New("config.yaml: line 3: bad indentation")
	mu.Unlock()
	st = m.Reload(context.Background())
	if len(st) != 3 || !st[0].Connected || !st[1].Connected || !st[2].Connected {
		t.Fatalf("status after a failed re-read %+v", st)
	}
	if !strings.Contains(logs.String(), "bad indentation") {
		t.Errorf("the configuration error was not logged: %s", logs)
	}

	// After Close, Update starts nothing.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, st := range m.Update(context.Background(), map[string]mcptool.ServerConfig{"late": stdioServer("ok")}) {
		if st.Connected || st.Name == "late" {
			t.Fatalf("status after Close and Update %+v", st)
		}
	}
}

// TestStartTimeout: a server that never answers initialize fails its start within
// StartTimeout with a clear error, and the child is stopped.
func TestStartTimeout(t *testing.T) {
	logs := &logBuffer{}
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg := stdioServer("sleep")
	cfg.Env["MCPTOOL_TEST_PIDFILE"] = pidFile
	m := mcptool.New(map[string]mcptool.ServerConfig{"mute": cfg}, mcptool.Options{
		Logger:       slog.New(slog.NewTextHandler(logs, nil)),
		StartTimeout: time.Second,
	})
	t.Cleanup(func() { m.Close() })
	if tools := m.Tools(context.Background()); len(tools) != 0 {
		t.Fatalf("tools from a mute server: %d", len(tools))
	}
	st := m.Status()[0]
	if st.Connected || st.PID != 0 || !strings.Contains(st.Error, "initialize") || !strings.Contains(st.Error, "deadline exceeded") {
		t.Fatalf("status %+v", st)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		// Killed before it got as far as writing its pid (a slow machine): nothing to check.
		return
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil || pid <= 0 {
		return // killed while writing it
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the mute server %d outlived its failed start: %v", pid, err)
	}
}

// TestConcurrentReloadsEndConsistent: reloads that overlap (two gateway clients, or a remove
// and a re-add in quick succession) run one after the other, so a server present in the last
// configuration ends up connected and its tools answer — never ErrRemoved from an earlier
// reload's late stop.
func TestConcurrentReloadsEndConsistent(t *testing.T) {
	with := map[string]mcptool.ServerConfig{"a": stdioServer("ok")}
	without := map[string]mcptool.ServerConfig{}
	m := mcptool.New(with, mcptool.Options{StartTimeout: 20 * time.Second})
	t.Cleanup(func() { m.Close() })
	tools := map[string]tool.Tool{}
	for _, tl := range m.Tools(context.Background()) {
		tools[tl.Spec().Name] = tl
	}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			if i%2 == 0 {
				m.Update(context.Background(), without)
			} else {
				m.Update(context.Background(), with)
			}
		})
	}
	wg.Wait()
	st := m.Update(context.Background(), with)
	if len(st) != 1 || !st[0].Connected {
		t.Fatalf("status %+v", st)
	}
	if _, err := call(t, tools, "a__pid", `{}`); err != nil {
		t.Fatalf("tool after overlapping reloads: %v", err)
	}
}
