package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine/logctx"
	"github.com/hermes-go/hermes/internal/telemetry"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Off a terminal the logger writes JSON; a line logged under a turn's context carries its ids
// and the trace's; a secret is redacted; HERMES_LOG_LEVEL and HERMES_LOG_FORMAT override.
func TestLoggerJSONWithTurnIDs(t *testing.T) {
	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, slog.LevelWarn, envOf(nil))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled})
	ctx := logctx.With(trace.ContextWithSpanContext(context.Background(), sc), "sess_1", "turn_1")
	log.InfoContext(ctx, "not shown: below warn")
	log.WarnContext(ctx, "turn line", "authorization", "Bearer sk-proj-abcdefghijklmnopqrstuvwxyz0123456789")
	log.Warn("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (the info one filtered):\n%s", len(lines), buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("not JSON: %s", lines[0])
	}
	want := map[string]string{"msg": "turn line", "session_id": "sess_1", "turn_id": "turn_1", "trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %s", k, m[k], v)
		}
	}
	if strings.Contains(lines[0], "abcdefghijklmnopqrstuvwxyz") {
		t.Errorf("secret logged: %s", lines[0])
	}
	var plain map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &plain); err != nil {
		t.Fatal(err)
	}
	if _, ok := plain["session_id"]; ok {
		t.Errorf("a line without a turn context has a session_id: %s", lines[1])
	}

	buf.Reset()
	log = telemetry.NewLogger(&buf, slog.LevelWarn, envOf(map[string]string{"HERMES_LOG_FORMAT": "text", "HERMES_LOG_LEVEL": "debug"}))
	log.DebugContext(ctx, "debug line")
	if out := buf.String(); !strings.HasPrefix(out, "time=") || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "session_id=sess_1") {
		t.Errorf("text format at debug: %q", out)
	}
}
