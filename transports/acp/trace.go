package acp

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// withTraceMeta continues the W3C trace context a prompt carries in its _meta (traceparent,
// tracestate): the turn's span becomes a child of the client's span. Without one, or with an
// invalid one, ctx is returned as it is.
func withTraceMeta(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return ctx
	}
	ts, _ := meta["tracestate"].(string)
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
}
