package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
)

// --cwd on chat, run, repl and test names an existing directory: a missing one, or a file, is a
// usage error (exit 2, one line naming the flag) before anything is stored, as every other
// surface refuses it (engine.ErrInvalidCwd), not a session whose first tool call fails.
func TestCwdFlagRefusesWhatIsNotADirectory(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "afile"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "x.js"), []byte(`require("hermes").create({});`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + repoPath("scripts", "demo", "demo.cassette.json")}
	missing := filepath.Join(work, "missing")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"chat", "--cwd", missing, "-q", "hi"}, `hermes chat: --cwd "` + missing + `": no such directory`},
		{[]string{"chat", "--cwd", "relative", "-q", "hi"}, `hermes chat: --cwd "relative" (` + filepath.Join(work, "relative") + `): no such directory`},
		{[]string{"chat", "--cwd", "afile", "-q", "hi"}, `hermes chat: --cwd "afile" (` + filepath.Join(work, "afile") + `): not a directory`},
		{[]string{"run", "--cwd", "rel", "x.js"}, `hermes run: --cwd "rel" (` + filepath.Join(work, "rel") + `): no such directory`},
		{[]string{"run", "--cwd", missing, "x.js"}, `hermes run: --cwd "` + missing + `": no such directory`},
		{[]string{"repl", "--cwd", "rel"}, `hermes repl: --cwd "rel"`},
		{[]string{"test", "--cwd", "rel"}, `hermes test: --cwd "rel"`},
	} {
		r := hermes(t, work, env, c.args...)
		if r.code != 2 || r.stdout != "" || strings.Count(r.err, "\n") != 1 || !strings.HasPrefix(r.err, c.want) {
			t.Errorf("%q: exit %d\nstdout %q\nstderr %s", c.args, r.code, r.stdout, r.err)
		}
	}
	if ls := hermes(t, work, env, "sessions", "-empty"); strings.Count(ls.stdout, "\n") != 1 {
		t.Fatalf("a refused command stored a session:\n%s", ls.stdout)
	}
}

// A relative --cwd is taken from the process's working directory, as hermes.create({cwd}) takes
// it in a script: the session stores the absolute path and its tools run there.
func TestCwdFlagResolvesARelativeDirectory(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	sub := filepath.Join(work, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + repoPath("scripts", "demo", "demo.cassette.json")}
	r := hermes(t, work, env, "chat", "--cwd", "sub", "--approve", "deny", "-q", demoPrompt)
	if r.code != 0 || !strings.Contains(r.stdout, demoAnswer) || strings.Contains(r.err, "no such file") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.err)
	}
	if _, err := os.Stat(filepath.Join(sub, "notes", "todo.md")); err != nil {
		t.Fatalf("the demo's write_file did not write under --cwd: %v", err)
	}
	script := filepath.Join(work, "cwd.js")
	os.WriteFile(script, []byte(`const s = require("hermes").create({}); print(s.info().cwd);`), 0o600)
	run := hermes(t, work, env, "run", "--cwd", "sub", "cwd.js")
	if run.code != 0 || run.stdout != sub+"\n" {
		t.Fatalf("run: exit %d\nstdout %q\nstderr %s", run.code, run.stdout, run.err)
	}
	ls := hermes(t, work, env, "sessions", "-json", "-empty")
	if ls.code != 0 {
		t.Fatalf("sessions: exit %d: %s", ls.code, ls.err)
	}
	n := 0
	for l := range strings.Lines(ls.stdout) {
		var s store.Session
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		if s.Cwd != sub {
			t.Errorf("session %s stored cwd %q, want %q", s.ID, s.Cwd, sub)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("want the chat's and the script's sessions:\n%s", ls.stdout)
	}
}
