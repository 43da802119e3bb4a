package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// acpClient records updates; it never expects a permission request in these tests.
type acpClient struct {
	mu   sync.Mutex
	text strings.Builder
}

func (c *acpClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.text.WriteString(m.Content.Text.Text)
	}
	return nil
}
func (c *acpClient) RequestPermission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}, nil
}
func (c *acpClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound("fs/read_text_file")
}
func (c *acpClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound("fs/write_text_file")
}
func (c *acpClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound("terminal/create")
}
func (c *acpClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound("terminal/kill")
}
func (c *acpClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound("terminal/output")
}
func (c *acpClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound("terminal/release")
}
func (c *acpClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound("terminal/wait_for_exit")
}

// syncBuffer is a bytes.Buffer safe to write from the pipe copier and read from the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestACPSubprocess(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	env := []string{"HERMES_HOME=" + home, "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=test-key", "HERMES_MODEL=openai:fake"}

	if r := hermes(t, work, env, "acp", "--version"); r.code != 0 || !strings.Contains(r.stdout, "ACP protocol v1") {
		t.Fatalf("--version: %d %q %s", r.code, r.stdout, r.err)
	}
	if r := hermes(t, work, env, "acp", "--check"); r.code != 0 || !strings.Contains(r.stdout, "provider: ok") || !strings.Contains(r.stdout, "store:    ok") {
		t.Fatalf("--check: %d %s %s", r.code, r.stdout, r.err)
	}
	noKey := []string{"HERMES_HOME=" + home, "OPENAI_API_KEY=", "HERMES_MODEL=openai:fake"}
	if r := hermes(t, work, noKey, "acp", "--check"); r.code != 1 || !strings.Contains(r.stdout, "provider: FAIL") {
		t.Fatalf("--check without a key: %d %s %s", r.code, r.stdout, r.err)
	}
	if r := hermes(t, work, env, "acp", "--setup"); r.code != 1 || !strings.Contains(r.err, "OPENAI_API_KEY") {
		t.Fatalf("--setup without a terminal: %d %s %s", r.code, r.stdout, r.err)
	}

	cmd := hermesCmd(t, work, env, "acp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wire syncBuffer
	cl := &acpClient{}
	cc := sdk.NewClientSideConnection(cl, stdin, io.TeeReader(stdout, &wire))
	cc.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cc.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: "agent"}); err != nil {
		t.Fatal(err)
	}
	s, err := cc.NewSession(ctx, sdk.NewSessionRequest{Cwd: work, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.Text("hello from ", "the child"))
	r, err := cc.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("hi")}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v\nstderr: %s", r, err, stderr.String())
	}
	cl.mu.Lock()
	got := cl.text.String()
	cl.mu.Unlock()
	if got != "hello from the child" {
		t.Fatalf("streamed %q", got)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\nstderr: %s", err, stderr.String())
	}
	// stdout carries protocol frames only.
	for line := range strings.SplitSeq(strings.TrimSpace(wire.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("stdout line is not a frame: %q", line)
		}
	}
	// The session is durable: hermes sessions lists it.
	if ls := hermes(t, work, env, "sessions"); !strings.Contains(ls.stdout, string(s.SessionId)) {
		t.Fatalf("sessions: %s %s", ls.stdout, ls.err)
	}
}

func TestWriteSetupMergesConfig(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(path, []byte("max_iterations: 7\nproviders:\n  local:\n    type: openai\n    base_url: http://127.0.0.1:1/v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeSetup(path, "openrouter", "", "OPENROUTER_API_KEY", "some/model"); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(func(k string) string {
		switch k {
		case "HERMES_HOME":
			return home
		case "OPENROUTER_API_KEY":
			return "k"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model != "openrouter:some/model" || cfg.MaxIterations != 7 || cfg.Providers["local"].BaseURL == "" || cfg.Providers["openrouter"].APIKey != "k" {
		t.Fatalf("config after setup: %+v", cfg)
	}
	if err := providerReady(cfg); err != nil {
		t.Fatal(err)
	}
}

// TestACPStoreErrorOnFirstSessionMethod: the store opens while initialize is answered, so a
// store that cannot open does not stop the handshake; the first session method reports it
// as a JSON-RPC error, and --check reports it too.
func TestACPStoreErrorOnFirstSessionMethod(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	// The store directory is a regular file: opening it fails.
	if err := os.WriteFile(filepath.Join(home, "state"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HERMES_HOME=" + home, "OPENAI_BASE_URL=http://127.0.0.1:1/v1", "OPENAI_API_KEY=k", "HERMES_MODEL=openai:fake"}
	if r := hermes(t, work, env, "acp", "--check"); r.code != 1 || !strings.Contains(r.stdout, "store:    FAIL") {
		t.Fatalf("--check: %d %s %s", r.code, r.stdout, r.err)
	}
	cmd := hermesCmd(t, work, env, "acp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cc := sdk.NewClientSideConnection(&acpClient{}, stdin, stdout)
	cc.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cc.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // every session method, not only the first, reports it
		_, err = cc.NewSession(ctx, sdk.NewSessionRequest{Cwd: work, McpServers: []sdk.McpServer{}})
		var re *sdk.RequestError
		if !errors.As(err, &re) || re.Code != -32603 || !strings.Contains(re.Error(), "could not start") || !strings.Contains(re.Error(), "state") {
			t.Fatalf("session/new with a broken store: %v", err)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\nstderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "could not start") {
		t.Fatalf("stderr does not say why: %s", stderr.String())
	}
}

// BenchmarkACPStartToInitialize times `hermes acp` from process start to the initialize
// response on stdout. By default the test binary plays hermes (it links the test packages
// too); set HERMES_ACP_BENCH_BIN to a built hermes binary for the product figure.
func BenchmarkACPStartToInitialize(b *testing.B) {
	home, work := b.TempDir(), b.TempDir()
	bin, env := os.Args[0], []string{"HERMES_TEST_AS_MAIN=1"}
	if p := os.Getenv("HERMES_ACP_BENCH_BIN"); p != "" {
		bin, env = p, nil
	}
	env = append(append(os.Environ(), env...), "HERMES_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:1/v1", "OPENAI_API_KEY=k", "HERMES_MODEL=openai:fake")
	frame := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n")
	for b.Loop() {
		cmd := exec.Command(bin, "acp")
		cmd.Dir, cmd.Env = work, env
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := stdin.Write(frame); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		if err != nil || !bytes.Contains(line, []byte(`"protocolVersion":1`)) {
			b.Fatalf("initialize: %q %v", line, err)
		}
		b.StopTimer()
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkACPRSS100Sessions reports the resident memory of `hermes acp` after initialize and
// after 100 idle sessions (session/new ×100), read from /proc. Like the start-up benchmark it
// takes a built binary from HERMES_ACP_BENCH_BIN for the product figure.
func BenchmarkACPRSS100Sessions(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc")
	}
	home, work := b.TempDir(), b.TempDir()
	bin, env := os.Args[0], []string{"HERMES_TEST_AS_MAIN=1"}
	if p := os.Getenv("HERMES_ACP_BENCH_BIN"); p != "" {
		bin, env = p, nil
	}
	env = append(append(os.Environ(), env...), "HERMES_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:1/v1", "OPENAI_API_KEY=k", "HERMES_MODEL=openai:fake")
	rss := func(pid int) float64 {
		b.Helper()
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
		b.Fatal("no VmRSS")
		return 0
	}
	var afterInit, after100 float64
	for b.Loop() {
		cmd := exec.Command(bin, "acp")
		cmd.Dir, cmd.Env = work, env
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(stdout)
		call := func(id int, method, params string) {
			fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
			line, err := r.ReadBytes('\n')
			for err == nil && bytes.Contains(line, []byte(`"method":"session/update"`)) { // the commands and context meter of a new session
				line, err = r.ReadBytes('\n')
			}
			if err != nil || !bytes.Contains(line, []byte(`"result"`)) {
				b.Fatalf("%s: %q %v", method, line, err)
			}
		}
		call(1, "initialize", `{"protocolVersion":1}`)
		afterInit = rss(cmd.Process.Pid)
		for i := range 100 {
			call(2+i, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, work))
		}
		after100 = rss(cmd.Process.Pid)
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(afterInit, "MB-rss-init")
	b.ReportMetric(after100, "MB-rss-100-sessions")
}
