package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// permClient is an ACP client that holds every permission request open, telling the test
// that it was asked, until the agent withdraws it ($/cancel_request): it never answers itself.
type permClient struct {
	*acpClient
	asked     chan string // the tool call's title, one per request
	withdrawn chan string // the same, once the agent withdrew the request

	mu       sync.Mutex
	statuses map[string][]sdk.ToolCallStatus // tool call id → statuses in order
}

func (c *permClient) RequestPermission(ctx context.Context, r sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	title := ""
	if r.ToolCall.Title != nil {
		title = *r.ToolCall.Title
	}
	c.asked <- title
	<-ctx.Done()
	c.withdrawn <- title
	return sdk.RequestPermissionResponse{}, ctx.Err()
}

func (c *permClient) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	if u := n.Update.ToolCallUpdate; u != nil && u.Status != nil {
		c.statuses[string(u.ToolCallId)] = append(c.statuses[string(u.ToolCallId)], *u.Status)
	}
	c.mu.Unlock()
	return c.acpClient.SessionUpdate(ctx, n)
}

// lastStatus returns the last status the agent gave the tool call.
func (c *permClient) lastStatus(id string) sdk.ToolCallStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.statuses[id]
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// said returns the agent's message text streamed so far and forgets it.
func (c *permClient) said() string {
	c.acpClient.mu.Lock()
	defer c.acpClient.mu.Unlock()
	s := c.acpClient.text.String()
	c.acpClient.text.Reset()
	return s
}

// startPermACP starts `hermes acp` in cwd with env and connects a permClient to it.
func startPermACP(t *testing.T, cwd string, env []string) (*sdk.ClientSideConnection, *permClient, *syncBuffer) {
	t.Helper()
	cmd := hermesCmd(t, cwd, env, "acp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	cl := &permClient{acpClient: &acpClient{}, asked: make(chan string, 4), withdrawn: make(chan string, 4), statuses: map[string][]sdk.ToolCallStatus{}}
	conn := sdk.NewClientSideConnection(cl, stdin, stdout)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	return conn, cl, stderr
}

// TestApprovalFromACPAnsweredOverAPIWS: on one home, `hermes acp` runs a turn whose terminal
// command needs approval while `hermes serve` runs beside it. A WebSocket client attached to
// the same session through serve's /api/ws gets the approval request and answers it; the turn
// in the acp process goes on with that answer (the command runs, or not), and the ACP client
// sees its own permission request withdrawn. Once denied, once allowed.
func TestApprovalFromACPAnsweredOverAPIWS(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	for _, d := range []string{"keep-me", "drop-me"} {
		if err := os.MkdirAll(filepath.Join(cwd, d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	model := openaitest.New(t)
	model.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_keep", Name: "terminal", Args: []string{`{"command":"rm -r keep-me"}`}}),
		openaitest.Text("left it alone"),
		openaitest.ToolCalls(openaitest.Call{ID: "call_drop", Name: "terminal", Args: []string{`{"command":"rm -r drop-me"}`}}),
		openaitest.Text("removed it"),
	)
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=k"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	srv := serveHome(t, home, cwd, model.URL())
	conn, cl, acpErr := startPermACP(t, cwd, env)
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v\n%s", err, acpErr.String())
	}
	ns, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v\n%s", err, acpErr.String())
	}
	sid := string(ns.SessionId)

	// The WebSocket client attaches to the session before any prompt (it is stored at birth).
	ws, err := gwclient.DialWS(ctx, "ws"+strings.TrimPrefix(srv.base, "http")+"/api/ws", http.Header{"Authorization": {"Bearer " + testAPIKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if err := ws.CallInto(ctx, "client.capabilities", map[string]any{"server_requests": true}, nil); err != nil {
		t.Fatalf("client.capabilities: %v", err)
	}
	var resumed struct {
		SessionID string `json:"session_id"`
	}
	if err := ws.CallInto(ctx, "session.resume", map[string]any{"session_id": sid}, &resumed); err != nil {
		t.Fatalf("session.resume over /api/ws of the acp process's session: %v", err)
	}

	for _, tc := range []struct {
		dir, call, choice, said string
		removed                 bool
	}{
		{"keep-me", "call_keep", "deny", "left it alone", false},
		{"drop-me", "call_drop", "once", "removed it", true},
	} {
		from := len(ws.Events())
		turn := make(chan error, 1)
		go func() {
			r, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("tidy " + tc.dir)}})
			if err == nil && r.StopReason != sdk.StopReasonEndTurn {
				err = fmt.Errorf("stop reason %q", r.StopReason)
			}
			turn <- err
		}()
		// Both clients are asked; the ACP client holds its request open.
		var asked string
		select {
		case asked = <-cl.asked:
		case err := <-turn:
			t.Fatalf("%s: the turn ended (%v) before the ACP client was asked\n%s", tc.dir, err, acpErr.String())
		case <-ctx.Done():
			t.Fatalf("%s: the ACP client was never asked for permission\n%s", tc.dir, acpErr.String())
		}
		if !strings.Contains(asked, tc.dir) {
			t.Fatalf("%s: ACP permission request titled %q", tc.dir, asked)
		}
		req, err := ws.WaitRequest(ctx)
		if err != nil {
			t.Fatalf("%s: no approval request over /api/ws: %v\nserve: %s", tc.dir, err, srv.logs.String())
		}
		if cmd, _ := req.Params["command"].(string); req.Method != "approval" || cmd != "rm -r "+tc.dir {
			t.Fatalf("%s: request over /api/ws: %s %v", tc.dir, req.Method, req.Params)
		}
		// A client resuming the session through serve now sees the turn the acp process runs.
		late, err := gwclient.DialWS(ctx, "ws"+strings.TrimPrefix(srv.base, "http")+"/api/ws", http.Header{"Authorization": {"Bearer " + testAPIKey}})
		if err != nil {
			t.Fatal(err)
		}
		var snap struct {
			Running  bool           `json:"running"`
			Status   string         `json:"status"`
			Inflight map[string]any `json:"inflight"`
			Info     map[string]any `json:"info"`
		}
		err = late.CallInto(ctx, "session.resume", map[string]any{"session_id": sid}, &snap)
		late.Close()
		if err != nil || !snap.Running || snap.Status != "waiting" || snap.Inflight["streaming"] != true ||
			snap.Inflight["user"] != "tidy "+tc.dir || snap.Info["running"] != true {
			t.Fatalf("%s: session.resume through serve while the acp process runs the turn: %v %+v", tc.dir, err, snap)
		}
		// An OpenAI-compatible request for the session is refused while the acp process runs
		// its turn, as in one process: the prompt is not run there, queued or steered, and the
		// turn is not interrupted (it ends end_turn below).
		hr, err := http.NewRequestWithContext(ctx, "POST", srv.base+"/v1/chat/completions",
			strings.NewReader(`{"model":"openai:fake-agent","messages":[{"role":"user","content":"hi from http"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Authorization", "Bearer "+testAPIKey)
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("X-Hermes-Session-Id", sid)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), `"session_busy"`) || !strings.Contains(string(body), "busy with another turn") {
			t.Fatalf("%s: chat completion for the session the acp process runs: %d %s", tc.dir, resp.StatusCode, body)
		}
		req.Answer(map[string]any{"choice": tc.choice})

		// The acp process takes the answer: the ACP client's request is withdrawn, the turn
		// goes on and ends, and the command ran only when allowed.
		waitCtx, stop := context.WithTimeout(ctx, time.Minute)
		var withdrawn, ended bool
		for !withdrawn || !ended {
			select {
			case <-cl.withdrawn:
				withdrawn = true
			case err := <-turn:
				if err != nil {
					t.Fatalf("%s: session/prompt: %v\n%s", tc.dir, err, acpErr.String())
				}
				ended = true
			case <-waitCtx.Done():
				_, statErr := os.Stat(filepath.Join(cwd, tc.dir))
				t.Fatalf("%s: after the answer over /api/ws: ACP request withdrawn %v, turn ended %v, stat %v\nacp: %s\nserve: %s", tc.dir, withdrawn, ended, statErr, acpErr.String(), srv.logs.String())
			}
		}
		stop()
		_, statErr := os.Stat(filepath.Join(cwd, tc.dir))
		if gone := errors.Is(statErr, os.ErrNotExist); gone != tc.removed {
			t.Fatalf("%s answered %q: directory removed %v (stat: %v)", tc.dir, tc.choice, gone, statErr)
		}
		if got := cl.said(); got != tc.said {
			t.Fatalf("%s: the ACP client was streamed %q, want %q", tc.dir, got, tc.said)
		}
		want := sdk.ToolCallStatusCompleted
		if !tc.removed {
			want = sdk.ToolCallStatusFailed
		}
		if got := cl.lastStatus(tc.call); got != want {
			t.Fatalf("%s: ACP tool call ended %q, want %q", tc.dir, got, want)
		}
		// The WebSocket client saw the turn end too (the live events of the acp process).
		e, _, err := ws.WaitType(ctx, from, resumed.SessionID, "message.complete")
		if err != nil {
			t.Fatalf("%s: message.complete over /api/ws: %v", tc.dir, err)
		}
		var done struct{ Text string }
		if err := e.Decode(&done); err != nil || done.Text != tc.said {
			t.Fatalf("%s: message.complete over /api/ws: %s", tc.dir, e.Payload)
		}
	}
}
