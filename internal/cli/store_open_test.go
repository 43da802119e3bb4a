package cli

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store/homestore"
)

// waitStoreProcessGone waits until no store process holds home (it exits after its idle time).
func waitStoreProcessGone(t *testing.T, home string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pid, held := homestore.LockHolder(home)
		if !held {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("store process %d still running 20s after its last client left", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOneHomeManyProcesses runs two `hermes serve`, `hermes acp`, `hermes sessions` and
// `hermes doctor` at once on one home, through its store process: none fails for the home being held, each sees
// what the others wrote, and the store process exits once they are gone.
func TestOneHomeManyProcesses(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	model := openaitest.New(t)
	model.Enqueue(openaitest.Text("hello ", "there"))

	a := serveHome(t, home, cwd, model.URL())
	b := serveHome(t, home, cwd, model.URL()) // used to fail: the data directory was locked
	code, adm := a.call(t, "POST", "/v1/runs", `{"input":"hi","session_id":"shared"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	runID := adm["run_id"].(string)
	if ev := a.terminalEvent(t, runID); ev["event"] != "run.completed" {
		t.Fatalf("run ended with %v:\n%s", ev, a.logs.String())
	}
	// The other serve process reads the run and the session the first one stored.
	if code, run := b.call(t, "GET", "/v1/runs/"+runID, ""); code != 200 || run["status"] != "completed" {
		t.Fatalf("run read through the second serve: %d %v", code, run)
	}

	res := hermes(t, cwd, []string{"HERMES_HOME=" + home}, "sessions")
	if res.code != 0 || !strings.Contains(res.stdout, "shared") {
		t.Fatalf("hermes sessions beside two serve: code %d\nstdout %s\nstderr %s", res.code, res.stdout, res.err)
	}
	// An editor's agent process beside them: it answers and stores its new session.
	acp := hermesCmd(t, cwd, []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=k"}, "acp")
	stdin, err := acp.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := acp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := acp.Start(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"`+cwd+`","mcpServers":[]}}`+"\n")
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	answer := ""
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"id":2`) {
			answer = sc.Text()
			break
		}
	}
	stdin.Close()
	_, _ = io.Copy(io.Discard, stdout)
	_ = acp.Wait()
	if !strings.Contains(answer, `"sessionId"`) {
		t.Fatalf("hermes acp beside two serve answered session/new with %q", answer)
	}
	doc := hermes(t, cwd, []string{"HERMES_HOME=" + home}, "doctor", "--check", "store")
	if doc.code != 0 {
		t.Fatalf("hermes doctor: code %d\n%s%s", doc.code, doc.stdout, doc.err)
	}
	pid, held := homestore.LockHolder(home)
	for _, want := range []string{"store process: pid " + itoa(pid), "socket " + homestore.SocketPath(home), "3 client(s)", " serve ", " doctor ", "no problems found"} {
		if !held || !strings.Contains(doc.stdout, want) {
			t.Fatalf("hermes doctor output lacks %q:\n%s", want, doc.stdout)
		}
	}
	a.term(t)
	b.term(t)
	waitStoreProcessGone(t, home)
	if log, err := os.ReadFile(homestore.LogPath(home)); err != nil || !strings.Contains(string(log), "store process idle, exiting") {
		t.Fatalf("store log (%v):\n%s", err, log)
	}
}

// TestStoreUnreachable: when the store process cannot start, a command fails with one line that
// names the home, the socket, the log and what to do.
func TestStoreUnreachable(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	// Not a store: the store process refuses the directory and exits.
	if err := os.MkdirAll(filepath.Join(home, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "state", "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := hermes(t, cwd, []string{"HERMES_HOME=" + home}, "sessions")
	lines := strings.Split(strings.TrimSpace(res.err), "\n")
	if res.code == 0 || len(lines) != 1 {
		t.Fatalf("code %d, stderr:\n%s", res.code, res.err)
	}
	// The store process started and refused the directory: the line quotes its log's reason.
	for _, want := range []string{home, homestore.SocketPath(home), homestore.LogPath(home), "not a hermes store", "fix that and retry"} {
		if !strings.Contains(lines[0], want) {
			t.Fatalf("error line lacks %q: %s", want, lines[0])
		}
	}
	log, _ := os.ReadFile(homestore.LogPath(home))
	if !strings.Contains(string(log), "not a hermes store") {
		t.Fatalf("store log does not say why:\n%s", log)
	}
}

// TestStoreErrorsActionable: a home where the store process cannot be started or reached fails
// a command with one line naming the home, the socket, the log and what to do; a stale file
// where the socket goes is replaced without a word.
func TestStoreErrorsActionable(t *testing.T) {
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	oneLine := func(t *testing.T, home string, wants ...string) {
		t.Helper()
		res := hermes(t, t.TempDir(), []string{"HERMES_HOME=" + home}, "sessions")
		lines := strings.Split(strings.TrimSpace(res.err), "\n")
		if res.code == 0 || len(lines) != 1 {
			t.Fatalf("code %d, stderr:\n%s", res.code, res.err)
		}
		for _, want := range append([]string{home, homestore.SocketPath(home), homestore.LogPath(home)}, wants...) {
			if !strings.Contains(lines[0], want) {
				t.Fatalf("error line lacks %q: %s", want, lines[0])
			}
		}
	}
	t.Run("cannot start", func(t *testing.T) {
		// The store process's log cannot be opened, so it cannot be started (a read-only home
		// fails the same way for a user other than root).
		home := t.TempDir()
		t.Cleanup(func() { waitStoreProcessGone(t, home) }) // a store process that failed may still be exiting
		if err := os.Mkdir(homestore.LogPath(home), 0o700); err != nil {
			t.Fatal(err)
		}
		oneLine(t, home, "cannot start the store process", "is a directory", "check that "+home+" is a directory you can write")
	})
	t.Run("read-only home", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into a read-only directory")
		}
		home := t.TempDir()
		if err := os.Chmod(home, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(home, 0o700) })
		oneLine(t, home, "cannot start the store process", "permission denied", "check that "+home+" is a directory you can write")
	})
	t.Run("socket path taken", func(t *testing.T) {
		// Something that is not a socket, and that the store process cannot remove, holds the
		// socket's path.
		home := t.TempDir()
		t.Cleanup(func() { waitStoreProcessGone(t, home) }) // a store process that failed may still be exiting
		if err := os.MkdirAll(filepath.Join(homestore.SocketPath(home), "kept"), 0o700); err != nil {
			t.Fatal(err)
		}
		oneLine(t, home, "is not a socket", "remove "+homestore.SocketPath(home)+" and retry")
		if log, _ := os.ReadFile(homestore.LogPath(home)); !strings.Contains(string(log), "address already in use") {
			t.Fatalf("store log does not say why:\n%s", log)
		}
	})
	t.Run("store directory blocked", func(t *testing.T) {
		// A file where the store's directory goes: the process starts, fails before it listens,
		// and says why in its log; the command quotes it and does not advise removing a socket
		// that is not there.
		home := t.TempDir()
		t.Cleanup(func() { waitStoreProcessGone(t, home) })
		if err := os.WriteFile(filepath.Join(home, "state"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		oneLine(t, home, "it failed (create store directory", "not a directory", "fix that and retry")
		if res := hermes(t, t.TempDir(), []string{"HERMES_HOME=" + home}, "sessions"); strings.Contains(res.err, "remove ") {
			t.Fatalf("advises removing a socket that does not exist: %s", res.err)
		}
	})
	t.Run("stale file at the socket path", func(t *testing.T) {
		home := t.TempDir()
		t.Cleanup(func() { waitStoreProcessGone(t, home) })
		if err := os.WriteFile(homestore.SocketPath(home), []byte("left over"), 0o600); err != nil {
			t.Fatal(err)
		}
		if res := hermes(t, t.TempDir(), []string{"HERMES_HOME=" + home}, "sessions"); res.code != 0 {
			t.Fatalf("code %d, stderr:\n%s", res.code, res.err)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
