package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// getJSON fetches path from a running hermes serve with the API key.
func (p *serveProc) getJSON(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("GET", p.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return res.StatusCode, m
}

// TestServeWiring: hermes serve passes browser control, the providers and the MCP status to
// the HTTP API.
func TestServeWiring(t *testing.T) {
	off := startServe(t)
	if _, caps := off.getJSON(t, "/v1/capabilities"); caps["features"].(map[string]any)["browser_control"] != false {
		t.Fatalf("browser control on by default: %v", caps["features"])
	}
	on := startServe(t, "HERMES_BROWSER_CONTROL=1")
	_, caps := on.getJSON(t, "/v1/capabilities")
	if caps["features"].(map[string]any)["browser_control"] != true || caps["endpoints"].(map[string]any)["browser_control_ws"] == nil {
		t.Fatalf("browser control not enabled: %v", caps)
	}
	code, opts := on.getJSON(t, "/api/model/options")
	if code != 200 || opts["current"].(map[string]any)["id"] != interopModel {
		t.Fatalf("model options %d %v", code, opts)
	}
	var names []string
	for _, p := range opts["providers"].([]any) {
		row := p.(map[string]any)
		names = append(names, row["id"].(string))
		if row["custom"] != false {
			t.Fatalf("a built-in provider is marked custom: %v", row)
		}
	}
	if !strings.Contains(strings.Join(names, ","), "openai") {
		t.Fatalf("providers %v", names)
	}
	code, h := on.getJSON(t, "/health/detailed")
	if code != 200 || h["mcp"] == nil || h["browser_control"].(map[string]any)["enabled"] != true {
		t.Fatalf("health %d %v", code, h)
	}
	if lim := caps["limits"].(map[string]any); lim["max_concurrent_turns"] != float64(10) {
		t.Fatalf("default turn cap %v", lim)
	}

	// server.max_concurrent reaches the server.
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("server:\n  max_concurrent: 250\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	capped := startServe(t, "HERMES_HOME="+home)
	if _, caps := capped.getJSON(t, "/v1/capabilities"); caps["limits"].(map[string]any)["max_concurrent_turns"] != float64(250) {
		t.Fatalf("server.max_concurrent not applied: %v", caps["limits"])
	}
}
