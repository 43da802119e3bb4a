package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/redact"
)

// TestShowMasksSecrets: config show prints no provider header value, no user info or key
// query parameter of a base URL, no MCP credential (env, headers, URL, args), and no API key,
// while the rest stays readable.
func TestShowMasksSecrets(t *testing.T) {
	home := t.TempDir()
	yml := `providers:
  corp:
    base_url: https://svc-user:svc-pass-41@llm.corp.example/v1?key=query-key-42&region=eu
    api_key: corp-api-key-43
    headers:
      X-Custom-Auth: header-value-44
      HTTP-Referer: https://referer.example/app-45
mcp:
  servers:
    remote:
      url: https://mcp-user:mcp-pass-46@mcp.example/mcp?access_token=mcp-token-47
      headers: {Authorization: "Bearer mcp-bearer-48"}
    local:
      command: /usr/bin/server
      args: ["--verbose", "--api-key=arg-key-49", "--token", "arg-token-53", "--port", "8080"]
      env: {GITHUB_TOKEN: env-token-50}
tools:
  env_passthrough: [GH_TOKEN, "AWS_*"]
server:
  api_key: server-key-51-aaaaaaaaaaaa
`
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{"HERMES_HOME": home, "OPENROUTER_API_KEY": "or-key-52-bbbbbbbb"}))
	if err != nil {
		t.Fatal(err)
	}
	out := c.Show()
	for _, secret := range []string{"svc-user", "svc-pass-41", "query-key-42", "corp-api-key-43", "header-value-44", "app-45",
		"mcp-user", "mcp-pass-46", "mcp-token-47", "mcp-bearer-48", "arg-key-49", "env-token-50", "server-key-51", "or-key-52", "arg-token-53"} {
		if strings.Contains(out, secret) {
			t.Errorf("config show prints %q:\n%s", secret, out)
		}
	}
	for _, keep := range []string{"llm.corp.example/v1", "region=eu", "mcp.example/mcp", "--verbose", "--token", "8080", "X-Custom-Auth", "GITHUB_TOKEN", "GH_TOKEN", "AWS_*"} {
		if !strings.Contains(out, keep) {
			t.Errorf("config show lost %q:\n%s", keep, out)
		}
	}

	// Load registered the secrets: they are masked wherever they are printed.
	for _, secret := range []string{"corp-api-key-43", "mcp-bearer-48", "env-token-50", "server-key-51-aaaaaaaaaaaa", "or-key-52-bbbbbbbb"} {
		if got := redact.String("failed with " + secret); strings.Contains(got, secret) {
			t.Errorf("%q was not registered: %s", secret, got)
		}
	}
	if got := c.SecretEnv(); !slices.Contains(got, "HERMES_API_KEY") || !slices.Contains(got, "OPENROUTER_API_KEY") || !slices.Contains(got, "VLLM_API_KEY") {
		t.Errorf("SecretEnv = %v", got)
	}
	if !slices.Equal(c.Tools.EnvPassthrough, []string{"GH_TOKEN", "AWS_*"}) {
		t.Errorf("tools.env_passthrough = %v", c.Tools.EnvPassthrough)
	}
}
