package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAnthropicProvider(t *testing.T) {
	home := t.TempDir()
	c, err := Load(env(map[string]string{"HERMES_HOME": home, "ANTHROPIC_API_KEY": "sk-ant-secret-1234", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers["anthropic"]
	if p.Type != "anthropic" || p.APIKey != "sk-ant-secret-1234" || p.BaseURL != "http://127.0.0.1:9" {
		t.Fatalf("anthropic provider: %+v", p)
	}
	if !slices.Contains(c.SecretEnv(), "ANTHROPIC_API_KEY") || strings.Contains(c.Show(), "sk-ant-secret-1234") {
		t.Error("the Anthropic key is not treated as a secret")
	}
	if !BuiltinProvider("anthropic") {
		t.Error("anthropic is not built in")
	}
}

func TestProviderSettingsAndCatalogueOverrides(t *testing.T) {
	home := t.TempDir()
	yml := `model: anthropic:claude-sonnet-4-5
fallback_models: [anthropic:claude-haiku-4-5, openai:gpt-4.1]
providers:
  anthropic:
    base_url: https://gateway.example.com/anthropic
    max_retries: 5
    thinking_budget: 2048
    max_tokens: 4096
    catalog:
      - {id: claude-sonnet-4-5, context_window: 1000000, tools: true, pricing: {input: 6, output: 22.5}}
  openai:
    type: openai
    max_retries: -1
  lab:
    base_url: http://127.0.0.1:8000/v1
    families: [lab-]
    models: [lab-small, lab-large]
  agg:
    base_url: http://127.0.0.1:8001/v1
    aggregator: true
`
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Providers["anthropic"]
	if a.Type != "anthropic" || a.KeyEnv != "ANTHROPIC_API_KEY" || a.MaxRetries != 5 || a.ThinkingBudget != 2048 || a.MaxTokens != 4096 || a.BaseURL != "https://gateway.example.com/anthropic" {
		t.Fatalf("anthropic: %+v", a)
	}
	if c.Providers["openai"].MaxRetries != -1 || !slices.Equal(c.FallbackModels, []string{"anthropic:claude-haiku-4-5", "openai:gpt-4.1"}) {
		t.Fatalf("openai retries %d, fallback %v", c.Providers["openai"].MaxRetries, c.FallbackModels)
	}
	cat := c.Catalog()
	if m, ok := cat.Lookup("anthropic", "claude-sonnet-4-5"); !ok || m.ContextWindow != 1_000_000 || m.Pricing.Input != 6 {
		t.Errorf("override: %+v", m)
	}
	if m, ok := cat.Lookup("anthropic", "claude-haiku-4-5"); !ok || m.Pricing == nil {
		t.Errorf("embedded entry lost: %+v", m)
	}
	if _, ok := cat.Lookup("lab", "lab-large"); !ok || cat.Owner("lab-medium") != "lab" || cat.Check("anthropic", "lab-medium") == nil {
		t.Error("a custom provider's families and models are not in the catalogue")
	}
	if cat.Check("agg", "claude-opus-4-5") != nil || cat.Check("lab", "my-own") != nil {
		t.Error("an aggregator or an own-family-less name was refused")
	}

	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("providers:\n  x:\n    type: gemini\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(env(map[string]string{"HERMES_HOME": home})); err == nil || !strings.Contains(err.Error(), "want openai, anthropic or replay") {
		t.Errorf("unknown type: %v", err)
	}
}
