package main

import (
	"net/http"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/openai"
)

// providerFor builds the model provider of one configured provider; httpClient is nil unless
// calls are recorded. It returns nil for a type it does not know (config.Load refuses those).
func providerFor(p config.Provider, httpClient *http.Client) model.Provider {
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
