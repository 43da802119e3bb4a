// Package telemetry sets up what a hermes command exports about itself: OpenTelemetry traces
// over OTLP/HTTP when the standard OTEL_* environment asks for them (nothing at all otherwise),
// the W3C trace-context propagation of incoming and outgoing requests, and the slog logger of
// every command (JSON off a terminal, redacted, each line of a turn stamped with its session,
// turn and trace ids).
package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES)
// says otherwise.
const DefaultServiceName = "hermes"

// Tracing is the trace pipeline of one process: an SDK tracer provider exporting over OTLP,
// or nothing when tracing is off.
type Tracing struct {
	tp *sdktrace.TracerProvider // nil when off
}

// Enabled reports whether getenv asks for exported traces: an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), the SDK is not disabled
// (OTEL_SDK_DISABLED) and the traces exporter is not "none" (OTEL_TRACES_EXPORTER).
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != ""
}

// Setup installs the W3C trace-context propagator globally and, when getenv asks for traces
// (Enabled), an SDK tracer provider exporting over OTLP/HTTP with a batch processor; the
// exporter reads the rest of the standard variables itself (OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _COMPRESSION, the certificate ones) and the provider reads OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG. With tracing off no provider is installed: the global one stays the
// API's no-op, and spans cost next to nothing. version is service.version.
func Setup(ctx context.Context, getenv func(string) string, version string) (*Tracing, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !Enabled(getenv) {
		return &Tracing{}, nil
	}
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if proto != "" && proto != "http/protobuf" {
		return &Tracing{}, fmt.Errorf("OTLP protocol %q is not supported: hermes exports traces over http/protobuf (port 4318 of a collector)", proto)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return &Tracing{}, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	tp, err := NewProvider(ctx, exp, version)
	if err != nil {
		return &Tracing{}, err
	}
	otel.SetTracerProvider(tp)
	return &Tracing{tp: tp}, nil
}

// NewProvider is the SDK tracer provider hermes uses, over exp: batch processor, the sampler
// from the environment (the SDK's default parent-based always-on otherwise), and the resource
// service.name=hermes, service.version, overridden by OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
func NewProvider(ctx context.Context, exp sdktrace.SpanExporter, version string) (*sdktrace.TracerProvider, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// TracerProvider is the provider to give the engine: nil when tracing is off (the engine then
// uses the global no-op one).
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp
}

// Shutdown flushes the spans still queued and stops the exporter, waiting at most 5 seconds
// for a collector that does not answer. A no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return t.tp.Shutdown(ctx)
}

// CaptureContent reports whether spans may carry prompt and completion text: the config's
// telemetry.capture_content, HERMES_TRACE_CONTENT=true or the GenAI instrumentations'
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
func CaptureContent(getenv func(string) string, configured bool) bool {
	return configured || isTrue(getenv("HERMES_TRACE_CONTENT")) || isTrue(getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"))
}

func isTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// Transport wraps rt (http.DefaultTransport when nil) so that every request carries the W3C
// traceparent (and tracestate) of the span in its context: a model provider's request is then
// a child of the model call's span in the provider's own traces.
func Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if _, ok := rt.(propagating); ok {
		return rt
	}
	return propagating{rt}
}

type propagating struct{ next http.RoundTripper }

func (p propagating) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return p.next.RoundTrip(r)
	}
	// A RoundTripper must not modify the request it was given.
	r2 := r.Clone(r.Context())
	propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r2.Header))
	return p.next.RoundTrip(r2)
}
