package gateway

import (
	"context"
	"encoding/json"

	"github.com/hermes-go/hermes/engine/modelopts"
)

// modelOptions is model.options {refresh?}: the provider-aware picker inventory, the same
// payload and probe policy as GET /api/model/options (engine/modelopts).
func modelOptions(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	p, err := decode[struct {
		common
		Refresh bool `json:"refresh"`
	}](m, raw)
	if err != nil {
		return nil, err
	}
	if c.g.opts.ModelOptions != nil {
		return c.g.opts.ModelOptions(ctx, p.Refresh), nil
	}
	var provs []modelopts.Provider
	for _, name := range c.g.eng.Providers() {
		provs = append(provs, modelopts.Provider{Name: name})
	}
	return modelopts.Build(ctx, c.g.eng, &c.g.models, provs, nil, p.Refresh), nil
}
