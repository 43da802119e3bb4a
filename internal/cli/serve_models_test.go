package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// GET /v1/models lists a built-in provider's catalogue only when the provider can be used: a
// frontend offers every listed model, and one whose provider has no key fails every turn.
func TestModelsListUsableProviders(t *testing.T) {
	list := func(t *testing.T, env ...string) []string {
		t.Helper()
		p := startServe(t, env...)
		req, _ := http.NewRequest("GET", p.base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+testAPIKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body struct{ Data []struct{ ID string } }
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != 200 {
			t.Fatalf("GET /v1/models: %d %v", res.StatusCode, err)
		}
		var ids []string
		for _, m := range body.Data {
			ids = append(ids, m.ID)
		}
		return ids
	}
	has := func(ids []string, prefix string) bool {
		for _, id := range ids {
			if strings.HasPrefix(id, prefix) {
				return true
			}
		}
		return false
	}
	without := list(t, "ANTHROPIC_API_KEY=")
	if len(without) == 0 || without[0] != "hermes-agent" || !has(without, "openai:gpt-") {
		t.Fatalf("models %v: want hermes-agent first and the openai catalogue (its key is set)", without)
	}
	if has(without, "anthropic:") {
		t.Errorf("models %v list anthropic's catalogue while ANTHROPIC_API_KEY is unset", without)
	}
	if with := list(t, "ANTHROPIC_API_KEY=k"); !has(with, "anthropic:claude-") {
		t.Errorf("models %v: anthropic's catalogue missing while its key is set", with)
	}
}

// A replay model's name is a path on the server: over the network hermes serve opens only the
// cassettes its configuration names. Any other path, present or not, valid cassette or not, is
// refused alike (404 model_not_found, the same message) before anything is opened or switched,
// so a client learns nothing of the server's files; the configured cassette replays.
func TestServeOpensOnlyConfiguredCassettes(t *testing.T) {
	demo := repoPath("scripts", "demo", "demo.cassette.json")
	b, err := os.ReadFile(demo)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.cassette.json") // a valid cassette nobody offered
	if err := os.WriteFile(other, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "HERMES_MODEL=replay:"+demo)
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testAPIKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	refusal := func(path string) string {
		t.Helper()
		st, m := call("POST", "/v1/chat/completions", `{"model":"replay:`+path+`","messages":[{"role":"user","content":"hi"}]}`)
		e, _ := m["error"].(map[string]any)
		if st != 404 || e["code"] != "model_not_found" {
			t.Fatalf("model replay:%s: %d %v", path, st, m)
		}
		msg, _ := e["message"].(string)
		return strings.ReplaceAll(msg, path, "<path>")
	}
	passwd, missing, valid := refusal("/etc/passwd"), refusal("/no/such/file.json"), refusal(other)
	if passwd != missing || missing != valid || strings.Contains(passwd, "JSON") || strings.Contains(passwd, "no such file") {
		t.Fatalf("refusals differ by what is on the server:\n%s\n%s\n%s", passwd, missing, valid)
	}

	// A session is not switched to a refused cassette: its next turn runs its own model.
	st, m := call("POST", "/api/sessions", `{}`)
	if st != 201 {
		t.Fatalf("create: %d %v", st, m)
	}
	id := m["session"].(map[string]any)["id"].(string)
	if st, m := call("PATCH", "/api/sessions/"+id, `{"model":"replay:/etc/passwd"}`); st < 400 {
		t.Fatalf("PATCH to an unoffered cassette: %d %v", st, m)
	}
	if _, m := call("GET", "/api/sessions/"+id, ""); m["session"].(map[string]any)["model"] != "replay:"+demo {
		t.Fatalf("session model after a refused switch: %v", m)
	}
	// The configured cassette, named as configured, replays.
	if st, m := call("POST", "/v1/chat/completions", `{"model":"replay:`+demo+`","messages":[{"role":"user","content":"`+demoPrompt+`"}]}`); st != 200 {
		t.Fatalf("the configured cassette: %d %v", st, m)
	}
}
