package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
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
