package cli

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeRefusesShortKeys: hermes serve does not start when any key is shorter than 16
// characters, and says which key (by name or position, never the key).
func TestServeRefusesShortKeys(t *testing.T) {
	for _, c := range []struct{ name, yaml, primary, want string }{
		{"plain extra key", "server:\n  extra_api_keys: [extra-key-0123456789, \"k\"]\n", testAPIKey, "extra_api_keys[1]"},
		{"named extra key", "server:\n  extra_api_keys:\n    - {name: ci-bot, key: shortkey9}\n", testAPIKey, "ci-bot"},
		{"admin key", "server:\n  admin_api_key: adminq7\n", testAPIKey, "admin_api_key"},
		{"primary key in config", "server:\n  api_key: shortkey9\n", "", "at least 16 characters (server.api_key in config.yaml)"},
		{"primary key in the environment", "", "shortkey9", "at least 16 characters (HERMES_API_KEY)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := hermesCmd(t, t.TempDir(), []string{"HERMES_HOME=" + home, "HERMES_MODEL=" + interopModel,
				"OPENAI_BASE_URL=http://127.0.0.1:9/v1", "OPENAI_API_KEY=k", "HERMES_API_KEY=" + c.primary}, "serve", "--addr", "127.0.0.1:0")
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("serve exited 0: %s", errb.String())
				}
			case <-time.After(2 * time.Minute): // a guard against a server that started, not a timing check
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("serve started with a short key: %s", errb.String())
			}
			msg := errb.String()
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "listening") {
				t.Fatalf("stderr does not name %s: %s", c.want, msg)
			}
			for _, k := range []string{`"k"`, "shortkey9", "adminq7"} {
				if strings.Contains(msg, k) {
					t.Fatalf("stderr shows the key %s: %s", k, msg)
				}
			}
		})
	}
}

// TestServeKeyPrincipals: extra keys (plain and named) and the admin key of config.yaml reach
// the server; an extra key does not see the primary key's session, the admin does.
func TestServeKeyPrincipals(t *testing.T) {
	const extra, named, admin = "plain-extra-key-0123456789", "named-extra-key-0123456789", "admin-key-0123456789abc"
	home := t.TempDir()
	yml := "server:\n  extra_api_keys:\n    - " + extra + "\n    - {name: ci, key: " + named + "}\n  admin_api_key: " + admin + "\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "HERMES_HOME="+home)
	do := func(key, method, path, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if code := do(testAPIKey, "POST", "/api/sessions", `{"id":"primary-owned"}`); code != 201 {
		t.Fatalf("create: %d", code)
	}
	for _, k := range []string{extra, named} {
		if code := do(k, "GET", "/v1/models", ""); code != 200 {
			t.Fatalf("extra key refused: %d", code)
		}
		if code := do(k, "GET", "/api/sessions/primary-owned", ""); code != 404 {
			t.Fatalf("extra key reads the primary key's session: %d", code)
		}
	}
	if code := do(admin, "GET", "/api/sessions/primary-owned", ""); code != 200 {
		t.Fatalf("admin: %d", code)
	}
}

// hermes serve says in its log what hermes doctor says of a placeholder key (it still starts),
// and a SIGTERM leaves a shutdown line and a stopped line.
func TestServeLogsWeakKeysAndShutdown(t *testing.T) {
	home := t.TempDir()
	cfg := "server:\n  extra_api_keys:\n    - {name: ci, key: ci-changeme-0123456789}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := hermesCmd(t, t.TempDir(), []string{"HERMES_HOME=" + home, "HERMES_API_KEY=" + testAPIKey, "HERMES_STORE_PROCESS=off"}, "serve", "--addr", "127.0.0.1:0")
	_, exited, logs := startServeCmd(t, cmd)
	if l := logs.String(); !strings.Contains(l, `API key extra_api_keys \"ci\": a placeholder (it contains \"changeme\"`) || strings.Contains(l, "ci-changeme") {
		t.Fatalf("serve's log on a placeholder key (named, never shown):\n%s", l)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM:\n%s", logs.String())
	}
	if l := logs.String(); !strings.Contains(l, `"msg":"shutting down`) || !strings.Contains(l, `"msg":"stopped"`) {
		t.Fatalf("serve's log on SIGTERM:\n%s", l)
	}
}
