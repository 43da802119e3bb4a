package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The cwd of config.yaml (every new session's working directory when no --cwd names one) is
// checked when a command starts: a relative path, a missing directory or a file is one line
// naming config.yaml, and nothing is stored; an existing directory is the sessions' cwd.
func TestConfigCwdIsChecked(t *testing.T) {
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "afile"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(work, "missing")
	for _, c := range []struct{ cwd, want string }{
		{"relative", `hermes: cwd "relative" in config.yaml is not an absolute path`},
		{missing, `hermes: cwd "` + missing + `" in config.yaml: no such directory`},
		{filepath.Join(work, "afile"), `hermes: cwd "` + filepath.Join(work, "afile") + `" in config.yaml: not a directory`},
		{work, ""},
	} {
		home := t.TempDir()
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("cwd: "+c.cwd+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + repoPath("scripts", "demo", "demo.cassette.json")}
		r := hermes(t, work, env, "chat", "--approve", "deny", "-q", demoPrompt)
		if c.want == "" {
			if r.code != 0 || !strings.Contains(r.stdout, demoAnswer) {
				t.Fatalf("cwd %q: exit %d\nstdout %s\nstderr %s", c.cwd, r.code, r.stdout, r.err)
			}
			continue
		}
		if r.code != 1 || r.stdout != "" || strings.TrimSpace(r.err) != c.want {
			t.Errorf("cwd %q: exit %d\nstdout %q\nstderr %s", c.cwd, r.code, r.stdout, r.err)
		}
		if ls := hermes(t, work, env, "sessions", "-empty"); strings.Count(ls.stdout, "\n") > 1 {
			t.Errorf("cwd %q: a refused command stored a session:\n%s", c.cwd, ls.stdout)
		}
	}
}

// A command that takes no arguments refuses one (a typo such as `hermes sessions all` for
// -all) as a usage error instead of ignoring it.
func TestStrayArgumentsAreUsageErrors(t *testing.T) {
	work := t.TempDir()
	env := []string{"HERMES_HOME=" + t.TempDir()}
	for _, args := range [][]string{{"sessions", "all"}, {"acp", "x"}, {"gateway", "x"}, {"serve", "x"}, {"mcp", "serve", "x"}, {"demo", "x"}, {"sessions", "-n", "3", "x"}} {
		name := strings.Join(args[:len(args)-1], " ")
		if args[0] == "sessions" {
			name = "sessions"
		}
		r := hermes(t, work, env, args...)
		want := `hermes ` + name + `: unexpected argument "` + args[len(args)-1] + `"`
		if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.err, want) || strings.Count(r.err, "\n") != 1 {
			t.Errorf("%q: exit %d\nstdout %q\nstderr %s", args, r.code, r.stdout, r.err)
		}
	}
}
