package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/hermes-go/hermes/internal/telemetry"
)

// startTracing sets up this process's traces (internal/telemetry): exported over OTLP when the
// OTEL_* environment names an endpoint, nothing otherwise. A bad setting is reported and the
// command runs untraced. The caller shuts it down when the command returns, which flushes
// the spans still queued.
func startTracing(ctx context.Context, errw io.Writer) *telemetry.Tracing {
	tr, err := telemetry.Setup(ctx, os.Getenv, version)
	if err != nil {
		fmt.Fprintf(errw, "hermes: traces are off: %v\n", err)
	}
	return tr
}

// tracedClient is c (http.DefaultClient's behaviour when nil) sending the W3C traceparent of
// the model call's span with every request.
func tracedClient(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{Transport: telemetry.Transport(nil)}
	}
	out := *c
	out.Transport = telemetry.Transport(c.Transport)
	return &out
}
