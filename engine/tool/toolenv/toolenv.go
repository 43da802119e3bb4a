// Package toolenv builds the environment of the processes tools start: terminal commands,
// background processes and MCP stdio servers. They do not inherit Hermes' environment, which
// holds the API keys of the server and of the model providers: one `env` command would put
// those in the transcript and send them to the model. A child gets the variables of an
// allow-list (where things are, who the user is, the locale), the variables the user names in
// tools.env_passthrough, and the values configured for it (an MCP server's env).
package toolenv

import (
	"os"
	"runtime"
	"sort"
	"strings"
)

// Allowed are the variables every tool process gets when Hermes has them. They say where
// things are and how to format text; none of them is a credential. Left out on purpose, and
// available through Policy.Passthrough:
//   - SSH_AUTH_SOCK and GPG_AGENT_INFO: a socket to an agent holding keys is a credential in
//     effect (the model could sign and push as the user);
//   - HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY: proxy URLs often carry a user and
//     password;
//   - GOPROXY, GOPRIVATE, GONOSUMDB and the like: module proxy URLs may carry tokens too;
//   - DISPLAY, WAYLAND_DISPLAY, DBUS_SESSION_BUS_ADDRESS: a door to the user's desktop session.
var Allowed = []string{
	// Who and where.
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "HOSTNAME", "TMPDIR", "TMP", "TEMP",
	// Terminal and locale (LC_* and XDG_* are in AllowedPrefixes).
	"TERM", "COLORTERM", "NO_COLOR", "LANG", "LANGUAGE", "TZ",
	// Where toolchains keep their files, so builds find their caches instead of refilling
	// them. Paths only.
	"GOPATH", "GOROOT", "GOCACHE", "GOMODCACHE", "GOBIN", "GOTOOLCHAIN", "GOFLAGS", "GOENV",
	"CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME", "VIRTUAL_ENV", "PYENV_ROOT", "NVM_DIR",
	// TLS trust stores, for machines behind an inspecting proxy.
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	// Windows needs these to start anything at all.
	"SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
	"PROGRAMFILES", "PROGRAMDATA",
}

// AllowedPrefixes are variable name prefixes every tool process gets: the locale categories
// (LC_ALL, LC_CTYPE …) and the XDG base directories.
var AllowedPrefixes = []string{"LC_", "XDG_"}

// Secret are variables that hold Hermes' own API keys and the built-in providers' keys. A
// pattern in Policy.Passthrough never passes them; only the exact name does.
var Secret = []string{
	"HERMES_API_KEY", "API_SERVER_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY",
	"ANTHROPIC_API_KEY", "VLLM_API_KEY",
}

// Policy decides which of Hermes' variables a tool process gets. The zero Policy passes the
// allow-list only.
type Policy struct {
	// Passthrough names further variables to pass: an exact name (MY_TOKEN), or a pattern
	// ending in * (AWS_*, or * for everything). A pattern never passes a secret variable
	// (Secret and Policy.Secret); name it exactly to pass it.
	Passthrough []string
	// Secret adds variables a pattern never passes: the variables the configured providers
	// read their keys from.
	Secret []string
}

// Environ is the environment of a tool process started in dir: Hermes' own environment
// filtered by the policy, then extra (configured values, which win), then PWD=dir when dir is
// set. The result is never nil: a nil exec.Cmd.Env would mean "inherit everything".
func (p Policy) Environ(dir string, extra map[string]string) []string {
	return p.Filter(os.Environ(), dir, extra)
}

// Filter is Environ over a given environment (KEY=VALUE entries).
func (p Policy) Filter(environ []string, dir string, extra map[string]string) []string {
	vars := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if p.Passes(k) {
			vars[k] = v
		}
	}
	for k, v := range extra {
		if k != "" && !strings.Contains(k, "=") {
			vars[k] = v
		}
	}
	if dir != "" {
		// The parent's PWD names the parent's directory; a shell started elsewhere would
		// believe it.
		vars["PWD"] = dir
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Passes reports whether the variable name is passed to tool processes.
func (p Policy) Passes(name string) bool {
	for _, e := range p.Passthrough {
		if !strings.HasSuffix(e, "*") && same(e, name) {
			return true // an exact name passes anything, secrets included
		}
	}
	if p.secret(name) {
		return false
	}
	for _, a := range Allowed {
		if same(a, name) {
			return true
		}
	}
	for _, pre := range AllowedPrefixes {
		if hasPrefix(name, pre) {
			return true
		}
	}
	for _, e := range p.Passthrough {
		if pre, ok := strings.CutSuffix(e, "*"); ok && hasPrefix(name, pre) {
			return true
		}
	}
	return false
}

func (p Policy) secret(name string) bool {
	for _, s := range Secret {
		if same(s, name) {
			return true
		}
	}
	for _, s := range p.Secret {
		if same(s, name) {
			return true
		}
	}
	return false
}

// Variable names are case-insensitive on Windows only.
func same(a, b string) bool {
	if runtime.GOOS == "windows" {
		return strings.EqualFold(a, b)
	}
	return a == b
}

func hasPrefix(s, pre string) bool {
	return len(s) >= len(pre) && same(s[:len(pre)], pre)
}
