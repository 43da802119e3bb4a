// Package builtin implements the tools every session starts with: terminal (foreground and
// background commands), process (list, poll, wait and kill background commands), read_file,
// write_file, patch (exact replacement and V4A multi-file patches) and search_files.
//
// Every tool reports what the model did wrong as a model-visible tool.Result with IsError set;
// a Go error from Call means the machine failed (a pipe could not be created, a shell could not
// be started), never that the model asked for something impossible.
//
// File tools are confined to the session working directory (Env.Cwd) through Resolve, which
// follows symbolic links before deciding. The confinement protects against model mistakes and
// prompt-injected paths; it is not a sandbox against a concurrent process that swaps a
// directory for a symlink between the check and the open. The terminal command itself is not
// confined: what it may run is decided by the approval policy through Terminal.Check.
package builtin
