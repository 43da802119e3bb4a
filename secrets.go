package main

import (
	"io"
	"log/slog"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/engine/tool/toolenv"
)

// newLogger is the logger of every command: text on w from level up, each record redacted
// (engine/redact) so no API key, header value or URL credential reaches the log.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return redact.NewLogger(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// toolEnv is the environment policy of the processes tools start (terminal commands,
// background processes, MCP stdio servers): the allow-list, plus tools.env_passthrough, never a
// key variable unless it is named there exactly.
func toolEnv(cfg *config.Config) toolenv.Policy {
	return toolenv.Policy{Passthrough: cfg.Tools.EnvPassthrough, Secret: cfg.SecretEnv()}
}
