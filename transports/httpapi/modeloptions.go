package httpapi

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/modelopts"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// ProviderInfo describes one configured model provider for GET /api/model/options.
type ProviderInfo = modelopts.Provider

// modelCatalog caches probe results per provider.
type modelCatalog = modelopts.Cache

// providers lists the configured providers, from Options.Providers or else from the engine.
func (s *Server) providers() []ProviderInfo {
	if s.opts.Providers != nil {
		return s.opts.Providers()
	}
	var out []ProviderInfo
	for _, name := range s.eng.Providers() {
		out = append(out, ProviderInfo{Name: name})
	}
	return out
}

// modelOptions is the provider-aware picker inventory (engine/modelopts, shared with the
// gateway's model.options). refresh=1 busts the probe cache and probes every saved custom
// provider; otherwise only the current provider is probed when it is custom. A failed probe
// is reported on its provider; the request itself succeeds.
func (s *Server) modelOptions(c *fiber.Ctx) error {
	refresh := false
	switch v := c.Query("refresh"); v {
	case "", "0", "false":
	case "1", "true":
		refresh = true
	default:
		return wire.BadRequest("refresh", "invalid_value", "refresh must be 1, 0, true or false")
	}
	return c.JSON(modelopts.Build(s.ctx, s.eng, &s.catalog, s.providers(), s.models(), refresh))
}

// catalogueModel decides a provider:model name the server does not list: the model catalogue
// refuses only a name known to belong to another provider (404 model_not_found whose message
// names the owner and suggests the provider's models) and accepts any other name of a
// configured provider; a bare name is judged as its owner's (the provider whose catalogue
// families hold it). ok is false for a bare name no family holds or an unknown provider, which
// stay the caller's to refuse.
func (s *Server) catalogueModel(name string) (model string, ok bool, err error) {
	if _, _, qualified := cutProvider(name); !qualified {
		// A bare name the catalogue's families give to a configured provider ("o1",
		// "gpt-4o-2024-08-06" for openai) is that provider's, as the OpenAI SDKs send it.
		owner := s.eng.Catalog().Owner(name)
		if owner == "" {
			return "", false, nil
		}
		name = owner + ":" + name
	}
	canon, _, rerr := s.eng.ResolveModel(name)
	var mm *engine.ModelMismatchError
	switch {
	case errors.As(rerr, &mm):
		return "", true, &wire.Error{Status: fiber.StatusNotFound, Message: mm.Mismatch.Error(), Type: "invalid_request_error", Param: "model", Code: "model_not_found"}
	case rerr == nil:
		return canon, true, nil
	}
	return "", false, nil
}
