package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// The gateway's behaviours are tested in process in transports/gateway. These tests run what
// only the binary has: the `hermes gateway` subprocess on stdio (a smoke test, the --transcript
// flag, the MCP test's use of it) and the /api/ws endpoint of `hermes serve` (authentication,
// a frame over the WebSocket limit).

// gwTarget is one gateway under test: a real `hermes gateway` subprocess (stdio) or a real
// `hermes serve` WebSocket endpoint on 127.0.0.1, both over the fake OpenAI server.
type gwTarget struct {
	name string
	ws   bool
	srv  *openaitest.Server
	cwd  string
	home string
	dial func(t *testing.T) *gwclient.Client
	url  string // ws only
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

func wsTarget(t *testing.T, extraConfig string) *gwTarget {
	home, cwd, srv, env := gwEnv(t, extraConfig)
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := build(cfg, st, runtimeOpts{cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	opts := gatewayOptions(cfg, a, nil)
	opts.CLI = func(ctx context.Context, argv []string) (string, int, error) { // this test binary acting as hermes
		r := hermes(t, cwd, nil, argv...)
		return r.stdout + r.err, r.code, nil
	}
	gw := gateway.New(a.eng, opts)
	hs, err := httpapi.New(a.eng, gw, httpapi.Options{APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		gw.Close()
		a.Close()
	})
	tg := &gwTarget{name: "ws", ws: true, srv: srv, cwd: cwd, home: home, url: "ws://" + ln.Addr().String() + "/api/ws"}
	tg.dial = func(t *testing.T) *gwclient.Client {
		c, err := gwclient.DialWS(context.Background(), tg.url+"?token="+testAPIKey, nil)
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

// open dials, waits for gateway.ready and (on WebSocket) opts in to server requests.
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

func TestGatewayWSAuthAndHugeFrame(t *testing.T) {
	tg := wsTarget(t, "")
	for _, url := range []string{tg.url + "?token=wrong", tg.url} {
		bad, err := gwclient.DialWS(context.Background(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-bad.Done()
		if gwclient.CloseCode(bad.Err()) != 4401 || len(bad.Events()) != 0 {
			t.Fatalf("bad credential must close with 4401 before any frame: %v %v", bad.Err(), bad.Events())
		}
	}
	h := http.Header{"Authorization": {"Bearer " + testAPIKey}}
	c, err := gwclient.DialWS(context.Background(), tg.url, h)
	if err != nil {
		t.Fatal(err)
	}
	waitType(t, c, 0, "", "gateway.ready")
	other := open(t, tg, true)
	big := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 50<<20) + `"}}`)
	c.Raw(big)
	<-c.Done()
	if p := call(t, other, "ping", nil); p["pong"] != true {
		t.Fatal("the gateway stopped serving others after a huge frame")
	}
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
