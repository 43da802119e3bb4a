package httpapi_test

import (
	"strings"
	"testing"
)

// The HTTP model field takes a bare real model name the server does not list when the
// catalogue's families give it to a configured provider, as the OpenAI SDKs send one; a bare
// name no family holds, or one of a provider not configured here, stays 404.
func TestBareModelNameOfItsProvider(t *testing.T) {
	t.Parallel()
	tg, _ := anthropicTarget(t)
	r := tg.do(t, "POST", "/api/sessions", `{"model":"claude-next-9"}`, nil)
	if r.status/100 != 2 || !strings.Contains(string(r.body), `"anthropic:claude-next-9"`) {
		t.Fatalf("bare own-family name: %d %s", r.status, r.body)
	}
	if r := tg.do(t, "GET", "/v1/models", "", nil); strings.Contains(string(r.body), "claude-next-9") {
		t.Errorf("the listing grew: %s", r.body)
	}
	for _, name := range []string{"gemini-2.5-pro", "no-such-model", "gpt-5.1"} {
		envelope(t, tg.do(t, "POST", "/v1/chat/completions", `{"model":"`+name+`","messages":[{"role":"user","content":"hi"}]}`, nil), 404, "model_not_found")
	}
}
