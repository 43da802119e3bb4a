package cli

// commands is the command table, in the order --help lists them: the everyday commands first,
// then the others by name. A command exists when it has a row here; nothing registers itself.
var commands = []command{
	{"chat", "chat with the agent in the terminal; -q PROMPT runs one turn", runChat},
	{"demo", "run the main job end to end offline: embedded store and recorded model cassette", runDemo},
	{"sessions", "list stored sessions", runSessions},
	{"config", "show the effective configuration (config show)", runConfig},
	{"version", "print the version", runVersion},
	{"acp", "serve the Agent Client Protocol on stdio, for editors (--check, --setup, --version)", runACP},
	{"api", "print the script API as TypeScript declarations, EmmyLua annotations or a Markdown reference", runAPI},
	{"conformance", "replay the recorded wire fixtures against a hermes build or a running server (--target BINARY|URL)", runConformance},
	{"doctor", "check the home, the store (--quarantine moves unreadable records aside), the model endpoints, MCP servers, the policy and the API keys; say what to do (--json)", runDoctor},
	{"gateway", "serve the TUI gateway (JSON-RPC 2.0) on stdin/stdout", runGateway},
	{"mcp", "serve Hermes sessions as MCP tools (mcp serve [--http ADDR]); check MCP servers (mcp status)", runMCP},
	{"policy", "policy scripts: test FILE (check its examples), replay SESSION --policy FILE, show", runPolicy},
	{"repl", "interactive JS or Lua console with the script API preloaded (--lang js|lua)", runRepl},
	{"run", "run a JS or Lua script against the engine (CI): exit 0 ok, 1 failed, 2 usage", runRun},
	{"serve", "serve HTTP: the OpenAI-compatible API under /v1 and the gateway over WebSocket at /api/ws", runServe},
	{"store-server", "(started by other commands) serve this home's session store to every hermes process", runStoreServer},
	{"test", "run *_test.js, *_test.lua and *_test.ts files (test/describe): exit 0 only when every test passed", runTest},
}

// lookup finds the command called name.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}
