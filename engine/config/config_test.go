package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaultsAndEnv(t *testing.T) {
	home := t.TempDir()
	c, err := Load(env(map[string]string{
		"HERMES_HOME": home, "HERMES_MODEL": "openai:gpt-4.1-mini",
		"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-test-123456789",
		"API_SERVER_KEY": "srv", "HERMES_POLICY": "/p.js", "HERMES_MAX_ITERATIONS": "7",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "openai:gpt-4.1-mini" || c.MaxIterations != 7 || c.Policy != "/p.js" || c.Server.APIKey != "srv" {
		t.Fatalf("env not applied: %+v", c)
	}
	if p := c.Providers["openai"]; p.BaseURL != "http://127.0.0.1:9/v1" || p.APIKey != "sk-test-123456789" {
		t.Fatalf("openai provider: %+v", p)
	}
	if c.Store.Dir != filepath.Join(home, "state") || time.Duration(c.Approvals.Timeout) != 300*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	if time.Duration(c.Scripts.HookTimeout) != 250*time.Millisecond || c.Scripts.MemoryMB != 128 || len(c.Scripts.Grants) != 0 {
		t.Fatalf("script defaults: %+v", c.Scripts)
	}
	out := c.Show()
	if strings.Contains(out, "sk-test-123456789") || !strings.Contains(out, "api_key: '***'") {
		t.Fatalf("secret not masked:\n%s", out)
	}
}

func TestLoadFileAndPrecedence(t *testing.T) {
	home := t.TempDir()
	yml := "model: ollama:llama3\nbusy_input_mode: queue\napprovals:\n  timeout: 45s\nscripts:\n  grants: [fs, \"http:api.example.com\"]\n  hook_timeout: 100ms\n  memory_mb: -1\n  workers: 3\nproviders:\n  local:\n    base_url: http://127.0.0.1:1234/v1\n    api_key_env: LOCAL_KEY\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{"HERMES_HOME": home, "LOCAL_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "ollama:llama3" || c.BusyInputMode != "queue" || time.Duration(c.Approvals.Timeout) != 45*time.Second {
		t.Fatalf("file not applied: %+v", c)
	}
	if sc := c.Scripts; len(sc.Grants) != 2 || sc.Grants[1] != "http:api.example.com" || time.Duration(sc.HookTimeout) != 100*time.Millisecond || sc.MemoryMB != -1 || sc.Workers != 3 {
		t.Fatalf("scripts: %+v", sc)
	}
	if p := c.Providers["local"]; p.Type != "openai" || p.APIKey != "k" {
		t.Fatalf("custom provider: %+v", p)
	}
	c, err = Load(env(map[string]string{"HERMES_HOME": home, "HERMES_MODEL": "local:m"}))
	if err != nil || c.Model != "local:m" {
		t.Fatalf("env must win over file: %v %+v", err, c)
	}
}

func TestLoadErrors(t *testing.T) {
	for name, yml := range map[string]string{
		"unknown key":  "modle: x\n",
		"bad type":     "max_iterations: lots\n",
		"bad duration": "approvals:\n  timeout: soon\n",
		"bad provider": "providers:\n  x:\n    type: grpc\n",
		"bad yaml":     "model: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(env(map[string]string{"HERMES_HOME": home}))
			if err == nil || !strings.Contains(err.Error(), "config.yaml") {
				t.Fatalf("want an error naming the file, got %v", err)
			}
		})
	}
	if _, err := Load(env(map[string]string{"HERMES_HOME": t.TempDir(), "HERMES_MAX_ITERATIONS": "-1"})); err == nil {
		t.Fatal("negative HERMES_MAX_ITERATIONS accepted")
	}
	if c, err := Load(env(map[string]string{"HERMES_HOME": t.TempDir()})); err != nil || c.Model == "" {
		t.Fatalf("empty home: %v", err)
	}
}

func TestLoadMCPServers(t *testing.T) {
	home := t.TempDir()
	yml := `mcp:
  servers:
    fs:
      command: npx
      args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
      env: {FS_TOKEN: "tok-123456789abc"}
      timeout: 15s
    web:
      url: http://127.0.0.1:8765/mcp
      headers: {Authorization: "Bearer abcdefghijkl"}
`
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	fs, web := c.MCP.Servers["fs"], c.MCP.Servers["web"]
	if fs.Command != "npx" || len(fs.Args) != 3 || fs.Env["FS_TOKEN"] != "tok-123456789abc" || time.Duration(fs.Timeout) != 15*time.Second {
		t.Fatalf("fs: %+v", fs)
	}
	if web.URL != "http://127.0.0.1:8765/mcp" || web.Headers["Authorization"] != "Bearer abcdefghijkl" {
		t.Fatalf("web: %+v", web)
	}
	out := c.Show()
	if strings.Contains(out, "tok-123456789abc") || strings.Contains(out, "abcdefghijkl") || !strings.Contains(out, "command: npx") {
		t.Fatalf("mcp secrets not masked:\n%s", out)
	}
	if c.MCP.Servers["fs"].Env["FS_TOKEN"] != "tok-123456789abc" {
		t.Fatal("Show changed the configuration")
	}

	bad := "mcp:\n  servers:\n    x:\n      command: a\n      url: http://b\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(env(map[string]string{"HERMES_HOME": home})); err == nil || !strings.Contains(err.Error(), `mcp server "x"`) {
		t.Fatalf("both command and url: %v", err)
	}
}

func TestLoadBrowserControlAndKeys(t *testing.T) {
	home := t.TempDir()
	c, err := Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if c.BrowserControl.Enabled {
		t.Fatal("browser control is on by default")
	}
	yml := "browser_control:\n  enabled: true\n  capabilities: [navigate, snapshot]\n  timeout: 10s\nserver:\n  extra_api_keys: [second-key-0123456789]\n  max_concurrent: 250\nproviders:\n  lab:\n    base_url: http://127.0.0.1:9/v1\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	bc := c.BrowserControl
	if !bc.Enabled || len(bc.Capabilities) != 2 || bc.Capabilities[1] != "snapshot" || time.Duration(bc.Timeout) != 10*time.Second {
		t.Fatalf("browser_control %+v", bc)
	}
	if c.Server.MaxConcurrent != 250 {
		t.Fatalf("server.max_concurrent = %d", c.Server.MaxConcurrent)
	}
	if len(c.Server.ExtraKeys) != 1 || strings.Contains(c.Show(), "second-key-0123456789") {
		t.Fatalf("extra keys %v or not masked:\n%s", c.Server.ExtraKeys, c.Show())
	}
	if c, err = Load(env(map[string]string{"HERMES_HOME": home, "HERMES_BROWSER_CONTROL": "0"})); err != nil || c.BrowserControl.Enabled {
		t.Fatalf("HERMES_BROWSER_CONTROL=0: %v %+v", err, c)
	}
	if _, err := Load(env(map[string]string{"HERMES_HOME": home, "HERMES_BROWSER_CONTROL": "maybe"})); err == nil {
		t.Fatal("HERMES_BROWSER_CONTROL=maybe accepted")
	}
	if BuiltinProvider("lab") || !BuiltinProvider("openai") || !BuiltinProvider("replay") {
		t.Fatal("BuiltinProvider")
	}
}

func TestLoadSessionIdleRelease(t *testing.T) {
	home := t.TempDir()
	c, err := Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.SessionIdleRelease != 0 {
		t.Fatalf("unset server.session_idle_release = %v, want 0 (the server's default)", c.Server.SessionIdleRelease)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("server:\n  session_idle_release: 15m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = Load(env(map[string]string{"HERMES_HOME": home})); err != nil || time.Duration(c.Server.SessionIdleRelease) != 15*time.Minute {
		t.Fatalf("server.session_idle_release: %v %v", err, c)
	}
	for v, want := range map[string]time.Duration{"30s": 30 * time.Second, "2": 2 * time.Second, "-1": -time.Second} {
		c, err := Load(env(map[string]string{"HERMES_HOME": home, "HERMES_SESSION_IDLE_RELEASE": v}))
		if err != nil || time.Duration(c.Server.SessionIdleRelease) != want {
			t.Fatalf("HERMES_SESSION_IDLE_RELEASE=%s: %v %v", v, err, c)
		}
	}
	if _, err := Load(env(map[string]string{"HERMES_HOME": home, "HERMES_SESSION_IDLE_RELEASE": "soon"})); err == nil {
		t.Fatal("HERMES_SESSION_IDLE_RELEASE=soon accepted")
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("server:\n  session_idle_release: later\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(env(map[string]string{"HERMES_HOME": home})); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad duration must name its line: %v", err)
	}
}

// TestDurationRejectsNonFinite: NaN, infinities and out-of-range second counts are errors,
// not a silent zero or overflow.
func TestDurationRejectsNonFinite(t *testing.T) {
	home := t.TempDir()
	for _, v := range []string{"NaN", "Inf", "-Inf", "1e300"} {
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("approvals:\n  timeout: "+v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(env(map[string]string{"HERMES_HOME": home})); err == nil {
			t.Errorf("approvals.timeout %s accepted", v)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("approvals:\n  timeout: 1.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(env(map[string]string{"HERMES_HOME": home})); err != nil || time.Duration(c.Approvals.Timeout) != 1500*time.Millisecond {
		t.Fatalf("1.5 seconds: %v", err)
	}
}

func TestLoadStoreURL(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("store:\n  url: postgres://db.example/hermes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.URL != "postgres://db.example/hermes" || c.Store.Dir != filepath.Join(home, "state") {
		t.Fatalf("store from config.yaml: %+v", c.Store)
	}
	c, err = Load(env(map[string]string{"HERMES_HOME": home, "HERMES_STORE": "postgres://hermes:s3cret-pw@other/h"}))
	if err != nil || c.Store.URL != "postgres://hermes:s3cret-pw@other/h" {
		t.Fatalf("HERMES_STORE override: %+v, %v", c.Store, err)
	}
	if shown := c.Show(); strings.Contains(shown, "s3cret-pw") || !strings.Contains(shown, "@other/h") {
		t.Fatalf("the store URL's password is shown:\n%s", shown)
	}
}

// MissingKey names the variable of a hosted built-in provider left without a key, and nothing
// for a provider that has one, may do without (local servers), or talks to an endpoint of the
// user's own.
func TestMissingKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Provider
		want string
	}{
		{"openai", Provider{BaseURL: "https://api.openai.com/v1"}, "OPENAI_API_KEY"},
		{"openai", Provider{BaseURL: "https://api.openai.com/v1/"}, "OPENAI_API_KEY"},
		{"anthropic", Provider{BaseURL: "https://api.anthropic.com"}, "ANTHROPIC_API_KEY"},
		{"openrouter", Provider{BaseURL: "https://openrouter.ai/api/v1"}, "OPENROUTER_API_KEY"},
		{"openai", Provider{BaseURL: "https://api.openai.com/v1", APIKey: "k"}, ""},
		{"openai", Provider{BaseURL: "http://127.0.0.1:8000/v1"}, ""}, // OPENAI_BASE_URL of the user's own
		{"openai", Provider{BaseURL: "https://api.openai.com/v1", Headers: map[string]string{"authorization": "Bearer k"}}, ""},
		{"vllm", Provider{BaseURL: "http://127.0.0.1:8000/v1"}, ""}, // its key is optional
		{"ollama", Provider{BaseURL: "http://127.0.0.1:11434/v1"}, ""},
		{"lab", Provider{BaseURL: "https://api.openai.com/v1", KeyEnv: "LAB_KEY"}, ""}, // a custom provider
	} {
		if got := MissingKey(tc.name, tc.p); got != tc.want {
			t.Errorf("MissingKey(%s, %+v) = %q, want %q", tc.name, tc.p, got, tc.want)
		}
	}
}

// An unknown key is said as a key of config.yaml, with the key it most likely meant, at every
// depth; a wrong type keeps yaml's own wording.
func TestLoadUnknownKeySuggestsTheKnownOne(t *testing.T) {
	for yml, want := range map[string]string{
		"modle: x\n":                                  `line 1: unknown key "modle" (did you mean "model"?)`,
		"server:\n  adr: 127.0.0.1:1\n":               `line 2: unknown key "adr" (did you mean "addr"?)`,
		"providers:\n  lab:\n    base_ur: http://x\n": `line 3: unknown key "base_ur" (did you mean "base_url"?)`,
		"telemetry:\n  zzzzzz: 1\n":                   `line 2: unknown key "zzzzzz"`,
		"max_iterations: lots\n":                      "cannot unmarshal",
	} {
		home := t.TempDir()
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(env(map[string]string{"HERMES_HOME": home}))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "config.Config") || strings.HasSuffix(want, `"zzzzzz"`) && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: %v, want %q", yml, err, want)
		}
	}
}

// config show prints what runs: the engine's defaults where the file and the environment say
// nothing (busy input interrupt, delegation 50/2/3, compression on at half the window).
func TestShowPrintsEffectiveDefaults(t *testing.T) {
	c, err := Load(env(map[string]string{"HERMES_HOME": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	out := c.Show()
	for _, want := range []string{"busy_input_mode: interrupt", "max_iterations: 90", "max_iterations: 50", "max_depth: 2", "max_concurrent: 3", "enabled: true", "threshold: 0.5", "context_window: 128000"} {
		if !strings.Contains(out, want) {
			t.Errorf("config show lacks %q:\n%s", want, out)
		}
	}
	for yml, want := range map[string]string{"busy_input_mode: steer\n": "steer", "display:\n  busy_input_mode: queue\n": "queue", "busy_input_mode: bogus\n": "interrupt"} {
		if c, err := loadYAML(t, yml); err != nil || c.BusyInputMode != want {
			t.Errorf("%q: %v %q, want %q", yml, err, c.BusyInputMode, want)
		}
	}
}
