package builtin

import (
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/toolenv"
)

// Defaults returns the built-in tools with default limits: terminal (whose Guard consults
// check, which may be nil), process, read_file, write_file, patch, search_files and todo.
// Terminal commands get the allow-listed environment only (see DefaultsEnv).
func Defaults(check func(command string) tool.Verdict) []tool.Tool {
	return DefaultsEnv(check, toolenv.Policy{})
}

// DefaultsEnv is Defaults whose terminal commands (foreground and background) get the
// environment env allows.
func DefaultsEnv(check func(command string) tool.Verdict, env toolenv.Policy) []tool.Tool {
	return []tool.Tool{
		&Terminal{CheckCommand: check, Env: env},
		&Process{},
		ReadFile{},
		WriteFile{},
		Patch{},
		SearchFiles{},
		Todo{},
	}
}
