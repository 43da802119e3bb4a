package scripting

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckInput(t *testing.T) {
	for _, c := range []struct {
		hook string
		in   any
		want string // "" valid
	}{
		{HookApproval, map[string]any{}, ""},
		{HookApproval, []any{}, ""}, // an empty Lua table
		{HookApproval, map[string]any{"command": "ls", "args": map[string]any{"command": "ls"}, "patterns": []any{"x"}, "approved": map[string]any{}, "mode": "yolo", "cwd": nil}, ""},
		{HookApproval, map[string]any{"args": `{"command":"ls"}`}, ""},
		{HookApproval, map[string]any{"comand": "ls"}, `unknown field "comand" in the approval input (did you mean "command"?)`},
		{HookApproval, map[string]any{"zzzzzz": 1}, `unknown field "zzzzzz" in the approval input; its fields are`},
		{HookApproval, map[string]any{"command": int64(42)}, "approval.command must be a string, not a number"},
		{HookApproval, map[string]any{"args": int64(1)}, "approval.args must be an object or a JSON string, not a number"},
		{HookApproval, map[string]any{"patterns": "x"}, "approval.patterns must be a list of strings, not a string"},
		{HookApproval, nil, "the approval input must be an object, not null"},
		{HookBusyInput, map[string]any{"iteration": "3"}, "busy_input.iteration must be a number, not a string"},
		{HookSteer, map[string]any{"text": "x", "iteration": int64(2), "tool": "terminal"}, ""},
		{HookRoute, map[string]any{"headers": "x"}, "route.headers must be an object, not a string"},
		{HookCompact, map[string]any{"context_used": int64(1), "threshold": 0.5, "reason": "overflow"}, ""},
		{HookCompact, map[string]any{"treshold": 0.5}, `(did you mean "threshold"?)`},
	} {
		err := CheckInput(c.hook, c.in)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %v: %v", c.hook, c.in, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %v: %v, want %q", c.hook, c.in, err, c.want)
		}
	}
}
