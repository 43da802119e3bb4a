package acp

import (
	"context"

	"github.com/hermes-go/hermes/engine"
)

// Guard exposes the frame guard to the fuzz target.
var Guard = guard

// Coalesce reads sub as a prompt's turn loop does.
func Coalesce(sub *engine.Subscription) func(context.Context) (engine.Event, error) {
	c := &coalescer{sub: sub}
	return c.next
}

// SettingError is the error mapping of model and mode changes.
var SettingError = settingError
