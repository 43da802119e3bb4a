package cli

import (
	"encoding/json"
	"net/http"
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
