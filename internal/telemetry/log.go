package telemetry

import (
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/hermes-go/hermes/engine/logctx"
	"github.com/hermes-go/hermes/engine/redact"
)

// NewLogger is the logger of a command writing to w: JSON lines when w is not a terminal,
// text when it is (HERMES_LOG_FORMAT=json|text decides instead), from level up
// (HERMES_LOG_LEVEL=debug|info|warn|error decides instead). A line logged with a context
// carries that context's session_id, turn_id and trace_id (engine/logctx), and every line is
// redacted (engine/redact) so no key, header value or URL credential reaches the log.
func NewLogger(w io.Writer, level slog.Level, getenv func(string) string) *slog.Logger {
	if l, ok := parseLevel(getenv("HERMES_LOG_LEVEL")); ok {
		level = l
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch strings.ToLower(strings.TrimSpace(getenv("HERMES_LOG_FORMAT"))) {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		if isTerminal(w) {
			h = slog.NewTextHandler(w, opts)
		} else {
			h = slog.NewJSONHandler(w, opts)
		}
	}
	// Redaction is outermost: the ids logctx adds are not secrets, and every attribute the
	// caller passes is redacted before the inner handlers see it.
	return redact.NewLogger(logctx.Handler(h))
}

func parseLevel(s string) (slog.Level, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, false
	}
	return l, true
}

// isTerminal reports whether w is a character device (a terminal) rather than a file or a
// pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
