package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
)

// withTraceMeta continues the W3C trace context a request carries in params._meta
// (traceparent, tracestate), as MCP and ACP place it: the spans of the work the request starts
// become children of the caller's span. Params without one, or with an invalid one, leave ctx
// as it is.
func withTraceMeta(ctx context.Context, params json.RawMessage) context.Context {
	if !bytes.Contains(params, []byte(`"traceparent"`)) {
		return ctx
	}
	var p struct {
		Meta struct {
			TraceParent string `json:"traceparent"`
			TraceState  string `json:"tracestate"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta.TraceParent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": p.Meta.TraceParent, "tracestate": p.Meta.TraceState})
}
