package config

// Telemetry configures what traces carry. Where they go is the standard OpenTelemetry
// environment (OTEL_EXPORTER_OTLP_ENDPOINT and the rest), read by the command that exports.
type Telemetry struct {
	// CaptureContent records prompts, answers and tool arguments and results (redacted) on
	// the spans. Off by default; HERMES_TRACE_CONTENT=true or
	// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true turn it on too.
	CaptureContent bool `yaml:"capture_content,omitempty"`
}
