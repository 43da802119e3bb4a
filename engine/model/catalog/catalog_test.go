package catalog_test

import (
	"math"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/catalog"
)

func TestEmbeddedCatalogue(t *testing.T) {
	t.Parallel()
	c := catalog.Default()
	for _, p := range []string{"anthropic", "openai", "openrouter"} {
		if c.Providers[p] == nil {
			t.Errorf("no catalogue for %s", p)
		}
	}
	for name, p := range c.Providers {
		seen := map[string]bool{}
		for _, m := range p.Models {
			if seen[m.ID] {
				t.Errorf("%s: model %s listed twice", name, m.ID)
			}
			seen[m.ID] = true
			if !p.Aggregator && len(p.Families) > 0 && c.Owner(m.ID) != name {
				t.Errorf("%s: model %s is outside the provider's families (owner %q)", name, m.ID, c.Owner(m.ID))
			}
			if pr := m.Pricing; pr != nil && (pr.Input <= 0 || pr.Output <= 0) {
				t.Errorf("%s: model %s has a pricing without input and output prices", name, m.ID)
			}
		}
	}
	// Default hands out copies: an override does not leak into the next caller's catalogue.
	c.Override("anthropic", []string{"x-"}, false, nil)
	if catalog.Default().Providers["anthropic"].Families[0] != "claude-" {
		t.Error("Override changed the embedded catalogue")
	}
}

// The refusal/acceptance table of the model check.
func TestCheck(t *testing.T) {
	t.Parallel()
	c := catalog.Default()
	c.Override("custom:lab", nil, false, nil) // a saved custom endpoint: no families
	cases := []struct {
		provider, model string
		refuse          bool
		owner           string
	}{
		{"anthropic", "gpt-5.5", true, "openai"},
		{"anthropic", "o3-mini", true, "openai"},
		{"anthropic", "gemini-2.5-pro", true, "google"},
		{"anthropic", "openai/gpt-4.1", true, "openai"},
		{"openai", "claude-sonnet-4", true, "anthropic"},
		{"openai", "grok-4", true, "xai"},
		{"anthropic", "claude-sonnet-4-5", false, ""},
		{"anthropic", "claude-sonnet-9-9", false, ""}, // own family, not catalogued yet
		{"anthropic", "my-finetune", false, ""},       // in no catalogue
		{"openai", "gpt-6-preview", false, ""},
		{"openai", "o3", false, ""},
		{"openai", "ollama-thing", false, ""},
		{"openrouter", "anthropic/claude-sonnet-4.6", false, ""}, // aggregator
		{"openrouter", "gpt-5.5", false, ""},
		{"nous", "claude-opus-4-5", false, ""},
		{"ollama", "claude-imitation", false, ""}, // no catalogue: a local server
		{"custom:lab", "gpt-5.5", false, ""},
		{"replay", "claude-sonnet-4", false, ""},
	}
	for _, tc := range cases {
		m := c.Check(tc.provider, tc.model)
		if (m != nil) != tc.refuse {
			t.Errorf("Check(%s, %s) = %v, want refuse=%v", tc.provider, tc.model, m, tc.refuse)
			continue
		}
		if m == nil {
			continue
		}
		if m.Owner != tc.owner || m.Provider != tc.provider || m.Model != tc.model {
			t.Errorf("Check(%s, %s) = %+v", tc.provider, tc.model, m)
		}
		if len(m.Suggestions) == 0 || len(m.Suggestions) > 5 {
			t.Errorf("Check(%s, %s): %d suggestions", tc.provider, tc.model, len(m.Suggestions))
		}
		for _, s := range m.Suggestions {
			if _, ok := c.Lookup(tc.provider, s); !ok {
				t.Errorf("suggestion %s is not a %s model", s, tc.provider)
			}
			if !strings.Contains(m.Error(), s) {
				t.Errorf("message %q does not repeat suggestion %s", m.Error(), s)
			}
		}
	}
	if m := c.Check("anthropic", "gpt-5.5"); !strings.Contains(m.Error(), "use openai:gpt-5.5") {
		t.Errorf("message %q does not say which provider owns the name", m.Error())
	}
}

func TestResolveAndLookup(t *testing.T) {
	t.Parallel()
	c := catalog.Default()
	for _, tc := range []struct{ provider, in, want string }{
		{"anthropic", "claude-sonnet-4", "claude-sonnet-4-0"},
		{"anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"anthropic", "claude-sonnet-4.5", "claude-sonnet-4-5"},
		{"anthropic", "claude-new", "claude-new"},
		{"openrouter", "claude-sonnet-4.6", "anthropic/claude-sonnet-4.6"},
		{"openrouter", "anthropic/claude-sonnet-4.6", "anthropic/claude-sonnet-4.6"},
		{"openrouter", "some-model", "some-model"},
		{"ollama", "llama3", "llama3"},
	} {
		if got := c.Resolve(tc.provider, tc.in); got != tc.want {
			t.Errorf("Resolve(%s, %s) = %s, want %s", tc.provider, tc.in, got, tc.want)
		}
	}
	m, ok := c.Lookup("openrouter", "anthropic/claude-sonnet-4.6")
	if !ok || m.ID != "claude-sonnet-4-6" {
		t.Errorf("aggregator lookup = %+v %v", m, ok)
	}
	if _, ok := c.Lookup("ollama", "claude-sonnet-4-6"); ok {
		t.Error("a provider without a catalogue found a model")
	}
}

func TestCost(t *testing.T) {
	t.Parallel()
	c := catalog.Default()
	m, ok := c.Lookup("anthropic", "claude-sonnet-4-5")
	if !ok {
		t.Fatal("claude-sonnet-4-5 not catalogued")
	}
	// 1M uncached input at $3, 2M cache reads at $0.30, 1M cache writes at $3.75, 1M output at $15.
	u := model.Usage{PromptTokens: 4_000_000, CachedTokens: 2_000_000, CacheWriteTokens: 1_000_000, CompletionTokens: 1_000_000}
	if got, want := m.Cost(u), 3+0.6+3.75+15.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("cost = %v, want %v", got, want)
	}
	if got := (catalog.Model{ID: "x"}).Cost(u); got != 0 {
		t.Errorf("a model without pricing cost %v", got)
	}
	// No cache prices: cached tokens cost what input does.
	flat := catalog.Model{Pricing: &catalog.Pricing{Input: 1, Output: 2}}
	if got := flat.Cost(model.Usage{PromptTokens: 1_000_000, CachedTokens: 500_000, CompletionTokens: 1_000_000}); math.Abs(got-3) > 1e-9 {
		t.Errorf("flat cost = %v, want 3", got)
	}
}

func TestOverride(t *testing.T) {
	t.Parallel()
	c := catalog.Default()
	c.Override("anthropic", nil, false, []catalog.Model{
		{ID: "claude-sonnet-4-5", ContextWindow: 1_000_000, Pricing: &catalog.Pricing{Input: 6, Output: 22.5}},
		{ID: "claude-next", Tools: true},
	})
	m, _ := c.Lookup("anthropic", "claude-sonnet-4-5")
	if m.ContextWindow != 1_000_000 || m.Pricing.Input != 6 {
		t.Errorf("override not applied: %+v", m)
	}
	if _, ok := c.Lookup("anthropic", "claude-next"); !ok {
		t.Error("added model not found")
	}
	c.Override("gateway", []string{"acme-"}, false, []catalog.Model{{ID: "acme-1"}})
	if c.Owner("acme-2") != "gateway" || c.Check("anthropic", "acme-2") == nil {
		t.Error("a configured provider's families are not used")
	}
	if _, err := catalog.Parse([]byte("version: 2\n")); err == nil {
		t.Error("version 2 accepted")
	}
	if _, err := catalog.Parse([]byte("version: 1\nproviders: {x: {models: [{context_window: 3}]}}\n")); err == nil {
		t.Error("a model without id accepted")
	}
	if _, err := catalog.Parse([]byte("version: 1\nprovider: {}\n")); err == nil {
		t.Error("an unknown key accepted")
	}
}
