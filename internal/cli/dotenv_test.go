package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// configShow runs `hermes config show` as a subprocess with env, the named variables removed
// from the inherited environment (so the test's own environment does not decide the outcome).
func configShow(t *testing.T, env []string, drop ...string) string {
	t.Helper()
	cmd := hermesCmd(t, t.TempDir(), env, "config", "show")
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(drop, k) && !slices.Contains(env, kv)
	})
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("config show: %v\n%s", err, errb.String())
	}
	return out.String()
}

// Every command loads $HERMES_HOME/.env at start, as an editor that starts `hermes acp` passes
// no shell environment; a variable already set wins over the file.
func TestDotEnvAtStart(t *testing.T) {
	home := t.TempDir()
	env := "# keys for editors\nHERMES_MODEL=openai:gpt-from-dotenv\nexport OPENAI_BASE_URL='http://127.0.0.1:9/v1'\n\nnot a pair\n"
	if err := os.WriteFile(filepath.Join(home, ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"HERMES_HOME=" + home, "HERMES_STORE_PROCESS=off"}
	out := configShow(t, base, "HERMES_MODEL", "OPENAI_BASE_URL")
	if !strings.Contains(out, "model: openai:gpt-from-dotenv") || !strings.Contains(out, "base_url: http://127.0.0.1:9/v1") {
		t.Fatalf("config show with .env:\n%s", out)
	}
	out = configShow(t, append(base, "HERMES_MODEL=openai:gpt-shell"), "HERMES_MODEL", "OPENAI_BASE_URL")
	if !strings.Contains(out, "model: openai:gpt-shell") || !strings.Contains(out, "base_url: http://127.0.0.1:9/v1") {
		t.Fatalf("a variable already set must win over .env:\n%s", out)
	}
	if err := os.Remove(filepath.Join(home, ".env")); err != nil {
		t.Fatal(err)
	}
	if out := configShow(t, base, "HERMES_MODEL", "OPENAI_BASE_URL"); strings.Contains(out, "gpt-from-dotenv") {
		t.Fatalf("without .env:\n%s", out)
	}
}

// Values are read as other dotenv readers read them: comments after a value, quotes, escapes in
// double quotes, and a # inside a word kept.
func TestDotEnvValues(t *testing.T) {
	for in, want := range map[string]string{
		`replay:/x.json # the cassette`: "replay:/x.json",
		`plain`:                         "plain",
		`  spaced  `:                    "spaced",
		`pass#word`:                     "pass#word",
		"tab\t# comment":                "tab",
		`# only a comment`:              "",
		`'single # kept' # comment`:     "single # kept",
		`"double # kept" # comment`:     "double # kept",
		`"a\nb\t\"c\"\\d\x"`:            "a\nb\t\"c\"\\d\\x",
		`'no \n escapes'`:               `no \n escapes`,
		`"unclosed`:                     `"unclosed`,
		`""`:                            "",
		`it's`:                          "it's",
	} {
		if got := dotEnvValue(in); got != want {
			t.Errorf("dotEnvValue(%q) = %q, want %q", in, got, want)
		}
	}
}
