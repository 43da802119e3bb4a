package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/redact"
)

// dotEnvPair is one KEY=VALUE line of a .env file.
type dotEnvPair struct{ key, value string }

// readDotEnv parses path: KEY=VALUE lines, an optional "export " prefix, values optionally in
// single or double quotes, blank lines and # comments skipped. A missing file has no pairs.
// Values of secret-looking names are registered for redaction.
func readDotEnv(path string) ([]dotEnvPair, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []dotEnvPair
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), dotEnvValue(v)
		if k == "" {
			continue
		}
		if redact.SecretName(k) {
			redact.Register(v)
		}
		out = append(out, dotEnvPair{k, v})
	}
	return out, sc.Err()
}

// dotEnvValue is the value of a KEY=VALUE line, as dotenv files are read elsewhere (docker
// compose, python-dotenv): a value in single quotes is taken as written; one in double quotes
// with \n, \t, \" and \\ escapes; after the closing quote, and in an unquoted value from a
// # preceded by a space or tab, the rest is a comment. A # inside a word (a password) is kept.
func dotEnvValue(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 0 && (v[0] == '\'' || v[0] == '"') {
		q := v[0]
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == q:
				return b.String() // the rest: a comment, or nothing
			case q == '"' && c == '\\' && i+1 < len(v):
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case '"', '\\':
					b.WriteByte(v[i])
				default:
					b.WriteByte('\\')
					b.WriteByte(v[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		return v // no closing quote: the value as written
	}
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			return strings.TrimSpace(v[:i])
		}
	}
	if strings.HasPrefix(v, "#") {
		return ""
	}
	return v
}

// loadDotEnv sets KEY=VALUE lines of path into the environment and returns the keys that
// changed (reload.env: the file wins). A missing file changes nothing.
func loadDotEnv(path string) ([]string, error) {
	pairs, err := readDotEnv(path)
	var changed []string
	for _, p := range pairs {
		if os.Getenv(p.key) != p.value {
			os.Setenv(p.key, p.value)
			changed = append(changed, p.key)
		}
	}
	return changed, err
}

// startEnv loads $HERMES_HOME/.env (default ~/.hermes/.env) when a command starts, for every
// command: an editor or service manager that starts hermes does not pass the user's shell
// environment. A variable already set is kept; a file that cannot be read is reported on
// stderr and the command goes on.
func startEnv(stderr io.Writer) {
	home := os.Getenv("HERMES_HOME")
	if home == "" {
		home = config.DefaultHome()
	}
	path := filepath.Join(home, ".env")
	pairs, err := readDotEnv(path)
	if err != nil {
		fmt.Fprintf(stderr, "hermes: %s: %v (ignored)\n", path, err)
	}
	for _, p := range pairs {
		if _, set := os.LookupEnv(p.key); !set {
			os.Setenv(p.key, p.value)
		}
	}
}
