package cli

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// The gateway's behaviours are tested in process in transports/gateway, and its WebSocket
// mount (/api/ws) in transports/httpapi. These tests run what only the binary has: the
// `hermes gateway` subprocess on stdio (a smoke test, the --transcript flag, the MCP test's
// use of it).

// gwTarget is a real `hermes gateway` subprocess (stdio) over the fake OpenAI server.
type gwTarget struct {
	name string
	srv  *openaitest.Server
	cwd  string
	home string
	dial func(t *testing.T) *gwclient.Client
}

const testAPIKey = "test-key-0123456789abcdef"

func gwEnv(t *testing.T, extraConfig string) (home, cwd string, srv *openaitest.Server, env map[string]string) {
	home, cwd = t.TempDir(), t.TempDir()
	srv = openaitest.New(t)
	cfg := extraConfig
	if !strings.Contains(cfg, "approvals:") {
		cfg = "approvals:\n  timeout: 1500ms\n" + cfg
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"HERMES_HOME": home, "HERMES_MODEL": "openai:fake-agent", "OPENAI_BASE_URL": srv.URL(), "OPENAI_API_KEY": "k"}
	return
}

func stdioTarget(t *testing.T, extraConfig string) *gwTarget {
	home, cwd, srv, env := gwEnv(t, extraConfig)
	tg := &gwTarget{name: "stdio", srv: srv, cwd: cwd, home: home}
	tg.dial = func(t *testing.T) *gwclient.Client {
		var kv []string
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		cmd := hermesCmd(t, cwd, kv, "gateway")
		cmd.Stderr = os.Stderr
		c, err := gwclient.Stdio(cmd)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return tg
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open dials, waits for gateway.ready and, if asked, opts in to server requests.
func open(t *testing.T, tg *gwTarget, serverRequests bool) *gwclient.Client {
	t.Helper()
	c := tg.dial(t)
	if _, _, err := c.WaitType(tctx(t), 0, "", "gateway.ready"); err != nil {
		t.Fatal(err)
	}
	if serverRequests {
		call(t, c, "client.capabilities", map[string]any{"server_requests": true})
	}
	return c
}

func call(t *testing.T, c *gwclient.Client, method string, params any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := c.CallInto(tctx(t), method, params, &out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return out
}

func create(t *testing.T, c *gwclient.Client) string {
	t.Helper()
	return call(t, c, "session.create", map[string]any{})["session_id"].(string)
}

func waitType(t *testing.T, c *gwclient.Client, from int, sid, typ string) (gwclient.Event, int) {
	t.Helper()
	e, i, err := c.WaitType(tctx(t), from, sid, typ)
	if err != nil {
		t.Fatalf("waiting for %s: %v", typ, err)
	}
	return e, i
}

func payload(t *testing.T, e gwclient.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := e.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// turn submits and waits for the turn's message.complete.
func turn(t *testing.T, c *gwclient.Client, sid, text string) map[string]any {
	t.Helper()
	from := len(c.Events())
	res := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": text})
	if res["status"] != "streaming" {
		t.Fatalf("submit: %v", res)
	}
	e, _ := waitType(t, c, from, sid, "message.complete")
	return payload(t, e)
}

func TestGatewayTranscriptFlag(t *testing.T) {
	home, cwd, _, env := gwEnv(t, "")
	path := filepath.Join(home, "frames.log")
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	cmd := hermesCmd(t, cwd, kv, "gateway", "--transcript", path)
	c, err := gwclient.Stdio(cmd)
	if err != nil {
		t.Fatal(err)
	}
	waitType(t, c, 0, "", "gateway.ready")
	call(t, c, "ping", nil)
	c.Close()
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), " out {\"jsonrpc\":\"2.0\",\"method\":\"event\"") || !strings.Contains(string(b), ` in {"jsonrpc":"2.0","id":"cli-`) {
		t.Fatalf("transcript: %v\n%s", err, b)
	}
}

// TestGatewaySubprocessSmoke: the real binary serves the gateway on stdio — ready, a session,
// a streamed turn, the stored session listed with its transcript.
func TestGatewaySubprocessSmoke(t *testing.T) {
	tg := stdioTarget(t, "")
	c := open(t, tg, false)
	sid := create(t, c)
	tg.srv.Enqueue(openaitest.Text("Hel", "lo"))
	if p := turn(t, c, sid, "hi"); p["text"] != "Hello" || p["status"] != "complete" {
		t.Fatalf("turn: %v", p)
	}
	if l := call(t, c, "session.list", nil)["sessions"].([]any); len(l) != 1 {
		t.Fatalf("list: %v", l)
	}
	if h := call(t, c, "session.history", map[string]any{"session_id": sid}); h["count"] != float64(2) {
		t.Fatalf("history: %v", h)
	}
}

// SIGTERM ends `hermes gateway` even while its host keeps stdin open (a service manager's
// stop): the process exits 0 within a moment instead of waiting for an input that may never end.
func TestGatewayExitsOnSIGTERMWithStdinOpen(t *testing.T) {
	cmd := hermesCmd(t, t.TempDir(), []string{"HERMES_HOME=" + t.TempDir(), "HERMES_MODEL=openai:m", "OPENAI_BASE_URL=http://127.0.0.1:1/v1"}, "gateway")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		r := bufio.NewReader(stdout)
		if _, err := r.ReadString('\n'); err == nil { // gateway.ready: its signal handling is set
			close(ready)
		}
		_, _ = io.Copy(io.Discard, r)
		waitErr = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("hermes gateway exited before gateway.ready: %v", waitErr)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("exit after SIGTERM: %v", waitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("hermes gateway still runs 30 s after SIGTERM with its stdin open")
	}
}
