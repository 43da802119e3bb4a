package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/loadgen"
)

// TestServeSIGTERMWithIdleConnections starts `hermes serve` as a real subprocess, leaves it
// with idle keep-alive connections (each has had a request answered) and connections that
// never sent a byte, and sends SIGTERM: the process must exit cleanly and promptly, closing
// those connections rather than waiting for them. The bound is generous (the machine may be
// loaded); the time taken is logged.
func TestServeSIGTERMWithIdleConnections(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	model := openaitest.New(t)
	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "HERMES_TEST_AS_MAIN=1", "HERMES_HOME="+home, "HERMES_MODEL="+interopModel,
		"OPENAI_BASE_URL="+model.URL(), "OPENAI_API_KEY=k", "HERMES_API_KEY="+testAPIKey)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var werr error
	var logs lockedBuffer
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logs.Write([]byte(line + "\n"))
			if _, after, ok := strings.Cut(line, "listening on http://"); ok {
				addr <- strings.Fields(after)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		werr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var hostport string
	select {
	case hostport = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatalf("hermes serve did not start:\n%s", logs.String())
	}

	const keepAlive, silent = 20, 10
	var conns []net.Conn
	for range keepAlive {
		c, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Close {
			t.Fatalf("/health: %d, close %v", res.StatusCode, res.Close)
		}
		conns = append(conns, c)
	}
	for range silent {
		c, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("hermes serve still running 30 s after SIGTERM:\n%s", logs.String())
	}
	took := time.Since(start)
	t.Logf("hermes serve exited %v after SIGTERM with %d idle keep-alive and %d silent connections", took.Round(time.Millisecond), keepAlive, silent)
	if werr != nil {
		t.Fatalf("exit: %v\n%s", werr, logs.String())
	}
	if took > 3*time.Second {
		t.Errorf("hermes serve took %v to exit after SIGTERM; idle connections must not hold it\n%s", took, logs.String())
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		// EOF, or a reset for a connection still in the listen queue when it closed.
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection %d not closed by the server: %v", i, err)
		}
	}
}

// TestServeSurvivesDescriptorFlood is the descriptor-exhaustion defect as an attacker would
// cause it: `hermes serve` runs with 256 open files (hard limit too, so raising the soft
// limit does not help) and a run in flight at the model, and 400 unauthenticated connections
// are opened and left silent or half-sent. The server must refuse what is over its caps (the
// default total cap follows the open-file limit; the per-address cap is 64 here), keep
// answering /health from another address, and finish the run: before, accept4 failed with
// EMFILE, the server exited and the run became unknown.
func TestServeSurvivesDescriptorFlood(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh for ulimit")
	}
	home, cwd := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("server:\n  max_conns_per_ip: 64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	model := openaitest.New(t)
	gate := openaitest.NewGate()
	model.Enqueue(openaitest.Response{Text: []string{"held ", "then released"}, FaultAt: 1, Gate: gate})
	cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" serve --addr 127.0.0.1:0`, os.Args[0])
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "HERMES_TEST_AS_MAIN=1", "HERMES_HOME="+home, "HERMES_MODEL="+interopModel,
		"OPENAI_BASE_URL="+model.URL(), "OPENAI_API_KEY=k", "HERMES_API_KEY="+testAPIKey)
	hostport, exited, logs := startServeCmd(t, cmd)
	base := "http://" + hostport
	lt := &loadgen.Target{BaseURL: base + "/v1", APIKey: testAPIKey, Client: loadgen.NewClient(4)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runID, err := startRun(ctx, lt, "a run in flight during the flood")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-gate.Reached():
	case <-time.After(30 * time.Second):
		t.Fatalf("the run never reached the model:\n%s", logs.String())
	}

	const flood = 400
	for i := range flood {
		c, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		if i%2 == 1 {
			_, _ = io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: x\r\n")
		}
	}
	select {
	case <-exited:
		t.Fatalf("hermes serve exited under the flood:\n%s", logs.String())
	default:
	}
	// /health from another address, on a fresh connection, while the flood is held.
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	probe := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	res, err := probe.Get(base + "/health")
	if err != nil {
		t.Fatalf("/health during the flood: %v\n%s", err, logs.String())
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/health during the flood: %s", res.Status)
	}
	gate.Release()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+runID, nil)
		req.Header.Set("Authorization", "Bearer "+testAPIKey)
		res, err := probe.Do(req)
		if err != nil {
			t.Fatalf("GET the run: %v\n%s", err, logs.String())
		}
		var out struct{ Status string }
		_ = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if out.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is %q after the flood, want completed\n%s", out.Status, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "connection refused over the connection cap") {
		t.Errorf("no connection was refused over the caps:\n%s", logs.String())
	}
}

// startServeCmd starts cmd (a hermes serve), waits for its address, and stops it at the end
// of the test. exited is closed when the process has exited.
func startServeCmd(t *testing.T, cmd *exec.Cmd) (hostport string, exited chan struct{}, logs *lockedBuffer) {
	t.Helper()
	logs = &lockedBuffer{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logs.Write([]byte(line + "\n"))
			if _, after, ok := strings.Cut(line, "listening on http://"); ok {
				addr <- strings.Fields(after)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case hostport = <-addr:
	case <-exited:
		t.Fatalf("hermes serve exited before listening:\n%s", logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("hermes serve did not start:\n%s", logs.String())
	}
	return hostport, exited, logs
}
