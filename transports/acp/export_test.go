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

// Coalesce reads sub as a prompt's turn loop does.
func Coalesce(sub *engine.Subscription) func(context.Context) (engine.Event, error) {
	c := &coalescer{sub: sub}
	return c.next
}

// SettingError is the error mapping of model and mode changes.
var SettingError = settingError
