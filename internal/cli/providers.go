package cli

import (
	"net/http"
	"slices"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/openai"
)

// providerFor builds the model provider of one configured provider; httpClient is nil unless
// calls are recorded. It returns nil for a type it does not know (config.Load refuses those).
func providerFor(p config.Provider, httpClient *http.Client) model.Provider {
	if p.Type == "openai" || p.Type == "anthropic" {
		httpClient = tracedClient(httpClient)
	}
	switch p.Type {
	case "openai":
		return openai.New(openai.Config{BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers, HTTPClient: httpClient, MaxRetries: p.MaxRetries})
	case "anthropic":
		return anthropic.New(anthropic.Config{
			BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers, HTTPClient: httpClient,
			MaxRetries: p.MaxRetries, MaxTokens: p.MaxTokens, ThinkingBudget: p.ThinkingBudget,
		})
	case "replay":
		return &cassettes{dir: p.Dir}
	}
	return nil
}

// recordDialect is the wire dialect of a recording: that of the default model's provider.
func recordDialect(cfg *config.Config) string {
	prov, _ := model.ParseName(cfg.Model)
	if cfg.Providers[prov].Type == "anthropic" {
		return "anthropic"
	}
	return "openai"
}

// advertisedModels are the provider:model names hermes serve lists (GET /v1/models) and accepts
// in an HTTP request's model field: each provider's models list from config.yaml, and for a
// built-in provider that can be used (it needs no key, or its key is set) the model
// catalogue's models too. A frontend offers what GET /v1/models lists: a provider without its
// key would only fail every turn.
func advertisedModels(cfg *config.Config, eng *engine.Engine) []string {
	var out []string
	for _, name := range eng.Providers() {
		p := cfg.Providers[name]
		names := slices.Clone(p.Models)
		if config.BuiltinProvider(name) && (p.KeyEnv == "" || p.APIKey != "") {
			for _, m := range eng.Catalog().Models(name) {
				if !slices.Contains(names, m.ID) {
					names = append(names, m.ID)
				}
			}
		}
		for _, m := range names {
			out = append(out, name+":"+m)
		}
	}
	return out
}
