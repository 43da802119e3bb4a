package cli

import (
	"io"
	"log/slog"
	"os"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/tool/toolenv"
	"github.com/hermes-go/hermes/internal/telemetry"
)

// newLogger is the logger of every command: JSON lines on w (text on a terminal) from level
// up, HERMES_LOG_FORMAT and HERMES_LOG_LEVEL overriding; each record redacted (engine/redact)
// so no API key, header value or URL credential reaches the log, and stamped with the
// session, turn and trace ids of the context it was logged with (internal/telemetry).
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return telemetry.NewLogger(w, level, os.Getenv)
}

// toolEnv is the environment policy of the processes tools start (terminal commands,
// background processes, MCP stdio servers): the allow-list, plus tools.env_passthrough, never a
// key variable unless it is named there exactly.
func toolEnv(cfg *config.Config) toolenv.Policy {
	return toolenv.Policy{Passthrough: cfg.Tools.EnvPassthrough, Secret: cfg.SecretEnv()}
}
