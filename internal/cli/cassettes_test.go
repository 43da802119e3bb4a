package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/config"
)

// A replay provider serving network clients opens the configured cassettes and names under its
// dir, and refuses every other name before touching the filesystem: absolute paths, names that
// climb out of dir, and files that exist but nobody offered.
func TestCassettesServeOnly(t *testing.T) {
	demo, err := os.ReadFile(repoPath("scripts", "demo", "demo.cassette.json"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "cassettes")
	for _, f := range []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "sub", "b.json"), filepath.Join(root, "outside.json"), filepath.Join(root, "default.json")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, demo, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	def := filepath.Join(root, "default.json")
	cfg := &config.Config{Model: "replay:" + def, Providers: map[string]config.Provider{"replay": {Type: "replay", Dir: dir, Models: []string{"listed-missing.json"}}}}
	c := &cassettes{dir: dir}
	c.serveOnly(cfg, "replay")
	for name, want := range map[string]string{
		def:                                 "",
		"a.json":                            "",
		"sub/b.json":                        "",
		"listed-missing.json":               "no such file", // offered: opened, and its own error
		"../outside.json":                   "not offered",
		filepath.Join(root, "outside.json"): "not offered",
		filepath.Join(dir, "a.json"):        "not offered", // under dir, but only by relative name
		"/etc/passwd":                       "not offered",
		"":                                  "not offered",
	} {
		err := c.CheckModel(name)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", name, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want an error with %q", name, err, want)
		}
	}
	// The local user names any file.
	local := &cassettes{dir: dir}
	if err := local.CheckModel(filepath.Join(root, "outside.json")); err != nil {
		t.Errorf("local: %v", err)
	}
}
