package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store/homestore"
	"github.com/hermes-go/hermes/engine/store/postgres/pgtest"
)

// doctorEnv isolates a doctor run from this machine: no key, endpoint, model or policy of the
// environment reaches it (an empty variable counts as unset).
func doctorEnv(home string, kv ...string) []string {
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=", "HERMES_API_KEY=", "API_SERVER_KEY=", "HERMES_POLICY=", "HERMES_STORE=",
		"OPENAI_API_KEY=", "OPENAI_BASE_URL=", "ANTHROPIC_API_KEY=", "ANTHROPIC_BASE_URL=", "OPENROUTER_API_KEY=", "VLLM_API_KEY="}
	return append(env, kv...)
}

func writeConfig(t *testing.T, home, yaml string) string {
	t.Helper()
	p := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// doctorJSON runs `hermes doctor --json ARGS` and decodes the report.
func doctorJSON(t *testing.T, env []string, args ...string) (int, doctorReport, string) {
	t.Helper()
	r := hermes(t, t.TempDir(), env, append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s\n%s", err, r.stdout, r.err)
	}
	return r.code, rep, r.stdout
}

// findCheck returns the check of area whose name starts with name.
func findCheck(t *testing.T, rep doctorReport, area, name string) doctorCheck {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Area == area && strings.HasPrefix(c.Name, name) {
			return c
		}
	}
	t.Fatalf("no %s check %q in %+v", area, name, rep.Checks)
	return doctorCheck{}
}

func wantCheck(t *testing.T, c doctorCheck, status string, detail, fix string) {
	t.Helper()
	if c.Status != status || !strings.Contains(c.Detail, detail) || !strings.Contains(c.Fix, fix) || (status == statusOK) != (c.Fix == "") {
		t.Errorf("%s %s: got %s %q (fix %q), want %s with %q (fix %q)", c.Area, c.Name, c.Status, c.Detail, c.Fix, status, detail, fix)
	}
}

// deadURL is a base URL nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

// TestDoctorModelEndpoints checks every configured endpoint for real, against fake OpenAI and
// Anthropic servers: a key accepted and the models listed (an alias counts as its dated id), a
// configured model the endpoint does not list, a key refused by each API, an endpoint that does
// not list models, one that is unreachable, and a key variable that is not set. No key is
// printed.
func TestDoctorModelEndpoints(t *testing.T) {
	const oaKey, anKey, wrongKey, refusedKey = "oa-doctor-key-0123456789abcdef", "an-doctor-key-0123456789abcdef", "oa-wrong-key-0123456789abcdef", "an-wrong-key-0123456789abcdef"
	oa := openaitest.New(t, openaitest.WithAPIKey(oaKey), openaitest.WithModels("gpt-test", "gpt-other"))
	an := anthropictest.New(t, anthropictest.WithAPIKey(anKey), anthropictest.WithModels("claude-test-4-5-20250929", "claude-other-1"))
	refusing := anthropictest.New(t, anthropictest.WithAPIKey("the-right-key-0123456789abcdef"), anthropictest.WithModels("x"))
	nolist := openaitest.New(t)
	home := t.TempDir()
	writeConfig(t, home, `model: openai:gpt-test
fallback_models: [anthropic:claude-test-4-5, openai:gpt-missing]
providers:
  openai: {base_url: "`+oa.URL()+`"}
  anthropic: {base_url: "`+an.URL()+`"}
  wrongkey: {type: openai, base_url: "`+oa.URL()+`", api_key_env: DOCTOR_TEST_WRONG}
  refusing: {type: anthropic, base_url: "`+refusing.URL()+`", api_key: `+refusedKey+`}
  nolist: {type: openai, base_url: "`+nolist.URL()+`"}
  gone: {type: openai, base_url: "`+deadURL(t)+`"}
  keyless: {type: openai, base_url: "`+nolist.URL()+`", api_key_env: DOCTOR_TEST_KEYLESS}
`)
	env := doctorEnv(home, "OPENAI_API_KEY="+oaKey, "ANTHROPIC_API_KEY="+anKey, "DOCTOR_TEST_WRONG="+wrongKey, "DOCTOR_TEST_KEYLESS=")
	code, rep, out := doctorJSON(t, env, "--check", "models", "--timeout", "30s")
	if code != 1 || rep.OK || rep.Failed != 3 || rep.Warnings != 3 {
		t.Errorf("exit %d, ok %v, %d failed, %d warnings:\n%s", code, rep.OK, rep.Failed, rep.Warnings, out)
	}
	wantCheck(t, findCheck(t, rep, "models", "openai "+oa.URL()+"/models"), statusWarn, "2 models listed; not among them: gpt-missing", "e.g. openai:gpt-test")
	wantCheck(t, findCheck(t, rep, "models", "anthropic "+an.URL()+"/v1/models"), statusOK, "reachable, key accepted, 2 models listed", "")
	wantCheck(t, findCheck(t, rep, "models", "wrongkey "), statusFail, "key refused (HTTP 401): Incorrect API key provided.", "set DOCTOR_TEST_WRONG to a valid key")
	wantCheck(t, findCheck(t, rep, "models", "refusing "), statusFail, "key refused (HTTP 401): invalid x-api-key", "set providers.refusing.api_key in config.yaml")
	wantCheck(t, findCheck(t, rep, "models", "nolist "), statusWarn, "does not list models (HTTP 404)", "base_url")
	wantCheck(t, findCheck(t, rep, "models", "gone "), statusFail, "unreachable", "providers.gone.base_url")
	wantCheck(t, findCheck(t, rep, "models", "keyless"), statusWarn, "no key", "set DOCTOR_TEST_KEYLESS")
	for _, k := range []string{oaKey, anKey, wrongKey, refusedKey} {
		if strings.Contains(out, k) {
			t.Errorf("the report shows a key:\n%s", out)
		}
	}
	// The requests carried each API's credentials and headers.
	var sawOA, sawAN bool
	for _, r := range oa.Requests() {
		sawOA = sawOA || (r.Method == "GET" && r.Path == "/v1/models" && r.Header.Get("Authorization") == "Bearer "+oaKey)
	}
	for _, r := range an.Requests() {
		sawAN = sawAN || (r.Method == "GET" && r.Path == "/v1/models" && r.Header.Get("X-Api-Key") == anKey && r.Header.Get("Anthropic-Version") != "")
	}
	if !sawOA || !sawAN {
		t.Errorf("model list requests: openai %v, anthropic %v", sawOA, sawAN)
	}
	// The default model's provider without a key fails, naming the variable to set; the
	// built-in providers nobody uses are not asked.
	writeConfig(t, home, "model: anthropic:claude-test-4-5\n")
	r := hermes(t, t.TempDir(), doctorEnv(home), "doctor", "--check", "models")
	if r.code != 1 || !strings.Contains(r.stdout, "fail  models anthropic: no key, and anthropic:claude-test-4-5 is configured") ||
		!strings.Contains(r.stdout, "→ set ANTHROPIC_API_KEY") || strings.Contains(r.stdout, "openrouter") || strings.Contains(r.stdout, "api.openai.com") {
		t.Errorf("no key: %d\n%s%s", r.code, r.stdout, r.err)
	}
}

// TestDoctorMCPAndPolicy starts a real MCP stdio server (hermes mcp serve) and a command that
// does not exist, and checks a policy file whose example fails; then with both fixed, doctor
// passes.
func TestDoctorMCPAndPolicy(t *testing.T) {
	home, innerHome := t.TempDir(), t.TempDir()
	writeConfig(t, home, "mcp:\n  servers:\n"+hermesMCPServer("inner", innerHome)+"    broken:\n      command: /nonexistent/mcp-server\n"+
		"    away:\n      url: \""+deadURL(t)+"/mcp\"\n")
	writeTemp(t, home, "policy.js", strings.Replace(denyRmJS, `want: "allow"`, `want: "ask"`, 1))
	env := doctorEnv(home)
	code, rep, out := doctorJSON(t, env, "--check", "mcp,policy", "--timeout", "60s")
	if code != 1 || rep.Failed != 3 {
		t.Errorf("exit %d, %d failed:\n%s", code, rep.Failed, out)
	}
	wantCheck(t, findCheck(t, rep, "mcp", "away (http)"), statusFail, "", "check that the server answers at mcp.servers.away.url")
	wantCheck(t, findCheck(t, rep, "mcp", "inner (stdio)"), statusOK, "4 tools", "")
	wantCheck(t, findCheck(t, rep, "mcp", "broken (stdio)"), statusFail, "/nonexistent/mcp-server", "check mcp.servers.broken.command")
	pc := findCheck(t, rep, "policy", filepath.Join(home, "policy.js"))
	wantCheck(t, pc, statusFail, "loads; 1 of 2 examples pass", "hermes policy test -v "+filepath.Join(home, "policy.js"))
	if len(pc.More) != 1 || !strings.Contains(pc.More[0], `FAIL policy.js:7 #2 approval "ls": want "ask"`) {
		t.Errorf("failing examples: %q", pc.More)
	}

	writeConfig(t, home, "mcp:\n  servers:\n"+hermesMCPServer("inner", innerHome))
	writeTemp(t, home, "policy.js", denyRmJS)
	r := hermes(t, t.TempDir(), env, "doctor", "--check", "mcp,policy", "--timeout", "60s")
	if r.code != 0 || !strings.Contains(r.stdout, "ok    mcp    inner (stdio): 4 tools\n") ||
		!strings.Contains(r.stdout, "policy.js: loads; 2 of 2 examples pass\n") || !strings.Contains(r.stdout, "everything checked is ok") {
		t.Errorf("fixed: %d\n%s%s", r.code, r.stdout, r.err)
	}
	// A policy that does not load fails with the loader's error.
	writeTemp(t, home, "policy.js", "export function approval( {\n")
	code, rep, out = doctorJSON(t, env, "--check", "policy")
	if c := findCheck(t, rep, "policy", filepath.Join(home, "policy.js")); code != 1 || c.Status != statusFail || !strings.HasPrefix(c.Detail, "does not load: ") {
		t.Errorf("broken policy: %d\n%s", code, out)
	}
}

// TestDoctorKeys checks the API keys hermes serve accepts: too short, too few different
// characters, one character class, a placeholder, the same key twice — each named by where
// it is configured and never shown.
func TestDoctorKeys(t *testing.T) {
	keys := map[string]string{
		"short": "short-key", "few": "Ab3$Ab3$Ab3$Ab3$Ab3$", "lower": "qwzxmnbvcplokijuhygt", "placeholder": "my-CHANGEME-key-2026!",
		"good": "9f2c1e7b-44d0-4a8e-b1a2-6c3d5e7f9a0b",
	}
	home := t.TempDir()
	writeConfig(t, home, `server:
  api_key: `+keys["short"]+`
  extra_api_keys:
    - "`+keys["few"]+`"
    - {name: ci, key: `+keys["lower"]+`}
    - {name: ops, key: "`+keys["placeholder"]+`"}
    - {name: same, key: `+keys["good"]+`}
  admin_api_key: `+keys["good"]+`
`)
	code, rep, out := doctorJSON(t, doctorEnv(home), "--check", "keys")
	if code != 1 || rep.Failed != 3 || rep.Warnings != 2 {
		t.Errorf("exit %d, %d failed, %d warnings:\n%s", code, rep.Failed, rep.Warnings, out)
	}
	wantCheck(t, findCheck(t, rep, "keys", "api_key"), statusFail, "9 characters: hermes serve refuses keys shorter than 16", "replace HERMES_API_KEY")
	wantCheck(t, findCheck(t, rep, "keys", "extra_api_keys[0]"), statusWarn, "only 4 different characters", "openssl rand -hex 32")
	wantCheck(t, findCheck(t, rep, "keys", `extra_api_keys "ci"`), statusWarn, "one kind of character", "server.extra_api_keys \"ci\"")
	wantCheck(t, findCheck(t, rep, "keys", `extra_api_keys "ops"`), statusFail, `it contains "changeme"`, "")
	wantCheck(t, findCheck(t, rep, "keys", `extra_api_keys "same"`), statusOK, "36 characters", "")
	wantCheck(t, findCheck(t, rep, "keys", "admin_api_key"), statusFail, `the same key as extra_api_keys "same"`, "server.admin_api_key")
	for _, k := range keys {
		if strings.Contains(out, k) {
			t.Errorf("the report shows a key:\n%s", out)
		}
	}
	// No key at all: serve creates one in the home on its first start, and uses it from then
	// on; the report says so, then checks that key.
	writeConfig(t, home, "")
	code, rep, out = doctorJSON(t, doctorEnv(home), "--check", "keys")
	keyFile := filepath.Join(home, "api_key")
	if c := findCheck(t, rep, "keys", "api_key"); code != 0 || c.Status != statusOK || !strings.Contains(c.Detail, "creates a random one in "+keyFile) {
		t.Errorf("no key: %d\n%s", code, out)
	}
	if err := os.WriteFile(keyFile, []byte("hk-Zx81_qLm04Rt-Vw7s-placeholder\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, rep, out = doctorJSON(t, doctorEnv(home), "--check", "keys")
	if c := findCheck(t, rep, "keys", "api_key"); code != 1 || c.Status != statusFail || !strings.Contains(c.Fix, "replace "+keyFile) {
		t.Errorf("the key file serve created is not the key checked: %d\n%s", code, out)
	}
}

func TestKeyWeakness(t *testing.T) {
	for key, want := range map[string]string{
		"":                                 "0 characters",
		"0123456789abcde":                  "15 characters",
		"aaaaaaaaaaaaaaaaaaaaaaaa":         "only 1 different",
		"9081726354091827364509":           "one kind",
		"QWZXMNBVCPLOKIJUHYGT":             "one kind",
		"your-api-key-goes-here-123":       "placeholder",
		"Password-For-Hermes-1":            "placeholder",
		"3f9a1c0e7b2d4e6f8a0b1c2d3e4f5a6b": "",
		"hk-Zx81_qLm04Rt-Vw7s":             "",
	} {
		if got, _ := keyWeakness(key); (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("keyWeakness(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestDoctorBuiltBinary runs the shipped program on a healthy home — the store reached
// through its store process, a model endpoint, an MCP server, a policy and a strong key — and
// checks the JSON report's shape; then one file readable by every user makes it fail with the
// command that fixes it.
func TestDoctorBuiltBinary(t *testing.T) {
	bin, err := buildHermes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const oaKey, apiKey = "oa-doctor-key-0123456789abcdef", "Kq8v-2Lz0-Wm4x-Rt7p-Nc3s"
	oa := openaitest.New(t, openaitest.WithAPIKey(oaKey), openaitest.WithModels("gpt-test"))
	home, innerHome := filepath.Join(t.TempDir(), "home"), t.TempDir()
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, home, "model: openai:gpt-test\nproviders:\n  openai: {base_url: \""+oa.URL()+"\"}\nserver:\n  api_key: "+apiKey+
		"\nmcp:\n  servers:\n"+hermesMCPServer("inner", innerHome))
	writeTemp(t, home, "policy.js", denyRmJS)
	if err := os.Chmod(filepath.Join(home, "policy.js"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The test binary keeps badger in its own process (store_open_test.go); the built one must
	// start the home's store process, which leaves soon after its last client.
	env := append(os.Environ(), doctorEnv(home, "OPENAI_API_KEY="+oaKey, envStoreProcess+"=on", envStoreIdle+"=500ms")...)
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Dir = env, t.TempDir()
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	// Stop the store process while its home is still there (cleanups run last first, so this
	// runs before the temporary directories go).
	t.Cleanup(func() {
		if pid, held := homestore.LockHolder(home); held && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		waitStoreProcessGone(t, home)
	})
	if code, out := run("sessions"); code != 0 {
		t.Fatalf("sessions: %d %s", code, out)
	}
	code, out := run("doctor", "--json", "--timeout", "60s")
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	if code != 0 || rep["ok"] != true || rep["failed"] != 0.0 || rep["warnings"] != 0.0 || rep["quarantined"] != 0.0 {
		t.Fatalf("doctor on a healthy home: %d\n%s", code, out)
	}
	if sp, _ := rep["store_process"].(map[string]any); sp == nil || sp["pid"] == nil {
		t.Errorf("store_process: %v", rep["store_process"])
	}
	if p, ok := rep["problems"].([]any); !ok || len(p) != 0 {
		t.Errorf("problems: %v", rep["problems"])
	}
	checks, _ := rep["checks"].([]any)
	var areas []string
	for _, c := range checks {
		c := c.(map[string]any)
		if c["status"] != statusOK || c["name"] == "" || c["detail"] == "" {
			t.Errorf("check %v", c)
		}
		if a := c["area"].(string); !slices.Contains(areas, a) {
			areas = append(areas, a)
		}
	}
	if !slices.Equal(areas, doctorAreas) {
		t.Errorf("areas %v, want %v", areas, doctorAreas)
	}
	for _, want := range []string{"store process", "1 models listed", "inner (stdio)", "2 of 2 examples pass", "writable, mode 0700"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, oaKey) || strings.Contains(out, apiKey) {
		t.Errorf("the report shows a key:\n%s", out)
	}
	if err := os.Chmod(cfgPath, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = run("doctor", "--check", "home")
	if code != 1 || !strings.Contains(out, "fail  home   config.yaml: mode 0644: every user can read the keys it may hold\n") ||
		!strings.Contains(out, "→ chmod 600 "+cfgPath+"\n") || !strings.Contains(out, "1 check(s) failed") {
		t.Errorf("config.yaml readable by all: %d\n%s", code, out)
	}
}

// TestDoctorPostgresStore checks a PostgreSQL store: one that does not answer fails without
// showing the URL's password; a running one opens (when PostgreSQL is installed).
func TestDoctorPostgresStore(t *testing.T) {
	home := t.TempDir()
	dead := strings.Replace(deadURL(t), "http://", "postgres://hermes:pg-doctor-pass-0123@", 1)
	dead = strings.TrimSuffix(dead, "/v1") + "/hermes?connect_timeout=5"
	code, rep, out := doctorJSON(t, doctorEnv(home, "HERMES_STORE="+dead), "--check", "store")
	if c := findCheck(t, rep, "store", "postgres "); code != 1 || c.Status != statusFail || !strings.HasPrefix(c.Detail, "does not open: ") || strings.Contains(c.Detail, "\n") ||
		!strings.Contains(c.Fix, "HERMES_STORE") || strings.Contains(out, "pg-doctor-pass-0123") {
		t.Errorf("unreachable PostgreSQL: %d\n%s", code, out)
	}
	c, err := pgtest.Start()
	if err != nil {
		if pgtest.Required() {
			t.Fatalf("PostgreSQL required (HERMES_PG=required): %v", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	url, err := c.CreateDB(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	code, rep, out = doctorJSON(t, doctorEnv(home, "HERMES_STORE="+url), "--check", "store")
	if c := findCheck(t, rep, "store", "postgres "); code != 0 || c.Status != statusOK || c.Detail != "opens" {
		t.Errorf("PostgreSQL: %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(home, "state")); !os.IsNotExist(err) {
		t.Errorf("doctor made the badger directory although the store is PostgreSQL (stat: %v)", err)
	}
}
