package mcptool_test

// Tests against third-party MCP servers from npm (the reference filesystem and everything
// servers) and small Node servers in interop/node that crash or misbehave on purpose.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
	"github.com/hermes-go/hermes/internal/interop"
)

// npmServers returns the configs of the filesystem server (allowed to read dir) and the
// everything server, both on stdio.
func npmServers(t *testing.T, n interop.Node, dir string) map[string]mcptool.ServerConfig {
	t.Helper()
	return map[string]mcptool.ServerConfig{
		"fs":         {Command: n.BinScript(t, "mcp-server-filesystem"), Args: []string{dir}},
		"everything": {Command: n.BinScript(t, "mcp-server-everything"), Args: []string{"stdio"}},
	}
}

// nodeScript is the config of a Node script from interop/node.
func nodeScript(n interop.Node, script string, env map[string]string) mcptool.ServerConfig {
	return mcptool.ServerConfig{Command: n.Bin, Args: []string{filepath.Join(n.Dir, script)}, Env: env}
}

// manage builds a Manager whose Close is checked at cleanup, and lists its tools.
func manage(t *testing.T, servers map[string]mcptool.ServerConfig, o mcptool.Options) (*mcptool.Manager, map[string]tool.Tool, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second // node start-up on a loaded machine
	}
	m := mcptool.New(servers, o)
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

func statusOf(t *testing.T, m *mcptool.Manager, name string) mcptool.Status {
	t.Helper()
	for _, st := range m.Status() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no status for %q in %+v", name, m.Status())
	return mcptool.Status{}
}

// rawToolList speaks JSON-RPC to a fresh instance of a server directly (no client library)
// and returns the tools it lists, keyed by name, each as its raw JSON.
func rawToolList(t *testing.T, cfg mcptool.ServerConfig) map[string]json.RawMessage {
	t.Helper()
	cmd := exec.Command(cfg.Command, cfg.Args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID != 2 {
			continue
		}
		tools := map[string]json.RawMessage{}
		for _, raw := range msg.Result.Tools {
			var head struct {
				Name string `json:"name"`
			}
			json.Unmarshal(raw, &head)
			tools[head.Name] = raw
		}
		return tools
	}
	t.Fatalf("no tools/list answer: %v", sc.Err())
	return nil
}

// sameJSON reports whether a and b encode the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func TestInteropListToolsOfNPMServers(t *testing.T) {
	n := interop.RequireNode(t)
	servers := npmServers(t, n, t.TempDir())
	m, tools, _ := manage(t, servers, mcptool.Options{})
	for _, want := range []string{"fs__read_text_file", "fs__write_file", "fs__list_directory", "everything__echo", "everything__get-sum", "everything__get-tiny-image", "everything__trigger-long-running-operation"} {
		if _, ok := tools[want]; !ok {
			t.Errorf("missing %s; have %v", want, slices.Sorted(func(yield func(string) bool) {
				for k := range tools {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
	for _, name := range []string{"fs", "everything"} {
		st := statusOf(t, m, name)
		if !st.Connected || st.Tools == 0 || st.Error != "" || st.PID <= 0 || st.Transport != "stdio" || len(st.Skipped) != 0 {
			t.Errorf("status %+v", st)
		}
	}
	// Every offered schema is the server's own, unchanged.
	for server, cfg := range servers {
		raw := rawToolList(t, cfg)
		if len(raw) == 0 {
			t.Fatalf("%s listed nothing", server)
		}
		for remote, entry := range raw {
			tl, ok := tools[mcptool.ToolName(server, remote)]
			if !ok {
				t.Errorf("%s: tool %s not offered", server, remote)
				continue
			}
			var e struct {
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
			}
			json.Unmarshal(entry, &e)
			spec := tl.Spec()
			if !sameJSON(spec.Parameters, e.InputSchema) {
				t.Errorf("%s: schema changed:\n server %s\n model  %s", spec.Name, e.InputSchema, spec.Parameters)
			}
			if e.Description != "" && spec.Description != e.Description {
				t.Errorf("%s: description %q, server said %q", spec.Name, spec.Description, e.Description)
			}
		}
	}
}

// TestInteropEngineTurn: the model (a fake OpenAI server) reads a file through the filesystem
// server and adds through the everything server, and its next request carries both results.
// Servers that never start are reported in the status and do not disturb the session.
func TestInteropEngineTurn(t *testing.T) {
	n := interop.RequireNode(t)
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("the launch code is 4417\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	servers := npmServers(t, n, dir)
	servers["missing"] = mcptool.ServerConfig{Command: filepath.Join(dir, "no-such-server")}
	servers["quitter"] = mcptool.ServerConfig{Command: n.Bin, Args: []string{"-e", `console.error("quitter: no licence key"); process.exit(2)`}}
	m, tools, _ := manage(t, servers, mcptool.Options{})
	reg := tool.NewRegistry()
	for _, tl := range tools {
		reg.Add(tl)
	}
	for name, want := range map[string]string{"missing": "no-such-server", "quitter": "no licence key"} {
		st := statusOf(t, m, name)
		if st.Connected || !strings.Contains(st.Error, want) {
			t.Errorf("status of a server that never started: %+v", st)
		}
	}

	srv := openaitest.New(t)
	eng := newEngine(t, srv, reg, nil, dir)
	srv.Enqueue(
		openaitest.ToolCalls(
			openaitest.Call{Name: "fs__read_text_file", Args: []string{`{"path":`, strconv.Quote(notes) + `}`}},
			openaitest.Call{Name: "everything__get-sum", Args: []string{`{"a":2,"b":40}`}},
		),
		openaitest.Text("The code is 4417 and the sum is 42."),
	)
	ctx := testCtx(t)
	s, err := eng.Create(ctx, engine.CreateOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	out := runTurn(t, s, "read the notes")
	if out.Status != engine.StatusCompleted || out.Text != "The code is 4417 and the sum is 42." {
		t.Fatalf("outcome %+v", out)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if first := string(reqs[0].Body); !strings.Contains(first, `"fs__read_text_file"`) || strings.Contains(first, "missing__") || strings.Contains(first, "quitter__") {
		t.Errorf("offered tools wrong: %.2000s", first)
	}
	second := string(reqs[1].Body)
	for _, want := range []string{"the launch code is 4417", "The sum of 2 and 40 is 42."} {
		if !strings.Contains(second, want) {
			t.Errorf("the model did not see %q: %s", want, second)
		}
	}
	// The session takes a second turn as usual.
	srv.Enqueue(openaitest.Text("still here"))
	if out := runTurn(t, s, "again"); out.Text != "still here" {
		t.Fatalf("second turn %+v", out)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newEngine builds an engine on a real badger store in a temp dir with the fake model.
func newEngine(t *testing.T, srv *openaitest.Server, reg *tool.Registry, appr policy.Approver, cwd string) *engine.Engine {
	t.Helper()
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1})},
		DefaultModel: "openai:fake-agent",
		Tools:        reg,
		Policy:       policy.Set{Approver: appr},
		Cwd:          cwd,
	})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	return eng
}

func runTurn(t *testing.T, s *engine.Session, text string) engine.Outcome {
	t.Helper()
	ctx := testCtx(t)
	adm, err := s.Submit(ctx, engine.Prompt{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Wait(ctx, adm.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInteropResultMapping: images, embedded text and blob resources, resource links,
// structured content and validation errors from the everything server.
func TestInteropResultMapping(t *testing.T) {
	n := interop.RequireNode(t)
	_, tools, _ := manage(t, map[string]mcptool.ServerConfig{"everything": npmServers(t, n, t.TempDir())["everything"]}, mcptool.Options{})
	cases := []struct {
		tool, args string
		want       []string
		isError    bool
	}{
		{"everything__echo", `{"message":"hi there"}`, []string{"Echo: hi there"}, false},
		{"everything__get-tiny-image", `{}`, []string{"Here's the image you requested:", "[image image/png, ", "bytes base64]", "The image above is the MCP logo."}, false},
		{"everything__get-resource-reference", `{"resourceType":"Text","resourceId":3}`, []string{"[resource demo://resource/dynamic/text/3 text/plain]\n", "You can access this resource using the URI"}, false},
		{"everything__get-resource-reference", `{"resourceType":"Blob","resourceId":4}`, []string{"[resource demo://resource/dynamic/blob/4 ", "bytes base64]"}, false},
		{"everything__get-resource-links", `{"count":2}`, []string{`[resource link demo://resource/dynamic/blob/1 "Blob Resource 1" text/plain]`, `[resource link demo://resource/dynamic/text/2 "Text Resource 2" text/plain]`}, false},
		{"everything__get-structured-content", `{"location":"New York"}`, []string{"temperature"}, false},
		{"everything__get-sum", `{"a":"two","b":3}`, []string{"a"}, true},
	}
	for _, c := range cases {
		r, err := call(t, tools, c.tool, c.args)
		if err != nil {
			t.Errorf("%s %s: %v", c.tool, c.args, err)
			continue
		}
		if r.IsError != c.isError {
			t.Errorf("%s %s: IsError %v: %s", c.tool, c.args, r.IsError, r.Content)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Content, w) {
				t.Errorf("%s %s: result lacks %q:\n%s", c.tool, c.args, w, r.Content)
			}
		}
		if strings.Contains(r.Content, "iVBORw0KGgo") {
			t.Errorf("%s: image bytes handed to the model as text", c.tool)
		}
	}
}

// signalListener accepts the connection the crash server's block tool makes once it is inside
// the call, and returns the pid it reports.
func signalListener(t *testing.T) (port string, inCall <-chan int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		ch <- pid
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, ch
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestInteropCrashAndRestart: a server that exits mid-call, and one killed mid-call, fail
// that call with ErrUnavailable (no hang) and are restarted by the next call; a restart that
// fails backs off instead of respawning on every call, and recovers once the server can start.
func TestInteropCrashAndRestart(t *testing.T) {
	n := interop.RequireNode(t)
	dir := t.TempDir()
	starts, broken := filepath.Join(dir, "starts"), filepath.Join(dir, "broken")
	port, inCall := signalListener(t)
	cfg := nodeScript(n, "mcp_crash.mjs", map[string]string{"MCP_CRASH_STARTS": starts, "MCP_CRASH_BROKEN": broken, "MCP_CRASH_SIGNAL_PORT": port})
	m, tools, _ := manage(t, map[string]mcptool.ServerConfig{"c": cfg}, mcptool.Options{})
	pidOf := func() string {
		t.Helper()
		r, err := call(t, tools, "c__pid", `{}`)
		if err != nil || r.IsError {
			t.Fatalf("pid: %+v %v", r, err)
		}
		return r.Content
	}
	pid1 := pidOf()
	if st := statusOf(t, m, "c"); strconv.Itoa(st.PID) != pid1 {
		t.Errorf("status pid %d, server says %s", st.PID, pid1)
	}

	// The server exits in the middle of the call.
	_, err := call(t, tools, "c__crash", `{}`)
	if !errors.Is(err, mcptool.ErrUnavailable) || !strings.Contains(err.Error(), "restarted on the next call") {
		t.Fatalf("crash mid-call: %v", err)
	}
	if st := statusOf(t, m, "c"); st.Connected || st.PID != 0 || st.Error == "" {
		t.Errorf("status after the crash: %+v", st)
	}
	pid2 := pidOf()
	if pid2 == pid1 {
		t.Fatalf("not restarted: pid %s both times", pid1)
	}

	// Killed from outside while it holds a call.
	done := make(chan error, 1)
	go func() {
		_, err := tools["c__block"].Call(context.Background(), tool.Call{Args: json.RawMessage(`{}`)}, &tool.Env{})
		done <- err
	}()
	var victim int
	select {
	case victim = <-inCall:
	case err := <-done:
		t.Fatalf("block returned before blocking: %v", err)
	}
	if strconv.Itoa(victim) != pid2 {
		t.Fatalf("block ran in pid %d, want %s", victim, pid2)
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, mcptool.ErrUnavailable) {
		t.Fatalf("killed mid-call: %v", err)
	}

	// The next start fails: the error carries the server's stderr, and an immediate retry is
	// refused without spawning it again.
	if err := os.WriteFile(broken, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := lines(t, starts)
	_, err = call(t, tools, "c__pid", `{}`)
	if !errors.Is(err, mcptool.ErrUnavailable) || !strings.Contains(err.Error(), "refusing to start") {
		t.Fatalf("failed restart: %v", err)
	}
	_, err = call(t, tools, "c__pid", `{}`)
	if !errors.Is(err, mcptool.ErrUnavailable) || !strings.Contains(err.Error(), "next start attempt in") {
		t.Fatalf("retry during backoff: %v", err)
	}
	if st := statusOf(t, m, "c"); st.Connected || !strings.Contains(st.Error, "refusing to start") {
		t.Errorf("status during backoff: %+v", st)
	}
	if after := lines(t, starts); after != before {
		t.Fatalf("the broken server was started %d times during the backoff", after-before)
	}

	// Once it can start again, a call after the backoff restarts it. The backoff is a second
	// here; poll (bounded) rather than assume its length.
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := call(t, tools, "c__pid", `{}`)
		if err == nil && !r.IsError {
			if r.Content == pid2 {
				t.Fatalf("pid %s after the kill", r.Content)
			}
			break
		}
		if !errors.Is(err, mcptool.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("no recovery: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestInteropMisbehavingServer: malformed tool schemas are skipped with a reason in the status
// while the server's other tools work; a huge result is capped and marked; bytes that are not
// UTF-8, a non-JSON line and a JSON-RPC error neither break the connection nor hang.
func TestInteropMisbehavingServer(t *testing.T) {
	n := interop.RequireNode(t)
	m, tools, logs := manage(t, map[string]mcptool.ServerConfig{"bad": nodeScript(n, "mcp_bad.mjs", nil)}, mcptool.Options{MaxResultBytes: 32 << 10})
	var offered []string
	for name := range tools {
		offered = append(offered, name)
	}
	slices.Sort(offered)
	if strings.Join(offered, ",") != "bad__binary,bad__garbage,bad__huge,bad__ok,bad__rpc_error" {
		t.Fatalf("offered %v", offered)
	}
	st := statusOf(t, m, "bad")
	if !st.Connected || st.Tools != 5 || len(st.Skipped) != 4 {
		t.Fatalf("status %+v", st)
	}
	skipped := strings.Join(st.Skipped, "\n")
	for _, want := range []string{`string_schema: malformed input schema: input schema type is string, want "object"`, "array_properties: malformed input schema: input schema properties is not an object", "numeric_type: malformed input schema", "no_schema: malformed input schema: no input schema"} {
		if !strings.Contains(skipped, want) {
			t.Errorf("skipped lacks %q:\n%s", want, skipped)
		}
	}
	if !strings.Contains(logs.String(), "array_properties") {
		t.Errorf("skipped tool not logged: %s", logs)
	}

	if r, err := call(t, tools, "bad__ok", `{"text":"fine"}`); err != nil || r.Content != "ok: fine" {
		t.Fatalf("ok: %+v %v", r, err)
	}
	r, err := call(t, tools, "bad__huge", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Content) > 33<<10 || !strings.HasSuffix(r.Content, fmt.Sprintf("[output truncated: %d of %d bytes shown]", 32<<10, 4<<20)) {
		t.Fatalf("huge result: %d bytes, tail %q", len(r.Content), r.Content[max(0, len(r.Content)-80):])
	}
	r, err = call(t, tools, "bad__binary", `{}`)
	if err != nil || !utf8.ValidString(r.Content) || !strings.HasPrefix(r.Content, "before ") || !strings.HasSuffix(r.Content, " after") || !strings.Contains(r.Content, "\uFFFD") {
		t.Fatalf("binary: %q %v", r.Content, err)
	}
	if r, err := call(t, tools, "bad__garbage", `{}`); err != nil || r.Content != "after garbage" {
		t.Fatalf("garbage: %+v %v", r, err)
	}
	if _, err := call(t, tools, "bad__rpc_error", `{}`); err == nil || !strings.Contains(err.Error(), "exploded") || errors.Is(err, mcptool.ErrUnavailable) {
		t.Fatalf("rpc error: %v", err)
	}
	if r, err := call(t, tools, "bad__ok", `{"text":"still"}`); err != nil || r.Content != "ok: still" {
		t.Fatalf("after the bad calls: %+v %v", r, err)
	}
	if st := statusOf(t, m, "bad"); !st.Connected {
		t.Fatalf("connection lost: %+v", st)
	}
}

// TestInteropCloseReapsChildren: after Close no server process is left.
func TestInteropCloseReapsChildren(t *testing.T) {
	n := interop.RequireNode(t)
	servers := npmServers(t, n, t.TempDir())
	servers["bad"] = nodeScript(n, "mcp_bad.mjs", nil)
	m := mcptool.New(servers, mcptool.Options{StartTimeout: 60 * time.Second})
	if len(m.Tools(context.Background())) == 0 {
		t.Fatal("no tools")
	}
	var pids []int
	for _, st := range m.Status() {
		if st.PID <= 0 {
			t.Fatalf("no pid: %+v", st)
		}
		pids = append(pids, st.PID)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		// Close waited for each child, so it is reaped: no such process.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d after Close: %v", pid, err)
		}
	}
	for _, st := range m.Status() {
		if st.Connected || st.PID != 0 {
			t.Errorf("status after Close: %+v", st)
		}
	}
}

// TestInteropStreamableHTTP: the everything server over streamable HTTP, behind a proxy that
// records the configured header.
func TestInteropStreamableHTTP(t *testing.T) {
	n := interop.RequireNode(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close() // the server binds it; a race with another process would fail the start below
	cmd := exec.Command(n.BinScript(t, "mcp-server-everything"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, waited := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(ready)
				break
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(waited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-waited
	})
	select {
	case <-ready:
	case <-waited:
		t.Fatal("the everything server exited before listening")
	}
	target, _ := url.Parse("http://127.0.0.1:" + port)
	var mu sync.Mutex
	var tokens []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("Authorization"))
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	})}
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		front.Serve(fl)
		close(served)
	}()
	t.Cleanup(func() {
		front.Close()
		<-served
	})
	cfg := mcptool.ServerConfig{URL: "http://" + fl.Addr().String() + "/mcp", Headers: map[string]string{"Authorization": "Bearer t0ken"}}
	m, tools, _ := manage(t, map[string]mcptool.ServerConfig{"web": cfg}, mcptool.Options{})
	r, err := call(t, tools, "web__get-sum", `{"a":1,"b":2}`)
	if err != nil || r.Content != "The sum of 1 and 2 is 3." {
		t.Fatalf("get-sum over HTTP: %+v %v", r, err)
	}
	if st := statusOf(t, m, "web"); !st.Connected || st.Transport != "http" || st.PID != 0 || st.Tools == 0 {
		t.Errorf("status %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tok := range tokens {
		if tok != "Bearer t0ken" {
			t.Fatalf("a request lacked the configured header: %q", tokens)
		}
	}
}

// TestInteropCrashDuringATurn: the server exits in the middle of a call the model made; the
// turn does not hang, the model sees the failure as the tool result, and its next call to the
// server (same turn) runs on a restarted process.
func TestInteropCrashDuringATurn(t *testing.T) {
	n := interop.RequireNode(t)
	_, tools, _ := manage(t, map[string]mcptool.ServerConfig{"c": nodeScript(n, "mcp_crash.mjs", nil)}, mcptool.Options{})
	reg := tool.NewRegistry(tools["c__crash"], tools["c__pid"])
	srv := openaitest.New(t)
	eng := newEngine(t, srv, reg, nil, t.TempDir())
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_crash", Name: "c__crash", Args: []string{`{}`}}),
		openaitest.ToolCalls(openaitest.Call{ID: "call_pid", Name: "c__pid", Args: []string{`{}`}}),
		openaitest.Text("recovered"),
	)
	s, err := eng.Create(testCtx(t), engine.CreateOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if out := runTurn(t, s, "crash it"); out.Status != engine.StatusCompleted || out.Text != "recovered" {
		t.Fatalf("outcome %+v", out)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !strings.Contains(string(reqs[1].Body), "stopped during the call") {
		t.Errorf("the model did not see the crash: %s", reqs[1].Body)
	}
	var body struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    string `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[2].Body, &body); err != nil {
		t.Fatal(err)
	}
	last := body.Messages[len(body.Messages)-1]
	if pid, err := strconv.Atoi(last.Content); last.ToolCallID != "call_pid" || err != nil || pid <= 0 {
		t.Fatalf("the call after the crash: %+v", last)
	}
}
