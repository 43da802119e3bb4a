package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

func TestReplPipeMode(t *testing.T) {
	for _, c := range []struct {
		lang, in, out, err string
	}{
		{"js", "1 + 1\nfunction f(x) {\n  return x * 3\n}\nf(2)\nnull.x\nhermes.version\n", "2\n6\n\"dev\"\n", "repl:1: TypeError"},
		{"lua", "1 + 1\nfunction f(x)\n  return x * 3\nend\nf(2)\nerror('boom')\nhermes.version\n", "2\n6\n\"dev\"\n", "repl:1: boom"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			cmd := hermesCmd(t, t.TempDir(), []string{"HERMES_HOME=" + t.TempDir()}, "repl", "--lang", c.lang)
			var out, errb bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(c.in), &out, &errb
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("want exit 1 (one input failed), got %v", err)
			}
			if out.String() != c.out || !strings.Contains(errb.String(), c.err) {
				t.Fatalf("stdout %q\nstderr %q", out.String(), errb.String())
			}
		})
	}
}

// screen collects what the pseudo-terminal shows.
type screen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf.Write(p)
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

// expect waits until want appears after mark and returns the new mark. The deadline only turns
// a hang into a failure.
func (s *screen) expect(t *testing.T, mark int, want string) int {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		text := s.buf.String()
		s.mu.Unlock()
		if i := strings.Index(text[mark:], want); i >= 0 {
			return mark + i + len(want)
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("screen never showed %q; it shows:\n%q", want, text[mark:])
		}
	}
}

func TestReplTerminal(t *testing.T) {
	srv := openaitest.New(t)
	g := openaitest.NewGate()
	defer g.Release()
	srv.Enqueue(openaitest.Response{Text: []string{"thinking", " forever"}, FaultAt: 2, Gate: g})
	home := t.TempDir()
	cmd := hermesCmd(t, t.TempDir(), []string{"HERMES_HOME=" + home, "TERM=xterm", "HERMES_MODEL=openai:fake",
		"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=k"}, "repl")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{more: make(chan struct{}, 1)}
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = bytesCopy(scr, tty) }()
	send := func(s string) {
		if _, err := tty.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	m := scr.expect(t, 0, "js> ")
	send("1 + 41\r")
	m = scr.expect(t, m, "42")
	m = scr.expect(t, m, "js> ")

	send("hermes.vers\t") // one candidate: completed in place
	m = scr.expect(t, m, "hermes.version")
	send("\r")
	m = scr.expect(t, m, `"dev"`)

	send("function f(x) {\r")
	m = scr.expect(t, m, "... ")
	send("return x * 2 }\r")
	send("f(50)\r")
	m = scr.expect(t, m, "100")

	// Ctrl-C stops a runaway evaluation, not the REPL.
	// The loop shows it is running (twice, so it is well past starting) before Ctrl-C.
	send("for (let i = 1; ; i++) if (i % 300000 === 0) print('spin ' + i / 300000)\r")
	m = scr.expect(t, m, "spin 2")
	send("\x03")
	m = scr.expect(t, m, "[interrupted]")
	send("2 * 21\r")
	m = scr.expect(t, m, "42")

	// Ctrl-C cancels a running turn, and the session lives on.
	send("s = hermes.create({}); print('submitted'); s.run('hi')\r")
	m = scr.expect(t, m, "submitted")
	<-g.Reached()
	send("\x03")
	m = scr.expect(t, m, "[interrupted]")
	send("s.info().status\r")
	m = scr.expect(t, m, `"idle"`)
	send("s.history().length\r")
	scr.expect(t, m, "1")

	send("\x04") // Ctrl-D
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	tty.Close()
	<-copied
	hist, err := os.ReadFile(filepath.Join(home, "repl_history"))
	if err != nil || !strings.Contains(string(hist), "1 + 41\n") || !strings.Contains(string(hist), "function f(x) { return x * 2 }\n") {
		t.Fatalf("history: %q %v", hist, err)
	}
}

func bytesCopy(w *screen, r *os.File) (int64, error) {
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			w.Write(buf[:k])
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}

// TestReplNoWindowSizeLua: on a pty that reports no window size the console works as 80
// columns (completion included); Lua locals persist, "= expr" prints, completion works after
// ":", and a session prints as a summary.
func TestReplNoWindowSizeLua(t *testing.T) {
	home := t.TempDir()
	cmd := hermesCmd(t, t.TempDir(), []string{"HERMES_HOME=" + home, "TERM=xterm", "HERMES_MODEL=fake:none"}, "repl", "--lang", "lua")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{more: make(chan struct{}, 1)}
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = bytesCopy(scr, tty) }()
	send := func(s string) {
		if _, err := tty.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	m := scr.expect(t, 0, "lua> ")
	send("local x = 41\r")
	m = scr.expect(t, m, "lua> ")
	send("= x + 1\r")
	m = scr.expect(t, m, "42")
	send("s = hermes.create({title = 'r'})\r")
	m = scr.expect(t, m, "lua> ")
	send("s:pro\t")
	m = scr.expect(t, m, "s:prompt")
	send("\x15s\r") // Ctrl-U clears the line
	m = scr.expect(t, m, `Session{id: "`)
	scr.expect(t, m, `status: "idle", model: "fake:none"}`)
	send("\x04")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	tty.Close()
	<-copied
}
