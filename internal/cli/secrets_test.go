package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/tool"
)

// secretsConfig configures a provider and an MCP server whose URLs, headers and env carry
// secrets; the MCP server cannot be reached, so its error (which names its URL) is reported.
const secretsConfig = `providers:
  corp:
    base_url: http://svc-user:svc-pass-61@127.0.0.1:1/v1?key=query-key-62
    headers: {X-Corp-Auth: header-value-63}
mcp:
  servers:
    remote:
      url: http://mcp-user:mcp-pass-64@127.0.0.1:1/mcp?access_token=mcp-token-65
      headers: {Authorization: "Bearer mcp-bearer-66"}
`

var planted = []string{"svc-user", "svc-pass-61", "query-key-62", "header-value-63", "mcp-user", "mcp-pass-64", "mcp-token-65", "mcp-bearer-66"}

func secretsHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(secretsConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

func assertNoPlanted(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range planted {
		if strings.Contains(out, s) {
			t.Errorf("%s prints %q:\n%s", what, s, out)
		}
	}
}

// TestConfigShowAndMCPStatusMaskSecrets runs `hermes config show` (also what the gateway's
// cli.exec config runs) and `hermes mcp status` over a configuration full of secrets.
func TestConfigShowAndMCPStatusMaskSecrets(t *testing.T) {
	t.Setenv("HERMES_HOME", secretsHome(t))
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"config", "show"}, stdio{strings.NewReader(""), &out, &errb}); code != 0 {
		t.Fatalf("config show: exit %d: %s", code, errb.String())
	}
	assertNoPlanted(t, "config show", out.String()+errb.String())
	if !strings.Contains(out.String(), "127.0.0.1:1/mcp") || !strings.Contains(out.String(), "X-Corp-Auth") {
		t.Fatalf("config show lost the non-secret parts:\n%s", out.String())
	}

	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"mcp", "status"}, stdio{strings.NewReader(""), &out, &errb}); code != 1 {
		t.Fatalf("mcp status: exit %d, want 1 (the server is unreachable): %s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "remote (http): FAIL") {
		t.Fatalf("mcp status: %s", out.String())
	}
	assertNoPlanted(t, "mcp status", out.String()+errb.String())
}

// TestHealthAndLogsMaskSecrets: /health/detailed reports the unreachable MCP server, and the
// serve log says why it was skipped, both without the credentials of its URL and headers.
func TestHealthAndLogsMaskSecrets(t *testing.T) {
	p := startServe(t, "HERMES_HOME="+secretsHome(t))
	req, err := http.NewRequest("GET", p.base+"/health/detailed", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		MCP struct {
			Servers []struct {
				Name, Error string
			} `json:"servers"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(body, &h); err != nil || len(h.MCP.Servers) != 1 || h.MCP.Servers[0].Error == "" {
		t.Fatalf("health: want the MCP server with its error: %v %s", err, body)
	}
	if !strings.Contains(h.MCP.Servers[0].Error, "127.0.0.1:1/mcp") {
		t.Fatalf("the error should still name the endpoint: %s", h.MCP.Servers[0].Error)
	}
	assertNoPlanted(t, "/health/detailed", string(body))
	logs := p.logs.String()
	if !strings.Contains(logs, "mcp server skipped") {
		t.Fatalf("serve did not log the skipped MCP server:\n%s", logs)
	}
	assertNoPlanted(t, "the serve log", logs)
}

// TestCommandLoggerMasksConfiguredKeys: the logger every command builds masks the keys the
// configuration loaded, wherever a log line quotes them.
func TestCommandLoggerMasksConfiguredKeys(t *testing.T) {
	home := t.TempDir()
	const providerKey, serverKey = "lab-provider-key-7781", "server-key-7782-aaaaaaaaaaaa"
	yml := "providers:\n  lab:\n    base_url: http://127.0.0.1:1/v1\n    api_key: " + providerKey + "\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HERMES_HOME": home, "HERMES_API_KEY": serverKey}
	if _, err := config.Load(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	newLogger(&buf, slog.LevelInfo).Warn("provider said: bad key "+providerKey, "err", errors.New("401: "+serverKey))
	if out := buf.String(); strings.Contains(out, providerKey) || strings.Contains(out, serverKey) || !strings.Contains(out, "provider said: bad key ***") {
		t.Fatalf("log line: %s", out)
	}
}

// TestTerminalEnvironmentFromConfig: the terminal tool of the assembled engine runs commands
// without Hermes' keys, with the variables tools.env_passthrough names; a pattern there does
// not pass a provider's key variable (LAB_*, LAB_KEY).
func TestTerminalEnvironmentFromConfig(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	yml := "tools:\n  env_passthrough: [PASS_ME, \"TEAM_*\", \"LAB_*\"]\nproviders:\n  lab:\n    base_url: http://127.0.0.1:1/v1\n    api_key_env: LAB_KEY\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"OPENAI_API_KEY": "sk-env-openai-0071", "HERMES_API_KEY": "hk-env-hermes-0072", "LAB_KEY": "lab-env-key-0073",
		"TEAM_KEY": "team-env-key-0074", "PASS_ME": "passed-0075",
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	t.Setenv("HERMES_HOME", home)
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, err := build(cfg, memstore.New(), runtimeOpts{cwd: cwd, logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	term, err := a.eng.Tools().Get("terminal")
	if err != nil {
		t.Fatal(err)
	}
	res, err := term.Call(context.Background(), tool.Call{ID: "c1", Name: "terminal", Args: json.RawMessage(`{"command":"env"}`)}, &tool.Env{SessionID: "s1", Cwd: cwd})
	if err != nil || res.IsError {
		t.Fatalf("env: %v %+v", err, res)
	}
	for _, secret := range []string{"sk-env-openai-0071", "hk-env-hermes-0072", "lab-env-key-0073"} {
		if strings.Contains(res.Content, secret) {
			t.Errorf("the command saw %q:\n%s", secret, res.Content)
		}
	}
	for _, want := range []string{"PASS_ME=passed-0075", "TEAM_KEY=team-env-key-0074"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("the command did not see %q:\n%s", want, res.Content)
		}
	}
}
