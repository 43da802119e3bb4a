package acp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
	"github.com/hermes-go/hermes/transports/acp"
)

// TestMain lets the test binary act as a stdio MCP server in a child process, so the
// adapter attaches a real subprocess.
func TestMain(m *testing.M) {
	if os.Getenv("HERMES_ACP_TEST_MCP") == "" {
		os.Exit(m.Run())
	}
	if f := os.Getenv("HERMES_ACP_TEST_MCP_PIDFILE"); f != "" {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := server.ServeStdio(mcpServer("stdio")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func mcpServer(label string) *server.MCPServer {
	s := server.NewMCPServer("acptest", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo the text."), mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			t, _ := req.RequireString("text")
			return mcp.NewToolResultText(label + " echo: " + t), nil
		})
	return s
}

// askAll is an `ask` approval policy: every call needs the user.
type askAll struct{}

func (askAll) Approve(context.Context, policy.ApprovalInput) (policy.ApprovalDecision, error) {
	return policy.ApprovalDecision{Decision: policy.Ask, Reason: "ask everything"}, nil
}

// fsClient is a client that advertises the fs methods and keeps editor buffers.
type fsClient struct {
	client
	fmu      sync.Mutex
	buffers  map[string]string
	reads    []sdk.ReadTextFileRequest
	writes   []sdk.WriteTextFileRequest
	writeErr error
	block    chan struct{} // when set, writes wait for it (or the request's end)
}

func (c *fsClient) ReadTextFile(_ context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	c.reads = append(c.reads, p)
	text, ok := c.buffers[p.Path]
	if !ok {
		return sdk.ReadTextFileResponse{}, &sdk.RequestError{Code: -32002, Message: "Resource not found"}
	}
	return sdk.ReadTextFileResponse{Content: text}, nil
}

func (c *fsClient) WriteTextFile(ctx context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	c.fmu.Lock()
	c.writes = append(c.writes, p)
	block, werr := c.block, c.writeErr
	c.fmu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return sdk.WriteTextFileResponse{}, errors.New("gave up")
	}
	if werr != nil {
		return sdk.WriteTextFileResponse{}, werr
	}
	c.fmu.Lock()
	defer c.fmu.Unlock()
	c.buffers[p.Path] = p.Content
	return sdk.WriteTextFileResponse{}, nil
}

// connectClient serves eng to an SDK client side built around cl.
func connectClient(t *testing.T, eng *engine.Engine, cl sdk.Client, o acp.Options) (*sdk.ClientSideConnection, chan error) {
	t.Helper()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := acp.Serve(context.Background(), eng, c2aR, a2cW, o)
		a2cW.Close()
		done <- err
	}()
	cc := sdk.NewClientSideConnection(cl, c2aW, a2cR)
	cc.SetLogger(quiet)
	t.Cleanup(func() {
		c2aW.Close()
		<-done
	})
	return cc, done
}

func fsInit(t *testing.T, ctx context.Context, cc *sdk.ClientSideConnection, read, write bool) {
	t.Helper()
	_, err := cc.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{Fs: sdk.FileSystemCapabilities{ReadTextFile: read, WriteTextFile: write}}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestClientFileSystemServesFileTools(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	a, b := filepath.Join(cwd, "a.txt"), filepath.Join(cwd, "b.txt")
	if err := os.WriteFile(a, []byte("saved on disk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cl := &fsClient{buffers: map[string]string{a: "unsaved buffer line\n"}}
	cl.decide = choose(acp.OptAllowSession) // the default mode shows each edit for approval
	cc, _ := connectClient(t, eng, cl, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	fsInit(t, ctx, cc, true, true)
	s, err := cc.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "r1", Name: "read_file", Args: []string{`{"path":"a.txt"}`}}),
		openaitest.ToolCalls(openaitest.Call{ID: "w1", Name: "write_file", Args: []string{`{"path":"b.txt","content":"written by the agent\n"}`}}),
		openaitest.Text("done"),
	)
	r, err := cc.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("edit")}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", r, err)
	}
	cl.fmu.Lock()
	defer cl.fmu.Unlock()
	if len(cl.reads) == 0 || cl.reads[0].Path != a || cl.reads[0].SessionId != s.SessionId {
		t.Fatalf("fs/read_text_file calls: %+v", cl.reads)
	}
	if len(cl.writes) != 1 || cl.writes[0].Path != b || cl.writes[0].Content != "written by the agent\n" || cl.writes[0].SessionId != s.SessionId {
		t.Fatalf("fs/write_text_file calls: %+v", cl.writes)
	}
	if _, err := os.Stat(b); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the client handles writes, yet b.txt reached the disk: %v", err)
	}
	// The model saw the unsaved buffer, not the disk.
	reqs := srv.Requests()
	body := string(reqs[1].Body)
	if !strings.Contains(body, "unsaved buffer line") || strings.Contains(body, "saved on disk") {
		t.Fatalf("second model request: %s", body)
	}
	tr := summarize(cl.take())
	tr.assertClosed(t)
	if st := tr.status["w1"]; st[len(st)-1] != sdk.ToolCallStatusCompleted {
		t.Fatalf("write statuses %v", st)
	}
}

func TestClientFileSystemOnlyForAdvertisedMethods(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	a := filepath.Join(cwd, "a.txt")
	if err := os.WriteFile(a, []byte("disk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cl := &fsClient{buffers: map[string]string{a: "buffer\n"}}
	cl.decide = choose(acp.OptAllowSession) // the default mode shows each edit for approval
	cc, _ := connectClient(t, eng, cl, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	fsInit(t, ctx, cc, true, false) // reads only: writes go to disk
	s, err := cc.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "w1", Name: "write_file", Args: []string{`{"path":"b.txt","content":"B"}`}}), openaitest.Text("ok"))
	if _, err := cc.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("w")}}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(cwd, "b.txt")); err != nil || string(got) != "B" {
		t.Fatalf("disk write: %q %v", got, err)
	}
	cl.fmu.Lock()
	defer cl.fmu.Unlock()
	if len(cl.writes) != 0 {
		t.Fatalf("writes sent to a client that does not advertise them: %+v", cl.writes)
	}
}

func TestClientFileSystemFailuresAreToolErrors(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	cl := &fsClient{buffers: map[string]string{}, writeErr: &sdk.RequestError{Code: -32603, Message: "Internal error", Data: map[string]any{"error": "the user rejected the edit"}}}
	cl.decide = choose(acp.OptAllowSession) // the default mode shows each edit for approval
	cc, _ := connectClient(t, eng, cl, acp.Options{Logger: quiet, FSTimeout: 50 * time.Millisecond})
	ctx := testCtx(t)
	fsInit(t, ctx, cc, true, true)
	s, err := cc.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "w1", Name: "write_file", Args: []string{`{"path":"b.txt","content":"B"}`}}), openaitest.Text("ok"))
	if _, err := cc.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("w")}}); err != nil {
		t.Fatal(err)
	}
	if body := string(srv.Requests()[1].Body); !strings.Contains(body, "the user rejected the edit") {
		t.Fatalf("the model was not told why: %s", body)
	}
	tr := summarize(cl.take())
	if st := tr.status["w1"]; st[len(st)-1] != sdk.ToolCallStatusFailed {
		t.Fatalf("statuses %v", st)
	}
	// A client that never answers fails the call when FSTimeout passes; the turn goes on.
	release := make(chan struct{})
	defer close(release)
	cl.fmu.Lock()
	cl.block = release
	cl.fmu.Unlock()
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "w2", Name: "write_file", Args: []string{`{"path":"c.txt","content":"C"}`}}), openaitest.Text("ok"))
	if r, err := cc.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("w")}}); err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt with a silent client: %+v %v", r, err)
	}
	reqs := srv.Requests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "did not answer in time") {
		t.Fatalf("the model was not told: %s", body)
	}
	for _, f := range []string{"b.txt", "c.txt"} {
		if _, err := os.Stat(filepath.Join(cwd, f)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s reached the disk", f)
		}
	}
}

// modelTools lists the tool names of the i-th model request.
func modelTools(t *testing.T, srv *openaitest.Server, i int) []string {
	t.Helper()
	body := string(srv.Requests()[i].Body)
	var out []string
	for _, part := range strings.Split(body, `"name":"`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestMCPServersAttachPerSessionAndAsk(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngineWith(t, p, "", func(c *engine.Config) { c.Policy.Approver = askAll{} })
	httpSrv := httptest.NewServer(server.NewStreamableHTTPServer(mcpServer("http")))
	t.Cleanup(httpSrv.Close)
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	c.cl.decide = choose(acp.OptAllowOnce)
	ctx := testCtx(t)
	if _, err := c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	servers := []sdk.McpServer{
		{Stdio: &sdk.McpServerStdio{Name: "local", Command: os.Args[0], Args: []string{"-test.run=^$"},
			Env: []sdk.EnvVariable{{Name: "HERMES_ACP_TEST_MCP", Value: "1"}, {Name: "HERMES_ACP_TEST_MCP_PIDFILE", Value: pidFile}}}},
		{Http: &sdk.McpServerHttpInline{Name: "web", Type: "http", Url: httpSrv.URL, Headers: []sdk.HttpHeader{}}},
		{Stdio: &sdk.McpServerStdio{Name: "broken", Command: "/nonexistent/mcp-server", Args: []string{}, Env: []sdk.EnvVariable{}}},
	}
	s, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: servers})
	if err != nil {
		t.Fatalf("a server that cannot start failed the session: %v", err)
	}
	other := c.newSessionNoInit(t, ctx)

	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "m1", Name: "local__echo", Args: []string{`{"text":"hi"}`}}),
		openaitest.ToolCalls(openaitest.Call{ID: "m2", Name: "web__echo", Args: []string{`{"text":"there"}`}}),
		openaitest.Text("done"),
	)
	if stop := c.prompt(t, ctx, s.SessionId, "use the tools"); stop != sdk.StopReasonEndTurn {
		t.Fatalf("stop %v", stop)
	}
	tr := summarize(c.cl.take())
	tr.assertClosed(t)
	if !strings.Contains(tr.message, "MCP servers are not available") || !strings.Contains(tr.message, "broken:") || !strings.HasSuffix(tr.message, "done") {
		t.Fatalf("notice and answer: %q", tr.message)
	}
	names := modelTools(t, srv, 0)
	if !slices.Contains(names, "local__echo") || !slices.Contains(names, "web__echo") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "broken__") }) {
		t.Fatalf("tools offered: %v", names)
	}
	body := string(srv.Requests()[2].Body)
	if !strings.Contains(body, "stdio echo: hi") || !strings.Contains(body, "http echo: there") {
		t.Fatalf("MCP results did not reach the model: %s", body)
	}
	// The ask policy covered both MCP calls, each tied to its visible tool call.
	c.cl.mu.Lock()
	var asked []string
	for _, pr := range c.cl.perms {
		asked = append(asked, string(pr.ToolCall.ToolCallId))
	}
	c.cl.mu.Unlock()
	if strings.Join(asked, ",") != "m1,m2" {
		t.Fatalf("permission requests for %v", asked)
	}
	// The notice is given once.
	srv.Enqueue(openaitest.Text("again"))
	c.prompt(t, ctx, s.SessionId, "again")
	if tr := summarize(c.cl.take()); tr.message != "again" {
		t.Fatalf("second prompt: %q", tr.message)
	}

	// Another session of the same connection has none of them.
	srv.Enqueue(openaitest.Text("plain"))
	c.prompt(t, ctx, other, "hi")
	reqs := srv.Requests()
	if names := modelTools(t, srv, len(reqs)-1); slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "__") }) {
		t.Fatalf("other session offered %v", names)
	}

	// Closing the session stops its servers: the stdio child is reaped.
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(raw))
	if !alive(pid) {
		t.Fatalf("server %d not running before close", pid)
	}
	if _, err := c.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: s.SessionId}); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("MCP server %d still running after session/close", pid)
	}
}

func TestMCPServersStopWithTheConnection(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := acp.Serve(context.Background(), eng, c2aR, a2cW, acp.Options{Logger: quiet})
		a2cW.Close()
		done <- err
	}()
	cc := sdk.NewClientSideConnection(&client{}, c2aW, a2cR)
	cc.SetLogger(quiet)
	ctx := testCtx(t)
	if _, err := cc.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	s, err := cc.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{{Stdio: &sdk.McpServerStdio{
		Name: "local", Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []sdk.EnvVariable{{Name: "HERMES_ACP_TEST_MCP", Value: "1"}, {Name: "HERMES_ACP_TEST_MCP_PIDFILE", Value: pidFile}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// A prompt waits for the servers, so the child runs once it is answered.
	srv.Enqueue(openaitest.Text("ok"))
	if _, err := cc.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("hi")}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(raw))
	if !alive(pid) {
		t.Fatalf("server %d not running", pid)
	}
	c2aW.Close() // the editor goes away
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("MCP server %d still running after the connection ended", pid)
	}
}

func TestTodoBecomesPlan(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "t1", Name: "todo", Args: []string{`{"todos":[{"id":"1","content":"read","status":"completed","priority":"high"},{"id":"2","content":"write","status":"in_progress"},{"id":"3","content":"golf","status":"cancelled","priority":"low"}]}`}}),
		openaitest.Text("planned"),
	)
	c.prompt(t, ctx, id, "plan it")
	want := []sdk.PlanEntry{
		{Content: "read", Priority: sdk.PlanEntryPriorityHigh, Status: sdk.PlanEntryStatusCompleted},
		{Content: "write", Priority: sdk.PlanEntryPriorityMedium, Status: sdk.PlanEntryStatusInProgress},
		{Content: "[cancelled] golf", Priority: sdk.PlanEntryPriorityLow, Status: sdk.PlanEntryStatusCompleted},
	}
	plans := func(ns []sdk.SessionNotification) [][]sdk.PlanEntry {
		var out [][]sdk.PlanEntry
		for _, n := range ns {
			if n.Update.Plan != nil {
				out = append(out, n.Update.Plan.Entries)
			}
		}
		return out
	}
	got := plans(c.cl.take())
	if len(got) != 1 || !samePlan(got[0], want) {
		t.Fatalf("plan updates: %+v", got)
	}
	// A loaded session shows its plan again.
	c2 := connect(t, eng, cwd, acp.Options{Logger: quiet})
	if _, err := c2.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if got := plans(c2.cl.take()); len(got) != 1 || !samePlan(got[0], want) {
		t.Fatalf("replayed plan: %+v", got)
	}
}

func TestServeLazyAnswersInitializeBeforeTheEngine(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			_, p := fakeProvider(t)
			eng, cwd := newEngine(t, p, "")
			release := make(chan struct{})
			open := func() (*engine.Engine, error) {
				<-release
				if fail {
					return nil, errors.New("store: directory locked by another process")
				}
				return eng, nil
			}
			c2aR, c2aW := io.Pipe()
			a2cR, a2cW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				err := acp.ServeLazy(context.Background(), open, c2aR, a2cW, acp.Options{Logger: quiet})
				a2cW.Close()
				done <- err
			}()
			cc := sdk.NewClientSideConnection(&client{}, c2aW, a2cR)
			cc.SetLogger(quiet)
			ctx := testCtx(t)
			// open is still blocked: initialize and authenticate do not wait for it.
			if _, err := cc.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
				t.Fatal(err)
			}
			if _, err := cc.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: acp.AuthAgent}); err != nil {
				t.Fatal(err)
			}
			close(release)
			_, err := cc.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
			_, lerr := cc.ListSessions(ctx, sdk.ListSessionsRequest{})
			if fail {
				for _, e := range []error{err, lerr} {
					var re *sdk.RequestError
					if !errors.As(e, &re) || re.Code != -32603 || !strings.Contains(re.Error(), "directory locked") {
						t.Fatalf("with a failed store: %v", e)
					}
				}
			} else if err != nil || lerr != nil {
				t.Fatalf("new %v list %v", err, lerr)
			}
			c2aW.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// newSessionNoInit opens a session on an initialized connection.
func (c *conn) newSessionNoInit(t *testing.T, ctx context.Context) sdk.SessionId {
	t.Helper()
	r, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: c.cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	return r.SessionId
}

func samePlan(a, b []sdk.PlanEntry) bool {
	return slices.EqualFunc(a, b, func(x, y sdk.PlanEntry) bool {
		return x.Content == y.Content && x.Priority == y.Priority && x.Status == y.Status
	})
}

func TestCancelWhileMCPServersStart(t *testing.T) {
	_, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	started, release := make(chan struct{}, 1), make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		select {
		case started <- struct{}{}:
		default:
		}
		select { // never answers initialize while the test runs
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hang.Close)
	defer close(release)
	c := connect(t, eng, cwd, acp.Options{Logger: quiet, MCP: mcptool.Options{StartTimeout: 10 * time.Minute}})
	ctx := testCtx(t)
	if _, err := c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{
		{Http: &sdk.McpServerHttpInline{Name: "slow", Type: "http", Url: hang.URL, Headers: []sdk.HttpHeader{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	res := make(chan sdk.PromptResponse, 1)
	go func() {
		r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("hi")}})
		if err != nil {
			t.Error(err)
		}
		res <- r
	}()
	// The prompt may not be waiting yet when a cancel arrives; the user would press stop
	// again, and so does the test.
	for {
		if err := c.Cancel(ctx, sdk.CancelNotification{SessionId: s.SessionId}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-res:
			if r.StopReason != sdk.StopReasonCancelled {
				t.Fatalf("stop reason %v", r.StopReason)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
