package builtin

import "github.com/hermes-go/hermes/engine/tool"

// Defaults returns the built-in tools with default limits: terminal (whose Guard consults
// check, which may be nil), process, read_file, write_file, patch, search_files and todo.
func Defaults(check func(command string) tool.Verdict) []tool.Tool {
	return []tool.Tool{
		&Terminal{CheckCommand: check},
		&Process{},
		ReadFile{},
		WriteFile{},
		Patch{},
		SearchFiles{},
		Todo{},
	}
}
