package acp

import (
	"context"
	"io"
	"log/slog"

	"github.com/hermes-go/hermes/engine"
)

// Guard exposes the frame guard to the fuzz target, with the default in-flight cap.
func Guard(in io.Reader, out, reply io.Writer, maxLine int) error {
	return guard(in, out, reply, maxLine, newInflight(DefaultMaxInFlight), slog.New(slog.DiscardHandler))
}

// Coalesce reads f as a prompt's turn loop does.
func Coalesce(f *engine.Follow) func(context.Context) (engine.Event, error) {
	c := &coalescer{f: f}
	return c.next
}

// SettingError is the error mapping of model and mode changes, as the client is answered.
func SettingError(err error) error { return answerError(context.Background(), settingError(err)) }

// AnswerError is the mapping of every handler's error to its answer.
var AnswerError = answerError
