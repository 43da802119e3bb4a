package httpapi

import (
	"context"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// localTrace is the c.Locals key of the W3C trace context a request arrived with.
const localTrace = "hermes.trace"

// extractTrace keeps the request's W3C traceparent (and tracestate), when valid, for the turn
// it may start: the turn's span then continues the caller's trace. An invalid header is
// ignored, as the W3C recommendation asks.
func extractTrace(c *fiber.Ctx) {
	tp := c.Get("traceparent")
	if tp == "" {
		return
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp, "tracestate": c.Get("tracestate")})
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		c.Locals(localTrace, sc)
	}
}

// requestTrace is the trace context the request arrived with (the zero one without).
func requestTrace(c *fiber.Ctx) trace.SpanContext {
	sc, _ := c.Locals(localTrace).(trace.SpanContext)
	return sc
}

// withTrace is ctx carrying sc as the remote parent of the spans started under it.
func withTrace(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}
