package acp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/engine/tool/danger"
	"github.com/hermes-go/hermes/transports/acp"
)

func dangerCheck(cmd string) tool.Verdict {
	r := danger.Check(cmd, danger.Options{})
	v := tool.Verdict{Blocked: r.Hardline, Reason: r.Reason, Command: cmd}
	for _, m := range r.Matches {
		v.Patterns = append(v.Patterns, m.Key)
	}
	return v
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testCtx bounds a whole test so a protocol bug fails instead of hanging.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newEngine is a real engine on a badger directory with the real built-in tools, talking to
// p (a fake OpenAI server when nil is given to newFake).
func newEngine(t testing.TB, p model.Provider, busy string) (*engine.Engine, string) {
	return newEngineWith(t, p, busy, nil)
}

func newEngineWith(t testing.TB, p model.Provider, busy string, mut func(*engine.Config)) (*engine.Engine, string) {
	t.Helper()
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	cfg := engine.Config{
		Store: st, Providers: map[string]model.Provider{"openai": p}, DefaultModel: "openai:fake-agent",
		Tools: tool.NewRegistry(builtin.Defaults(dangerCheck)...), Cwd: cwd,
		Policy: policy.Set{Approver: policy.Defaults{}, Busy: policy.Defaults{BusyMode: busy}},
	}
	if mut != nil {
		mut(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	return eng, cwd
}

func fakeProvider(t testing.TB) (*openaitest.Server, model.Provider) {
	srv := openaitest.New(t)
	return srv, openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1})
}

// client records what the agent sends and answers permission requests with decide.
type client struct {
	mu      sync.Mutex
	updates []sdk.SessionNotification
	perms   []sdk.RequestPermissionRequest
	decide  func(sdk.RequestPermissionRequest) sdk.RequestPermissionResponse
	// decideCtx, when set, answers instead of decide and may fail or block.
	decideCtx func(context.Context) (sdk.RequestPermissionResponse, error)
}

func (c *client) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n)
	return nil
}

func (c *client) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.perms = append(c.perms, p)
	decide, decideCtx := c.decide, c.decideCtx
	c.mu.Unlock()
	if decideCtx != nil {
		return decideCtx(ctx)
	}
	if decide == nil {
		return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}, nil
	}
	return decide(p), nil
}

func choose(id string) func(sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
	return func(sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
		return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: sdk.PermissionOptionId(id), Outcome: "selected"}}}
	}
}

func (c *client) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound("fs/read_text_file")
}
func (c *client) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound("fs/write_text_file")
}
func (c *client) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound("terminal/create")
}
func (c *client) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound("terminal/kill")
}
func (c *client) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound("terminal/output")
}
func (c *client) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound("terminal/release")
}
func (c *client) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound("terminal/wait_for_exit")
}

func (c *client) take() []sdk.SessionNotification {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.updates
	c.updates = nil
	return out
}

// conn is the real adapter served over in-memory pipes to the SDK's client side.
type conn struct {
	*sdk.ClientSideConnection
	cl   *client
	cwd  string
	eng  *engine.Engine
	done chan error
}

func connect(t testing.TB, eng *engine.Engine, cwd string, o acp.Options) *conn {
	t.Helper()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := acp.Serve(context.Background(), eng, c2aR, a2cW, o)
		a2cW.Close()
		done <- err
	}()
	cl := &client{}
	cc := sdk.NewClientSideConnection(cl, c2aW, a2cR)
	cc.SetLogger(quiet)
	t.Cleanup(func() {
		c2aW.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &conn{ClientSideConnection: cc, cl: cl, cwd: cwd, eng: eng, done: done}
}

func (c *conn) newSession(t testing.TB, ctx context.Context) sdk.SessionId {
	t.Helper()
	if _, err := c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	r, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: c.cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	return r.SessionId
}

func (c *conn) prompt(t testing.TB, ctx context.Context, id sdk.SessionId, text string) sdk.StopReason {
	t.Helper()
	r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
	if err != nil {
		t.Fatal(err)
	}
	return r.StopReason
}

// transcript summarizes updates: message text, thought text, and per tool call its statuses.
type transcript struct {
	message, thought, user string
	calls                  []string
	status                 map[string][]sdk.ToolCallStatus
	content                map[string][]sdk.ToolCallContent
	configUpdates          int
	modes                  []string // current_mode_update ids, in order
}

func summarize(ns []sdk.SessionNotification) transcript {
	tr := transcript{status: map[string][]sdk.ToolCallStatus{}, content: map[string][]sdk.ToolCallContent{}}
	for _, n := range ns {
		u := n.Update
		switch {
		case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
			tr.message += u.AgentMessageChunk.Content.Text.Text
		case u.AgentThoughtChunk != nil && u.AgentThoughtChunk.Content.Text != nil:
			tr.thought += u.AgentThoughtChunk.Content.Text.Text
		case u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil:
			tr.user += u.UserMessageChunk.Content.Text.Text
		case u.ToolCall != nil:
			id := string(u.ToolCall.ToolCallId)
			tr.calls = append(tr.calls, id)
			tr.status[id] = append(tr.status[id], u.ToolCall.Status)
			tr.content[id] = append(tr.content[id], u.ToolCall.Content...)
		case u.ToolCallUpdate != nil:
			id := string(u.ToolCallUpdate.ToolCallId)
			if u.ToolCallUpdate.Status != nil {
				tr.status[id] = append(tr.status[id], *u.ToolCallUpdate.Status)
			}
			tr.content[id] = append(tr.content[id], u.ToolCallUpdate.Content...)
		case u.ConfigOptionUpdate != nil:
			tr.configUpdates++
		case u.CurrentModeUpdate != nil:
			tr.modes = append(tr.modes, string(u.CurrentModeUpdate.CurrentModeId))
		}
	}
	return tr
}

// assertClosed fails unless every announced tool call ended in a terminal status.
func (tr transcript) assertClosed(t *testing.T) {
	t.Helper()
	for _, id := range tr.calls {
		st := tr.status[id]
		last := st[len(st)-1]
		if last != sdk.ToolCallStatusCompleted && last != sdk.ToolCallStatusFailed {
			t.Errorf("tool call %s left in %v (statuses %v)", id, last, st)
		}
	}
}

func TestInitializeAdvertisesCapabilitiesAndAuth(t *testing.T) {
	_, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	notReady := false
	c := connect(t, eng, cwd, acp.Options{Ready: func() error {
		if notReady {
			return acp.ErrNotReady
		}
		return nil
	}})
	ctx := testCtx(t)
	r, err := c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	caps := r.AgentCapabilities
	if r.ProtocolVersion != 1 || !caps.LoadSession || !caps.PromptCapabilities.Image || caps.PromptCapabilities.Audio ||
		caps.SessionCapabilities.List == nil || caps.SessionCapabilities.Fork == nil || caps.SessionCapabilities.Resume == nil || caps.SessionCapabilities.Close == nil {
		t.Fatalf("capabilities: %+v", r)
	}
	authIDs := func(r sdk.InitializeResponse) string {
		var ids []string
		for _, m := range r.AuthMethods {
			switch {
			case m.Agent != nil:
				ids = append(ids, m.Agent.Id)
			case m.Terminal != nil:
				ids = append(ids, m.Terminal.Id+strings.Join(m.Terminal.Args, ","))
			}
		}
		return strings.Join(ids, " ")
	}
	// The terminal method is offered only to a client that says it can run terminal methods.
	if got := authIDs(r); got != "agent" {
		t.Fatalf("auth methods without clientCapabilities.auth.terminal: %v", got)
	}
	r, err = c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{Auth: sdk.AuthCapabilities{Terminal: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := authIDs(r); got != "agent hermes-setup--setup" {
		t.Fatalf("auth methods %v", got)
	}
	if _, err := c.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: acp.AuthAgent}); err != nil {
		t.Fatalf("authenticate with a provider: %v", err)
	}
	notReady = true
	_, err = c.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: acp.AuthAgent})
	if re, ok := err.(*sdk.RequestError); !ok || re.Code != -32000 {
		t.Fatalf("authenticate without a provider: %v", err)
	}
	_, err = c.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: "nope"})
	if re, ok := err.(*sdk.RequestError); !ok || re.Code != -32602 {
		t.Fatalf("unknown auth method: %v", err)
	}
}

func TestPromptStreamsTextAndThoughtBeforeResponse(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	srv.Enqueue(openaitest.Response{Reasoning: []string{"let me ", "think"}, Text: []string{"Hel", "lo ", "there"}})
	r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("hi")}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", r, err)
	}
	if u := r.Usage; u == nil || u.InputTokens != 12 || u.OutputTokens != 7 || u.TotalTokens != 19 {
		t.Fatalf("usage %+v", r.Usage)
	}
	// The SDK client processes every notification sent before a response before returning
	// it, so the whole turn must be here now.
	tr := summarize(c.cl.take())
	if tr.message != "Hello there" || tr.thought != "let me think" {
		t.Fatalf("message %q thought %q", tr.message, tr.thought)
	}
}

func TestToolPermissionOptions(t *testing.T) {
	for _, tc := range []struct {
		option  string
		ran     bool
		askedAt int // how many permission requests after the second identical call
	}{
		{acp.OptAllowOnce, true, 2},
		{acp.OptAllowSession, true, 1},
		{acp.OptDeny, false, 2},
		{"bogus-option", false, 2},
	} {
		t.Run(tc.option, func(t *testing.T) {
			srv, p := fakeProvider(t)
			eng, cwd := newEngine(t, p, "")
			c := connect(t, eng, cwd, acp.Options{})
			c.cl.decide = choose(tc.option)
			ctx := testCtx(t)
			id := c.newSession(t, ctx)
			build := filepath.Join(cwd, "build")
			if err := os.Mkdir(build, 0o755); err != nil {
				t.Fatal(err)
			}
			srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("done"))
			if sr := c.prompt(t, ctx, id, "clean up"); sr != sdk.StopReasonEndTurn {
				t.Fatalf("stop reason %q", sr)
			}
			tr := summarize(c.cl.take())
			tr.assertClosed(t)
			if len(tr.calls) != 1 || tr.calls[0] != "call_rm" {
				t.Fatalf("tool calls %v", tr.calls)
			}
			c.cl.mu.Lock()
			perm := c.cl.perms[0]
			c.cl.mu.Unlock()
			if perm.ToolCall.ToolCallId != "call_rm" || perm.SessionId != id {
				t.Fatalf("permission not tied to the visible call: %+v", perm.ToolCall)
			}
			var opts []string
			for _, o := range perm.Options {
				opts = append(opts, string(o.OptionId))
			}
			if !strings.HasPrefix(strings.Join(opts, ","), "allow_once,allow_session") || opts[len(opts)-1] != "deny" {
				t.Fatalf("options %v", opts)
			}
			st := tr.status["call_rm"]
			want := sdk.ToolCallStatusFailed
			if tc.ran {
				want = sdk.ToolCallStatusCompleted
			}
			// pending while permission is asked, in_progress only once allowed, never back.
			wantSt := []sdk.ToolCallStatus{sdk.ToolCallStatusPending, sdk.ToolCallStatusFailed}
			if tc.ran {
				wantSt = []sdk.ToolCallStatus{sdk.ToolCallStatusPending, sdk.ToolCallStatusInProgress, want}
			}
			if !slices.Equal(st, wantSt) {
				t.Fatalf("statuses %v, want %v", st, wantSt)
			}
			if _, err := os.Stat(build); (err == nil) == tc.ran {
				t.Fatalf("ran=%v but build exists=%v", tc.ran, err == nil)
			}
			// The same command again: a session grant must not ask twice.
			_ = os.Mkdir(build, 0o755)
			srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "call_rm2", Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("again"))
			c.prompt(t, ctx, id, "again")
			summarize(c.cl.take()).assertClosed(t)
			c.cl.mu.Lock()
			n := len(c.cl.perms)
			c.cl.mu.Unlock()
			if n != tc.askedAt {
				t.Fatalf("%d permission requests, want %d", n, tc.askedAt)
			}
		})
	}
}

func TestCancelDuringPermissionClosesEveryCall(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	asked := make(chan struct{})
	release := make(chan struct{})
	c.cl.decide = func(sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
		close(asked)
		<-release // a client that answers only after cancelling, as the protocol asks
		return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}
	}
	srv.Enqueue(openaitest.ToolCalls(
		openaitest.Call{ID: "call_ls", Name: "terminal", Args: []string{`{"command":"echo hi"}`}},
		openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r /tmp/nothing-here"}`}},
	), openaitest.Text("never"))
	type res struct {
		r   sdk.PromptResponse
		err error
	}
	got := make(chan res, 1)
	go func() {
		r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("go")}})
		got <- res{r, err}
	}()
	<-asked
	if err := c.Cancel(ctx, sdk.CancelNotification{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	r := <-got
	close(release)
	if r.err != nil || r.r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("prompt: %+v %v", r.r, r.err)
	}
	tr := summarize(c.cl.take())
	if len(tr.calls) == 0 {
		t.Fatal("no tool call shown")
	}
	tr.assertClosed(t)
	if strings.Contains(tr.message, "never") {
		t.Fatal("the turn went on after the cancel")
	}
}

func TestCancelMidToolReturnsCancelled(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "call_sleep", Name: "terminal", Args: []string{`{"command":"sleep 30"}`}}), openaitest.Text("never"))
	s, ok := eng.Live(string(id))
	if !ok {
		t.Fatal("session not live")
	}
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	got := make(chan sdk.StopReason, 1)
	go func() {
		r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("wait")}})
		if err != nil {
			t.Error(err)
		}
		got <- r.StopReason
	}()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == engine.EvToolStart {
			break
		}
	}
	if err := c.Cancel(ctx, sdk.CancelNotification{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	if sr := <-got; sr != sdk.StopReasonCancelled {
		t.Fatalf("stop reason %q", sr)
	}
	tr := summarize(c.cl.take())
	tr.assertClosed(t)
	if st := tr.status["call_sleep"]; len(st) < 2 || st[len(st)-1] != sdk.ToolCallStatusFailed {
		t.Fatalf("statuses %v", st)
	}
}

func TestEditRendersDiffAndTerminalRendersCommand(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{})
	c.cl.decide = choose(acp.OptAllowOnce)
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	if err := os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.ToolCalls(
		openaitest.Call{ID: "w", Name: "write_file", Args: []string{`{"path":"a.txt","content":"one\nTWO\n"}`}},
		openaitest.Call{ID: "t", Name: "terminal", Args: []string{`{"command":"echo hello"}`}},
	), openaitest.Text("ok"))
	c.prompt(t, ctx, id, "edit")
	tr := summarize(c.cl.take())
	tr.assertClosed(t)
	var diff *sdk.ToolCallContentDiff
	for _, cc := range tr.content["w"] {
		if cc.Diff != nil {
			diff = cc.Diff
		}
	}
	if diff == nil || diff.Path != filepath.Join(cwd, "a.txt") || !strings.Contains(diff.NewText, "TWO") || diff.OldText == nil || !strings.Contains(*diff.OldText, "two") {
		t.Fatalf("write_file content %+v", tr.content["w"])
	}
	var texts string
	for _, cc := range tr.content["t"] {
		if cc.Content != nil && cc.Content.Content.Text != nil {
			texts += cc.Content.Content.Text.Text
		}
	}
	if !strings.Contains(texts, "$ echo hello") || !strings.Contains(texts, "hello") {
		t.Fatalf("terminal content %q", texts)
	}
	// Calls the policy allows go pending → in_progress → completed; an edit waits (pending)
	// again while the person reviews its diff.
	pend, ip, done := sdk.ToolCallStatusPending, sdk.ToolCallStatusInProgress, sdk.ToolCallStatusCompleted
	for id, want := range map[string][]sdk.ToolCallStatus{"w": {pend, ip, pend, ip, done}, "t": {pend, ip, done}} {
		if st := tr.status[id]; !slices.Equal(st, want) {
			t.Fatalf("call %s statuses %v, want %v", id, st, want)
		}
	}
	// The review came before the write, with the same diff.
	c.cl.mu.Lock()
	perms := c.cl.perms
	c.cl.mu.Unlock()
	if len(perms) != 1 || string(perms[0].ToolCall.ToolCallId) != "w" || *perms[0].ToolCall.Kind != sdk.ToolKindEdit ||
		len(perms[0].ToolCall.Content) != 1 || perms[0].ToolCall.Content[0].Diff == nil || perms[0].ToolCall.Content[0].Diff.NewText != "one\nTWO\n" {
		t.Fatalf("edit review %+v", perms)
	}
}

func TestLoadReplaysHistoryBeforeAnswering(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "c1", Name: "terminal", Args: []string{`{"command":"echo replayed"}`}}),
		openaitest.Response{Reasoning: []string{"pondering"}, Text: []string{"all done"}})
	c.prompt(t, ctx, id, "first question")
	c.cl.take()

	// A second editor window: a fresh connection loads the session.
	c2 := connect(t, eng, cwd, acp.Options{})
	if _, err := c2.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	tr := summarize(c2.cl.take())
	if tr.user != "first question" || tr.message != "all done" || tr.thought != "pondering" || len(tr.calls) != 1 {
		t.Fatalf("replay: user %q thought %q message %q calls %v", tr.user, tr.thought, tr.message, tr.calls)
	}
	tr.assertClosed(t)
	// The loaded session takes prompts on the new connection.
	srv.Enqueue(openaitest.Text("still here"))
	if sr := c2.prompt(t, ctx, id, "again"); sr != sdk.StopReasonEndTurn {
		t.Fatal(sr)
	}
	if m := summarize(c2.cl.take()).message; m != "still here" {
		t.Fatalf("message %q", m)
	}
	_, err := c2.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "no-such-session", Cwd: cwd, McpServers: []sdk.McpServer{}})
	if re, ok := err.(*sdk.RequestError); !ok || re.Code != -32602 {
		t.Fatalf("load unknown: %v", err)
	}
}

func TestForkListResumeClose(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	srv.Enqueue(openaitest.Text("answer"))
	c.prompt(t, ctx, id, "hello")
	f, err := c.UnstableForkSession(ctx, sdk.UnstableForkSessionRequest{SessionId: id, Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	if f.SessionId == "" || f.SessionId == id {
		t.Fatalf("fork id %q", f.SessionId)
	}
	if len(f.ConfigOptions) != 2 || f.ConfigOptions[0].Select == nil || f.ConfigOptions[0].Select.Id != "model" {
		t.Fatalf("fork config options %+v", f.ConfigOptions)
	}
	srv.Enqueue(openaitest.Text("forked answer"))
	c.cl.take()
	if sr := c.prompt(t, ctx, f.SessionId, "in the fork"); sr != sdk.StopReasonEndTurn {
		t.Fatal(sr)
	}
	l, err := c.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: &cwd})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[sdk.SessionId]bool{}
	for _, s := range l.Sessions {
		seen[s.SessionId] = true
		if s.Cwd != cwd {
			t.Fatalf("cwd %q", s.Cwd)
		}
	}
	if !seen[id] || !seen[f.SessionId] {
		t.Fatalf("list %+v", l.Sessions)
	}
	other := t.TempDir()
	if l, err := c.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: &other}); err != nil || len(l.Sessions) != 0 {
		t.Fatalf("list for another cwd: %+v %v", l, err)
	}
	if _, err := c.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("after close")}})
	if re, ok := err.(*sdk.RequestError); !ok || re.Code != -32602 || !strings.Contains(re.Error(), "closed") {
		t.Fatalf("prompt after close: %v", err)
	}
	if _, err := c.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: id, Cwd: cwd}); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.Text("resumed"))
	if sr := c.prompt(t, ctx, id, "resumed?"); sr != sdk.StopReasonEndTurn {
		t.Fatal(sr)
	}
}

func TestSecondPromptWhileBusyAnswersPromptly(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "queue")
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	g := openaitest.NewGate()
	srv.Enqueue(openaitest.Response{Text: []string{"slow ", "first"}, FaultAt: 2, Gate: g}, openaitest.Text("queued answer"))
	first := make(chan sdk.StopReason, 1)
	go func() {
		r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("one")}})
		if err != nil {
			t.Error(err)
		}
		first <- r.StopReason
	}()
	<-g.Reached()
	// The second prompt is answered while the first turn is still held at the gate.
	if sr := c.prompt(t, ctx, id, "two"); sr != sdk.StopReasonEndTurn {
		t.Fatalf("second: %q", sr)
	}
	g.Release()
	if sr := <-first; sr != sdk.StopReasonEndTurn {
		t.Fatalf("first: %q", sr)
	}
	tr := summarize(c.cl.take())
	// The queued prompt ran after the first turn, announced by its user message, and its
	// answer reached the client before the first prompt's response.
	if !strings.Contains(tr.message, "Queued for the next turn. (1 queued)") || !strings.Contains(tr.message, "queued answer") || tr.user != "two" {
		t.Fatalf("message %q user %q", tr.message, tr.user)
	}
	s, _ := eng.Live(string(id))
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestModelCommandAndConfigOption(t *testing.T) {
	_, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{Models: []string{"openai:other"}})
	ctx := testCtx(t)
	if _, err := c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ConfigOptions) != 2 || r.ConfigOptions[0].Select == nil || r.ConfigOptions[0].Select.CurrentValue != "openai:fake-agent" {
		t.Fatalf("config options %+v", r.ConfigOptions)
	}
	if sr := c.prompt(t, ctx, r.SessionId, "/model openai:other"); sr != sdk.StopReasonEndTurn {
		t.Fatal(sr)
	}
	tr := summarize(c.cl.take())
	if !strings.Contains(tr.message, "openai:other") || tr.configUpdates != 1 {
		t.Fatalf("message %q config updates %d", tr.message, tr.configUpdates)
	}
	set, err := c.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{SessionId: r.SessionId, ConfigId: "model", Value: "openai:fake-agent"}})
	if err != nil {
		t.Fatal(err)
	}
	if set.ConfigOptions[0].Select.CurrentValue != "openai:fake-agent" {
		t.Fatalf("after set: %+v", set.ConfigOptions[0].Select)
	}
	_, err = c.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{SessionId: r.SessionId, ConfigId: "model", Value: "nosuchprovider:x"}})
	if re, ok := err.(*sdk.RequestError); !ok || re.Code != -32602 {
		t.Fatalf("bad model: %v", err)
	}
	if _, err := c.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: r.SessionId, ModelId: "openai:other"}); err != nil {
		t.Fatal(err)
	}
	s, _ := eng.Live(string(r.SessionId))
	if m := s.Record().Model; m != "openai:other" {
		t.Fatalf("model after session/set_model: %q", m)
	}
}

func TestServeStopsWithContextAndInterruptsTurns(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	g := openaitest.NewGate()
	srv.Enqueue(openaitest.Response{Text: []string{"held"}, FaultAt: 1, Gate: g})
	t.Cleanup(g.Release)
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := acp.Serve(ctx, eng, c2aR, a2cW, acp.Options{Logger: quiet})
		a2cW.Close()
		done <- err
	}()
	cc := sdk.NewClientSideConnection(&client{}, c2aW, a2cR)
	cc.SetLogger(quiet)
	tctx := testCtx(t)
	if _, err := cc.Initialize(tctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := cc.NewSession(tctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	promptDone := make(chan struct{})
	go func() {
		defer close(promptDone)
		_, _ = cc.Prompt(tctx, sdk.PromptRequest{SessionId: r.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("wait")}})
	}()
	<-g.Reached()
	cancel() // the client never closes its side
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, ok := eng.Live(string(r.SessionId))
	if !ok {
		t.Fatal("session gone")
	}
	if err := s.WaitIdle(tctx); err != nil {
		t.Fatalf("the turn was not interrupted: %v", err)
	}
	c2aW.Close()
	<-promptDone // the agent side is gone, so the client's pending prompt ends
}

func TestStopReasons(t *testing.T) {
	t.Run("max_tokens", func(t *testing.T) {
		srv, p := fakeProvider(t)
		eng, cwd := newEngine(t, p, "")
		c := connect(t, eng, cwd, acp.Options{})
		ctx := testCtx(t)
		id := c.newSession(t, ctx)
		srv.Enqueue(openaitest.Response{Text: []string{"cut"}, FinishReason: "length"})
		if sr := c.prompt(t, ctx, id, "long"); sr != sdk.StopReasonMaxTokens {
			t.Fatalf("stop reason %q", sr)
		}
	})
	t.Run("max_turn_requests", func(t *testing.T) {
		srv, p := fakeProvider(t)
		eng, cwd := newEngineWith(t, p, "", func(c *engine.Config) { c.MaxIterations = 1 })
		c := connect(t, eng, cwd, acp.Options{})
		ctx := testCtx(t)
		id := c.newSession(t, ctx)
		srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "c1", Name: "terminal", Args: []string{`{"command":"echo 1"}`}}),
			openaitest.Text("summary"), openaitest.Text("summary"))
		if sr := c.prompt(t, ctx, id, "loop"); sr != sdk.StopReasonMaxTurnRequests {
			t.Fatalf("stop reason %q", sr)
		}
		summarize(c.cl.take()).assertClosed(t)
	})
	t.Run("failed turn", func(t *testing.T) {
		srv, p := fakeProvider(t)
		eng, cwd := newEngine(t, p, "")
		c := connect(t, eng, cwd, acp.Options{})
		ctx := testCtx(t)
		id := c.newSession(t, ctx)
		srv.Enqueue(openaitest.HTTPError(400, openaitest.APIError{Message: "bad request from provider", Type: "invalid_request_error"}))
		if sr := c.prompt(t, ctx, id, "fail"); sr != sdk.StopReasonEndTurn {
			t.Fatalf("stop reason %q", sr)
		}
		if m := summarize(c.cl.take()).message; !strings.Contains(m, "Error") {
			t.Fatalf("message %q", m)
		}
	})
	t.Run("interrupted by a second prompt", func(t *testing.T) {
		srv, p := fakeProvider(t)
		eng, cwd := newEngine(t, p, "interrupt")
		c := connect(t, eng, cwd, acp.Options{})
		ctx := testCtx(t)
		id := c.newSession(t, ctx)
		g := openaitest.NewGate()
		t.Cleanup(g.Release)
		srv.Enqueue(openaitest.Response{Text: []string{"first"}, FaultAt: 1, Gate: g}, openaitest.Text("second answer"))
		first := make(chan sdk.StopReason, 1)
		go func() {
			r, err := c.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("one")}})
			if err != nil {
				t.Error(err)
			}
			first <- r.StopReason
		}()
		<-g.Reached()
		if sr := c.prompt(t, ctx, id, "two"); sr != sdk.StopReasonEndTurn {
			t.Fatalf("second: %q", sr)
		}
		if sr := <-first; sr != sdk.StopReasonCancelled {
			t.Fatalf("first: %q", sr)
		}
		// The second request rendered its own turn, with no echo of its prompt.
		tr := summarize(c.cl.take())
		if !strings.Contains(tr.message, "second answer") || tr.user != "" {
			t.Fatalf("message %q user %q", tr.message, tr.user)
		}
	})
}

func TestPermissionFailuresDeny(t *testing.T) {
	for name, decide := range map[string]func(context.Context) (sdk.RequestPermissionResponse, error){
		"no answer before the timeout": func(ctx context.Context) (sdk.RequestPermissionResponse, error) {
			<-ctx.Done() // released by the agent's $/cancel_request
			return sdk.RequestPermissionResponse{}, ctx.Err()
		},
		"client error": func(context.Context) (sdk.RequestPermissionResponse, error) {
			return sdk.RequestPermissionResponse{}, sdk.NewInternalError(map[string]any{"error": "dialog crashed"})
		},
		"cancelled outcome without a cancel": func(context.Context) (sdk.RequestPermissionResponse, error) {
			return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, p := fakeProvider(t)
			eng, cwd := newEngine(t, p, "")
			c := connect(t, eng, cwd, acp.Options{PermissionTimeout: 50 * time.Millisecond})
			c.cl.decideCtx = decide
			ctx := testCtx(t)
			id := c.newSession(t, ctx)
			build := filepath.Join(cwd, "build")
			if err := os.Mkdir(build, 0o755); err != nil {
				t.Fatal(err)
			}
			srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("ok"))
			if sr := c.prompt(t, ctx, id, "clean"); sr != sdk.StopReasonEndTurn {
				t.Fatal(sr)
			}
			tr := summarize(c.cl.take())
			tr.assertClosed(t)
			if st := tr.status["call_rm"]; st[len(st)-1] != sdk.ToolCallStatusFailed {
				t.Fatalf("statuses %v", st)
			}
			if _, err := os.Stat(build); err != nil {
				t.Fatal("the command ran without consent")
			}
		})
	}
}

// TestApprovalModesOverACP: the session's approval mode is offered as ACP modes and as the
// "mode" config option, both kept in sync; read_only makes a write fail without a permission
// request, accept_edits lets it run, and an unknown mode is -32602.
func TestApprovalModesOverACP(t *testing.T) {
	srv, p := fakeProvider(t)
	// A policy that asks about every write: only accept_edits lets one run without a question.
	eng, cwd := newEngineWith(t, p, "", func(c *engine.Config) { c.Policy.Approver = askWrites{} })
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	if _, err := c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := c.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range r.Modes.AvailableModes {
		ids = append(ids, string(m.Id))
	}
	if r.Modes == nil || r.Modes.CurrentModeId != "default" || strings.Join(ids, ",") != "default,accept_edits,dont_ask,read_only" {
		t.Fatalf("modes %+v", r.Modes)
	}
	if len(r.ConfigOptions) != 2 || r.ConfigOptions[1].Select.Id != "mode" || r.ConfigOptions[1].Select.CurrentValue != "default" {
		t.Fatalf("config options %+v", r.ConfigOptions)
	}
	if _, err := c.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: r.SessionId, ModeId: "read_only"}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(cwd, "a.txt")
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "w", Name: "write_file", Args: []string{`{"path":"a.txt","content":"x"}`}}), openaitest.Text("could not"))
	c.prompt(t, ctx, r.SessionId, "write it")
	tr := summarize(c.cl.take())
	if strings.Join(tr.modes, ",") != "read_only" || tr.configUpdates != 1 {
		t.Fatalf("mode updates %v, config updates %d", tr.modes, tr.configUpdates)
	}
	if st := tr.status["w"]; len(st) == 0 || st[len(st)-1] != sdk.ToolCallStatusFailed {
		t.Fatalf("read_only write statuses %v", st)
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatal("read_only wrote the file")
	}
	set, err := c.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{SessionId: r.SessionId, ConfigId: "mode", Value: "accept_edits"}})
	if err != nil || set.ConfigOptions[1].Select.CurrentValue != "accept_edits" {
		t.Fatalf("set mode option: %+v %v", set, err)
	}
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "w2", Name: "write_file", Args: []string{`{"path":"a.txt","content":"x"}`}}), openaitest.Text("wrote"))
	c.prompt(t, ctx, r.SessionId, "write it now")
	tr = summarize(c.cl.take())
	if strings.Join(tr.modes, ",") != "accept_edits" {
		t.Fatalf("mode updates %v", tr.modes)
	}
	if st := tr.status["w2"]; len(st) == 0 || st[len(st)-1] != sdk.ToolCallStatusCompleted {
		t.Fatalf("accept_edits write statuses %v", st)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Fatalf("file %q %v", b, err)
	}
	c.cl.mu.Lock()
	asked := len(c.cl.perms)
	c.cl.mu.Unlock()
	if asked != 0 {
		t.Fatalf("%d permission requests; read_only denies and accept_edits allows without asking", asked)
	}
	_, err = c.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: r.SessionId, ModeId: "yolo"})
	if re, ok := err.(*sdk.RequestError); !ok || re.Code != -32602 {
		t.Fatalf("unknown mode: %v", err)
	}
	// The mode is stored: a load in a new connection reports it.
	c2 := connect(t, eng, cwd, acp.Options{})
	if _, err := c2.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: r.SessionId}); err != nil {
		t.Fatal(err)
	}
	l, err := c2.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: r.SessionId, Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil || l.Modes == nil || l.Modes.CurrentModeId != "accept_edits" {
		t.Fatalf("load: %+v %v", l.Modes, err)
	}
}

// askWrites asks about every write_file call and allows the rest.
type askWrites struct{}

func (askWrites) Approve(_ context.Context, in policy.ApprovalInput) (policy.ApprovalDecision, error) {
	if in.Tool == "write_file" {
		return policy.ApprovalDecision{Decision: policy.Ask, Reason: "writes are asked"}, nil
	}
	return policy.ApprovalDecision{Decision: policy.Allow}, nil
}

// TestSettingErrorCodes: a value the agent does not know is the client's error (-32602); a
// failing store is the agent's (-32603).
func TestSettingErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("%w: x", engine.ErrUnknownMode), -32602},
		{fmt.Errorf("%w: x", engine.ErrInvalidModel), -32602},
		{fmt.Errorf("%w: x", model.ErrUnknownProvider), -32602},
		{errors.New("store: disk full"), -32603},
	} {
		var re *sdk.RequestError
		if !errors.As(acp.SettingError(tc.err), &re) || re.Code != tc.code {
			t.Errorf("%v: got %v, want code %d", tc.err, acp.SettingError(tc.err), tc.code)
		}
	}
}
