package gateway

import (
	"context"
	"encoding/json"
)

// sessionContextBreakdown is session.context_breakdown: the estimate of the session's next
// request by category, with the context fields of session.usage. Hermes reads no context
// files into the prompt, so context_files is empty; context_source says where context_used
// comes from.
func sessionContextBreakdown(ctx context.Context, c *client, m string, raw json.RawMessage) (any, error) {
	l, err := c.sessionOf(m, raw)
	if err != nil {
		return nil, err
	}
	b, err := l.s.ContextBreakdown(ctx)
	if err != nil {
		return nil, rpcErr(codeFailed, "context breakdown failed: %v", err)
	}
	source := "usage"
	if b.Estimated {
		source = "estimate"
	}
	return map[string]any{
		"categories": b.Categories, "context_max": b.Max, "context_percent": b.Percent, "context_used": b.Used,
		"estimated_total": b.EstimatedTotal, "context_estimated": b.Estimated, "context_source": source,
		"model": b.Model, "context_files": []any{},
	}, nil
}
