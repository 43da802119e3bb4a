package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/interop"
)

// otherAPIKey is a second principal of the dashboard test: it must see none of the first
// key's sessions and runs.
const otherAPIKey = "other-key-0123456789abcdef"

// findChromium returns the Chromium executable (CHROME_BIN, else chromium or
// chromium-browser on PATH); without one the browser test skips, or fails in CI.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROME_BIN"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if interop.Required() {
		t.Fatal("chromium is not installed (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// TestDashboardBrowser drives the dashboard of a real `hermes serve --ui` (the built binary,
// over the fake model) in headless Chromium with puppeteer-core
// (interop/node/dashboard.mjs): the login, a new session, a run whose dangerous command
// waits for approval, the transcript streaming over /api/ws while the model holds its answer,
// the one-click approval, the run settling in the runs table, a second run denied with one
// click in that table, the search, the charts, and a second key that sees none of it. The model's second answer is held after its first
// fragment until the page shows that fragment, so the test sees the stream, not its end.
func TestDashboardBrowser(t *testing.T) {
	chromium := findChromium(t)
	n := interop.RequireNode(t)
	n.Package(t, "puppeteer-core")
	bin, err := buildHermes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, cwd := t.TempDir(), t.TempDir()
	cfg := "server:\n  extra_api_keys:\n    - {name: other, key: " + otherAPIKey + "}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	build, cache := filepath.Join(cwd, "build"), filepath.Join(cwd, "cache")
	for _, d := range []string{build, cache} {
		if err := os.MkdirAll(filepath.Join(d, "out"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	model := openaitest.New(t)
	hold := openaitest.NewGate()
	model.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":`, `"rm -rf build"}`}}),
		// Role chunk and "Cleaned " go out, then the stream waits for the page to show them.
		openaitest.Response{Text: []string{"Cleaned ", "the build directory."}, FaultAt: 2, Gate: hold},
		// The second run: denied from the runs table.
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -rf cache"}`}}),
		openaitest.Text("Left the cache alone."),
	)

	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--ui")
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "HERMES_HOME="+home, "HERMES_MODEL="+interopModel,
		"OPENAI_BASE_URL="+model.URL(), "OPENAI_API_KEY=k", "HERMES_API_KEY="+testAPIKey)
	hostport, exited, logs := startServeCmd(t, cmd)
	t.Cleanup(hold.Release) // before the server stops (cleanups run last first)
	// The dashboard's address is logged right after the listening line.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "dashboard at http://"+hostport+"/ui"); {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not announce the dashboard:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	node := exec.CommandContext(ctx, n.Bin, "dashboard.mjs")
	node.Dir = n.Dir
	node.Env = append(os.Environ(), "HERMES_BASE=http://"+hostport, "HERMES_KEY="+testAPIKey,
		"HERMES_OTHER_KEY="+otherAPIKey, "CHROME_BIN="+chromium, "DASHBOARD_HOME="+t.TempDir())
	// Chromium runs in the script's process group: whatever happens to the script, the whole
	// group is killed when the test ends.
	node.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	node.Cancel = func() error { return syscall.Kill(-node.Process.Pid, syscall.SIGKILL) }
	var stderr lockedBuffer
	node.Stderr = &stderr
	stdout, err := node.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-node.Process.Pid, syscall.SIGKILL) })
	var steps []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		steps = append(steps, line)
		if line == "step: partial answer shown" {
			hold.Release()
		}
	}
	err = node.Wait()
	got := strings.Join(steps, "\n")
	if err != nil || !strings.Contains(got, "dashboard: ok") {
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Errorf("dashboard.mjs: %v", err)
		}
		// What the server answers the second key now, and where its goroutines stand (SIGQUIT
		// makes a Go process print every goroutine's stack on its way out).
		now := "GET /v1/runs as the other key: "
		req, _ := http.NewRequest(http.MethodGet, "http://"+hostport+"/v1/runs?limit=200", nil)
		req.Header.Set("Authorization", "Bearer "+otherAPIKey)
		if resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req); err != nil {
			now += err.Error()
		} else {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			now += resp.Status + " " + string(b)
		}
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("the browser walk did not finish.\nsteps:\n%s\nstderr:\n%s\n%s\nserver log:\n%s", got, stderr.String(), now, logs.String())
	}
	for _, want := range []string{"login shown", "unauthenticated api refused", "bad key refused", "logged in", "session opened",
		"tool card shown", "partial answer shown", "approved", "answer complete", "run completed in table", "run denied in table", "search works",
		"charts drawn", "other key sees nothing", "logged out"} {
		if !strings.Contains(got, "step: "+want) {
			t.Errorf("step %q missing:\n%s", want, got)
		}
	}
	// The approved command really ran on the server.
	if _, err := os.Stat(build); !os.IsNotExist(err) {
		t.Errorf("build/ still exists after the approved rm -rf build: %v", err)
	}
	if _, err := os.Stat(cache); err != nil {
		t.Errorf("cache/ is gone although rm -rf cache was denied: %v", err)
	}
}

// TestServeDashboardConfig: server.ui in config.yaml turns the dashboard on; by default /ui
// is a 404, with or without a key.
func TestServeDashboardConfig(t *testing.T) {
	get := func(base, path, key string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	off := startServe(t)
	for _, key := range []string{"", testAPIKey} {
		if res, body := get(off.base, "/ui/", key); res.StatusCode != 404 {
			t.Fatalf("dashboard off, key %q: %d %s", key, res.StatusCode, body)
		}
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("server:\n  ui: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	on := startServe(t, "HERMES_HOME="+home) // the last HERMES_HOME in the environment wins
	res, body := get(on.base, "/ui/", "")
	if res.StatusCode != 200 || !strings.Contains(body, `id="login-form"`) ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || res.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("dashboard on: %d %v\n%.200s", res.StatusCode, res.Header, body)
	}
	if res, _ := get(on.base, "/api/sessions", ""); res.StatusCode != 401 {
		t.Fatalf("the API without a key: %d", res.StatusCode)
	}
}
