package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/model/replay"
)

// TestMain lets the test binary act as the hermes binary in a child process, so CLI tests run
// the real program in a real subprocess.
func TestMain(m *testing.M) {
	// Command tests open badger in their own process (the escape hatch), each on a home of its
	// own; the store_open tests, and engine/store/homestore's, run the store process. Set
	// before acting as hermes too: a child inherits the choice its test made.
	if os.Getenv(envStoreProcess) == "" {
		os.Setenv(envStoreProcess, "off")
	}
	if os.Getenv("HERMES_TEST_AS_MAIN") == "1" {
		os.Exit(Main(context.Background(), "", os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type cliResult struct {
	code        int
	stdout, err string
}

func hermesCmd(t *testing.T, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "HERMES_TEST_AS_MAIN=1"), env...)
	return cmd
}

func hermes(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := hermesCmd(t, dir, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{code, out.String(), errb.String()}
}

func TestChatOneShotFromCassette(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	cassette := repoPath("scripts", "demo", "demo.cassette.json")
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + cassette}
	r := hermes(t, work, env, "chat", "--approve", "deny", "-q", demoPrompt)
	if r.code != 0 || !strings.Contains(r.stdout, demoAnswer) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.err)
	}
	if !strings.Contains(r.err, "→ deny") || !strings.Contains(r.err, "⚙ terminal") {
		t.Fatalf("stderr: %s", r.err)
	}
	if _, err := os.Stat(filepath.Join(work, "build")); err != nil {
		t.Fatal("a denied command ran")
	}
	if strings.Contains(r.stdout, "⚙") {
		t.Fatal("tool activity must go to stderr, not stdout")
	}
	id := regexp.MustCompile(`\[session (\S+) ·`).FindStringSubmatch(r.err)
	if id == nil {
		t.Fatalf("no session id in stderr: %s", r.err)
	}
	// Continue the session with another recorded model.
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("Still ", "here."))
	cas, err := replay.RecordFrom(context.Background(), srv.URL(), "", []model.Request{{Model: "m", Messages: []model.Message{{Role: "user", Content: "and now?"}}}})
	if err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(t.TempDir(), "next.cassette.json")
	if err := cas.Save(next); err != nil {
		t.Fatal(err)
	}
	r2 := hermes(t, work, env, "chat", "--session", id[1], "--model", "replay:"+next, "-q", "and now?")
	if r2.code != 0 || r2.stdout != "Still here.\n" {
		t.Fatalf("continue: exit %d\n%q\n%s", r2.code, r2.stdout, r2.err)
	}
	ls := hermes(t, work, env, "sessions")
	if ls.code != 0 || sessionRow(ls.stdout, id[1])["ROWS"] != "10" {
		t.Fatalf("sessions: %d %s %s", ls.code, ls.stdout, ls.err)
	}
	// A broken cassette is refused before the session is switched to it: exit 1, said once.
	broken := filepath.Join(t.TempDir(), "broken.cassette.json")
	os.WriteFile(broken, []byte(`{"version":1,`), 0o600)
	r3 := hermes(t, work, env, "chat", "--session", id[1], "--model", "replay:"+broken, "-q", "again")
	if r3.code != 1 || strings.Count(r3.err, "invalid cassette") != 1 || strings.Count(r3.err, "\n") != 1 || !strings.Contains(r3.err, "broken.cassette.json") {
		t.Fatalf("broken cassette: exit %d\n%s", r3.code, r3.err)
	}
	if ls := hermes(t, work, env, "sessions"); sessionRow(ls.stdout, id[1])["MODEL"] != "replay:"+next {
		t.Fatalf("the session was switched to the refused cassette:\n%s", ls.stdout)
	}
	// The session's own cassette broken since: the turn fails with the provider's error, said
	// once; the turn's and the session's last lines name its class, not the error again.
	os.WriteFile(next, []byte(`{"version":1,`), 0o600)
	r4 := hermes(t, work, env, "chat", "--session", id[1], "-q", "again")
	if r4.code != 1 || strings.Count(r4.err, "next.cassette.json") != 1 ||
		!strings.Contains(r4.err, "[turn failed: provider_error]\n") || !strings.Contains(r4.err, " · provider_error]\n") {
		t.Fatalf("cassette broken since: exit %d\n%s", r4.code, r4.err)
	}
	bad := hermes(t, work, env, "chat", "--model", "nope:x", "-q", "hi")
	if bad.code != 1 || !strings.Contains(bad.err, "unknown model provider") {
		t.Fatalf("unknown provider: %d %s", bad.code, bad.err)
	}
}

func TestChatInterruptExitCode(t *testing.T) {
	srv := openaitest.New(t)
	g := openaitest.NewGate()
	srv.Enqueue(openaitest.Response{Text: []string{"thinking", " forever"}, FaultAt: 2, Gate: g})
	defer g.Release()
	cmd := hermesCmd(t, t.TempDir(), []string{"HERMES_HOME=" + t.TempDir(), "HERMES_MODEL=openai:fake", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=k"}, "chat", "-q", "hi")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 || !strings.Contains(errb.String(), "cancelled") {
		t.Fatalf("want exit 130 after Ctrl-C, got %v\n%s", err, errb.String())
	}
}

func TestConfigShow(t *testing.T) {
	r := hermes(t, t.TempDir(), []string{"HERMES_HOME=" + t.TempDir(), "OPENAI_API_KEY=sk-secret-value-1234"}, "config", "show")
	if r.code != 0 || strings.Contains(r.stdout, "sk-secret-value-1234") || !strings.Contains(r.stdout, "model: openai:gpt-4.1") {
		t.Fatalf("config show: %d\n%s\n%s", r.code, r.stdout, r.err)
	}
}

func TestChatPolicyFlag(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(t.TempDir(), "deny_rm.js")
	os.WriteFile(pol, []byte(`export function approval(req) { return req.pattern === "recursive delete" ? {decision: "deny", reason: "no rm -r in this repo"} : "allow"; }`), 0o600)
	cassette := repoPath("scripts", "demo", "demo.cassette.json")
	r := hermes(t, work, []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + cassette}, "chat", "--policy", pol, "--approve", "once", "-q", demoPrompt)
	if r.code != 0 || !strings.Contains(r.err, "no rm -r in this repo") || strings.Contains(r.err, "approval needed") {
		t.Fatalf("the policy must deny without asking: exit %d\n%s", r.code, r.err)
	}
	if _, err := os.Stat(filepath.Join(work, "build")); err != nil {
		t.Fatal("a command the policy denied ran")
	}
}

// `hermes chat -q ""` (a CI job's unset $PROMPT) and a prompt without -q are usage errors (exit
// 2, nothing stored), not the interactive loop.
func TestChatRefusesAnEmptyQuery(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + repoPath("scripts", "demo", "demo.cassette.json")}
	for _, args := range [][]string{{"chat", "-q", ""}, {"chat", "-q", " \t"}, {"chat", "hello"}} {
		r := hermes(t, work, env, args...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.err, "hermes chat:") {
			t.Errorf("%q: exit %d\nstdout %q\nstderr %s", args, r.code, r.stdout, r.err)
		}
	}
	if ls := hermes(t, work, env, "sessions", "-empty"); strings.Count(ls.stdout, "\n") != 1 {
		t.Fatalf("a refused chat stored a session:\n%s", ls.stdout)
	}
}

// A hosted provider without its key fails the turn at once, saying what to set, once: no call
// goes out to be turned away or retried. The prompt is kept (the session can go on once the key
// is set). The same model over an endpoint of the user's own (which may need no key) is tried.
func TestChatWithoutAKeySaysWhatToSet(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	env := []string{"HERMES_HOME=" + home, "OPENAI_API_KEY=", "OPENAI_BASE_URL=", "HERMES_MODEL=openai:gpt-4o"}
	r := hermes(t, work, env, "chat", "-q", "hi")
	if r.code != 1 || strings.Count(r.err, "provider openai has no API key: set OPENAI_API_KEY") != 1 || strings.Contains(r.err, "unreachable") {
		t.Fatalf("exit %d\n%s", r.code, r.err)
	}
	local := hermes(t, work, append(env, "OPENAI_BASE_URL=http://127.0.0.1:1/v1"), "chat", "-q", "hi")
	if local.code != 1 || strings.Contains(local.err, "no API key") || !strings.Contains(local.err, "unreachable") {
		t.Fatalf("own endpoint: exit %d\n%s", local.code, local.err)
	}
}
