package stdlib

// The script API, defined once. Every module member, object method and global the bindings
// offer has an entry here with its parameters, result and documentation; tests check the
// bindings against it both ways (a member without an entry, or an entry without a member,
// fails), and `hermes api` generates from it the TypeScript declarations, the EmmyLua
// annotations and the API reference page that ship with the product. So docs, typings and
// bindings cannot drift.
//
// Types use a small notation shared by the generators: string, number, boolean, any, object
// (a plain table), void, T[] (a list), T? (may be nil), iter<T> (for…of in JS, a generic for
// in Lua), fn (a script function), and the names of the Types below.

// Param is one parameter of a function.
type Param struct {
	Name     string
	Type     string
	Optional bool
	Doc      string
}

// Member is one member of a module or object: a function (Params non-nil or Returns set, or
// Func) or a value (Type).
type Member struct {
	Name    string
	Func    bool
	Params  []Param
	Returns string
	Type    string // for a value member
	Doc     string
	Members []Member // a function's own functions (test.skip)
}

// Field is one field of a record type.
type Field struct {
	Name, Type, Doc string
	Optional        bool
}

// TypeDef is a record type scripts receive (an event, a turn's outcome).
type TypeDef struct {
	Name   string
	Doc    string
	Fields []Field
}

// APIModule is a module (require("name")), an object type (Session, Turn) or the globals.
type APIModule struct {
	Name    string
	Kind    string // module, object, globals
	Granted string // the grant a module needs ("" none)
	Doc     string
	Members []Member
}

func fn(name, returns, doc string, params ...Param) Member {
	if params == nil {
		params = []Param{}
	}
	return Member{Name: name, Func: true, Params: params, Returns: returns, Doc: doc}
}

func withMembers(m Member, members ...Member) Member {
	m.Members = members
	return m
}

func val(name, typ, doc string) Member { return Member{Name: name, Type: typ, Doc: doc} }

func p(name, typ, doc string) Param    { return Param{Name: name, Type: typ, Doc: doc} }
func opt(name, typ, doc string) Param  { return Param{Name: name, Type: typ, Optional: true, Doc: doc} }
func f(name, typ, doc string) Field    { return Field{Name: name, Type: typ, Doc: doc} }
func fopt(name, typ, doc string) Field { return Field{Name: name, Type: typ, Doc: doc, Optional: true} }
func msgParam(what string) Param {
	return opt("message", "string", "prefixed to the failure message"+what)
}
func assertFn(name, doc string, ps ...Param) Member {
	return fn(name, "void", doc+" A failure ends the script (or the test) with exit 1, naming the file and line.", ps...)
}

// APITypes are the record types of the script API.
var APITypes = []TypeDef{
	{Name: "Event", Doc: "One event of a session's journal.", Fields: []Field{
		f("seq", "number", "position in the session's journal (from 1)"),
		f("type", "string", "message.start, message.delta, tool.start, tool.complete, request.open, request.resolved, message.complete, status.update, session.closed, …"),
		f("session_id", "string", ""),
		fopt("turn_id", "string", "the turn the event belongs to"),
		f("time", "string", "RFC 3339"),
		fopt("text", "string", "streamed text (message.delta)"),
		fopt("data", "any", "the payload of the event type (the Outcome on message.complete)"),
	}},
	{Name: "Outcome", Doc: "How a turn ended.", Fields: []Field{
		f("turn_id", "string", ""),
		f("status", "string", "completed, failed or cancelled"),
		f("turn_exit_reason", "string", "why the loop stopped"),
		f("completed", "boolean", ""), f("partial", "boolean", ""), f("interrupted", "boolean", ""),
		f("text", "string", "the final answer"),
		fopt("error", "string", ""),
		f("usage", "object", "prompt_tokens, completion_tokens, total_tokens, …"),
		f("api_calls", "number", ""), f("model", "string", ""),
	}},
	{Name: "Request", Doc: "An open question to the script: an approval or a clarify question.", Fields: []Field{
		f("id", "string", "answer with s.answer(id, …)"),
		f("method", "string", "approval or clarify"),
		f("session_id", "string", ""), f("turn_id", "string", ""),
		fopt("command", "string", "approval: the command text"),
		fopt("pattern_key", "string", "approval: the dangerous pattern matched"),
		fopt("question", "string", "clarify: the question"),
		fopt("choices", "string[]", "clarify: the choices offered"),
	}},
	{Name: "Handlers", Doc: "What answers a turn's requests while run() or wait() drives it.", Fields: []Field{
		fopt("approval", "any", "a function(request) returning once, session, always or deny (or {choice}), or one of those words"),
		fopt("clarify", "fn", "a function(request) returning the answer"),
		fopt("on_event", "fn", "called with every event of the turn"),
	}},
	{Name: "CreateOptions", Doc: "Options of hermes.create.", Fields: []Field{
		fopt("model", "string", "provider:model"), fopt("cwd", "string", "working directory of the session's tools"),
		fopt("title", "string", "a title already taken gets a number (\"ci #2\")"), fopt("id", "string", "a session id to use"),
		fopt("policy", "string", "a policy file deciding this session's hooks"),
	}},
	{Name: "HTTPResponse", Doc: "What the http module returns.", Fields: []Field{
		f("status", "number", ""), f("headers", "object", "header name → value"), f("body", "string", ""),
	}},
	{Name: "CompactInput", Doc: "What a policy's compact hook receives before every model call (reason threshold) and when the provider refused a request as too long (reason overflow).", Fields: []Field{
		f("session_id", "string", ""), f("model", "string", "provider:model"),
		f("context_used", "number", "the next request's estimate, in tokens"),
		f("context_max", "number", "the model's context window, in tokens"),
		f("percent", "number", "context_used as a whole percentage of context_max"),
		f("threshold", "number", "the configured fraction of the window (compression.threshold; negative: automatic compaction off)"),
		f("reason", "string", "threshold or overflow"),
	}},
	{Name: "CompactDecision", Doc: "What a compact hook returns: true or false, nothing (the configured rule), or this object.", Fields: []Field{
		fopt("compact", "boolean", "compact now; left out, the context is compared with threshold (an overflow always compacts)"),
		fopt("threshold", "number", "a fraction of the window (above 0, at most 1) replacing the configured one"),
		fopt("prompt", "string", "the summarisation prompt, replacing the built-in one (at most 8000 bytes)"),
	}},
	{Name: "FakeReply", Doc: "One scripted reply of hermes.fake_model: text, or a tool call.", Fields: []Field{
		fopt("text", "string", "the assistant's answer"),
		fopt("tool", "string", "a tool to call (terminal, write_file, clarify, …)"),
		fopt("args", "object", "the tool call's arguments"),
	}},
}

// API is every module, object and global of the script API.
var API = []APIModule{
	{Name: "globals", Kind: "globals", Doc: "Globals of every script.", Members: []Member{
		fn("print", "void", "Writes its arguments, separated by spaces, to standard output (standard error under hermes run --json).", p("...values", "any", "")),
		fn("require", "any", "A standard module by name, or a file module by a relative path (./x.js, ./x.ts in JS; lib.x for lib/x.lua in Lua), confined to the script's directory and loaded once per run.", p("name", "string", "")),
		withMembers(fn("test", "void", "Registers a test (hermes test). It runs after the file is loaded, on its own: the sessions it creates are closed when it ends, and its failure does not stop the next.", p("name", "string", ""), p("fn", "fn", "the test body")),
			fn("skip", "void", "Registers a test that is reported skipped and does not run.", p("name", "string", ""), p("fn", "fn", "the test body")),
			fn("only", "void", "Registers a test that runs alone: the file's tests not marked only are filtered out, and the run fails so that it cannot pass by accident.", p("name", "string", ""), p("fn", "fn", "the test body"))),
		withMembers(fn("describe", "void", "Groups tests: tests registered inside fn are named \"name > test\".", p("name", "string", ""), p("fn", "fn", "runs at once")),
			fn("skip", "void", "Groups tests that are all skipped.", p("name", "string", ""), p("fn", "fn", "runs at once")),
			fn("only", "void", "Groups tests that are all marked only.", p("name", "string", ""), p("fn", "fn", "runs at once"))),
	}},
	{Name: "json", Kind: "module", Doc: "JSON text.", Members: []Member{
		fn("encode", "string", "Encodes a value as JSON text.", p("value", "any", ""), opt("indent", "string", "indentation per level")),
		fn("decode", "any", "Decodes JSON text.", p("text", "string", "")),
	}},
	{Name: "log", Kind: "module", Doc: "Structured log records on the host's log (standard error), tagged with the script.", Members: []Member{
		fn("debug", "void", "Logs at debug level.", p("message", "string", ""), opt("fields", "object", "extra attributes")),
		fn("info", "void", "Logs at info level.", p("message", "string", ""), opt("fields", "object", "extra attributes")),
		fn("warn", "void", "Logs at warn level.", p("message", "string", ""), opt("fields", "object", "extra attributes")),
		fn("error", "void", "Logs at error level.", p("message", "string", ""), opt("fields", "object", "extra attributes")),
	}},
	{Name: "time", Kind: "module", Doc: "Clock and sleeps (milliseconds).", Members: []Member{
		fn("now", "number", "Milliseconds since the Unix epoch."),
		fn("since", "number", "Milliseconds elapsed since ms.", p("ms", "number", "")),
		fn("sleep", "void", "Sleeps; an interrupt (timeout, Ctrl-C) ends it early.", p("ms", "number", "")),
		fn("format", "string", "Formats ms in UTC (default RFC 3339; a Go time layout otherwise).", p("ms", "number", ""), opt("layout", "string", "")),
	}},
	{Name: "assert", Kind: "module", Doc: "Assertions. Truth follows JS in both languages: nil, false, 0 and \"\" are false.", Members: []Member{
		assertFn("ok", "Fails unless value is true.", p("value", "any", ""), msgParam("")),
		assertFn("equal", "Fails unless actual deep-equals expected.", p("actual", "any", ""), p("expected", "any", ""), msgParam("")),
		assertFn("not_equal", "Fails when actual deep-equals expected.", p("actual", "any", ""), p("expected", "any", ""), msgParam("")),
		assertFn("match", "Fails unless s matches the RE2 pattern.", p("s", "string", ""), p("pattern", "string", ""), msgParam("")),
		assertFn("contains", "Fails unless haystack (string, list or object keys) contains needle.", p("haystack", "any", ""), p("needle", "any", ""), msgParam("")),
		assertFn("fail", "Always fails.", opt("message", "string", "")),
		fn("throws", "string", "Calls fn and fails unless it throws (an error matching pattern, when given); returns the error's message.", p("fn", "fn", ""), opt("pattern", "string", "RE2"), msgParam("")),
	}},
	{Name: "re", Kind: "module", Doc: "Go (RE2) regular expressions: a pattern means the same in JS and Lua.", Members: []Member{
		fn("match", "boolean", "Whether s matches.", p("pattern", "string", ""), p("s", "string", "")),
		fn("find", "string?", "The first match, or nil.", p("pattern", "string", ""), p("s", "string", "")),
		fn("groups", "string[]?", "[whole, group1, …] of the first match, or nil.", p("pattern", "string", ""), p("s", "string", "")),
		fn("find_all", "string[]", "Every match (at most n).", p("pattern", "string", ""), p("s", "string", ""), opt("n", "number", "")),
		fn("replace", "string", "Replaces every match; $1 refers to a group.", p("pattern", "string", ""), p("s", "string", ""), p("repl", "string", "")),
		fn("split", "string[]", "Splits s around the matches (at most n parts).", p("pattern", "string", ""), p("s", "string", ""), opt("n", "number", "")),
		fn("quote", "string", "Escapes s so it matches literally.", p("s", "string", "")),
	}},
	{Name: "path", Kind: "module", Doc: "Lexical slash-separated paths (no file system access).", Members: []Member{
		fn("join", "string", "Joins and cleans.", p("...parts", "string", "")),
		fn("clean", "string", "The shortest equivalent path.", p("p", "string", "")),
		fn("base", "string", "The last element.", p("p", "string", "")),
		fn("dir", "string", "All but the last element.", p("p", "string", "")),
		fn("ext", "string", "The extension, with its dot.", p("p", "string", "")),
		fn("is_abs", "boolean", "Whether p is absolute.", p("p", "string", "")),
		fn("resolve", "string", "p made absolute against base.", p("base", "string", ""), p("p", "string", "")),
		fn("within", "boolean", "Whether p (resolved against dir) is dir or below it.", p("p", "string", ""), p("dir", "string", "")),
		fn("rel", "string", "p relative to base.", p("base", "string", ""), p("p", "string", "")),
	}},
	{Name: "fs", Kind: "module", Granted: "fs", Doc: "Files inside the granted directories (--grant fs or fs:DIR), symbolic links followed.", Members: []Member{
		fn("read", "string", "A file's text.", p("path", "string", "")),
		fn("write", "void", "Writes a file.", p("path", "string", ""), p("text", "string", "")),
		fn("append", "void", "Appends to a file.", p("path", "string", ""), p("text", "string", "")),
		fn("exists", "boolean", "Whether the path exists.", p("path", "string", "")),
		fn("list", "string[]", "The names in a directory.", p("dir", "string", "")),
		fn("mkdir", "void", "Makes a directory and its parents.", p("path", "string", "")),
		fn("remove", "void", "Removes a file or an empty directory.", p("path", "string", "")),
	}},
	{Name: "http", Kind: "module", Granted: "http", Doc: "HTTP to the granted hosts only (--grant http:HOST), redirects included; bodies up to 16 MiB.", Members: []Member{
		fn("request", "HTTPResponse", "Sends a request.", p("options", "object", "{method, url, headers, body, timeout_ms}")),
		fn("get", "HTTPResponse", "GET url.", p("url", "string", ""), opt("options", "object", "{headers, timeout_ms}")),
	}},
	{Name: "hermes", Kind: "module", Doc: "The engine: sessions, turns, approvals (hermes run, hermes test, hermes repl).", Members: []Member{
		val("version", "string", "The hermes version."),
		val("args", "string[]", "The script's arguments (after the file on the command line)."),
		fn("create", "Session", "Creates a session.", opt("options", "CreateOptions", "")),
		fn("open", "Session", "Opens a stored session.", p("id", "string", ""), opt("options", "object", "{policy, model}")),
		fn("sessions", "object[]", "Lists stored sessions, newest first.", opt("options", "object", "{limit}")),
		fn("exit", "void", "Ends the script with an exit code.", opt("code", "number", "default 0")),
		fn("fake_model", "string", "Registers a scripted model that answers each turn's model calls with the replies in order, and returns its name for create({model}) or set_model: a policy or a script is tested end to end with no server and no cassette.", p("replies", "FakeReply[]", "")),
	}},
	{Name: "Session", Kind: "object", Doc: "A session (hermes.create, hermes.open, s.branch). In Lua, call methods as s:prompt(…) or s.prompt(…).", Members: []Member{
		val("id", "string", "The session id."),
		fn("info", "object", "Status, model, title, usage, and the context: context_used, context_max, context_percent, context_estimated, compressions."),
		fn("snapshot", "object", "The session's state: status, running turn, open requests, queue."),
		fn("requests", "Request[]", "The open requests."),
		fn("prompt", "Turn", "Submits a prompt and returns the turn, to read its events or wait for it.", p("text", "string", "")),
		fn("run", "Outcome", "Submits a prompt and drives the turn to its end, answering requests with handlers (unhandled approvals are denied, questions withdrawn).", p("text", "string", ""), opt("handlers", "Handlers", "")),
		fn("events", "iter<Event>", "The session's events after since (default: from now). With follow: false it returns what is stored and ends; otherwise it follows new events until the session closes.", opt("options", "object", "{since, follow}")),
		fn("answer", "void", "Answers an open request: a word (once, session, always, deny; a clarify answer) or an object.", p("id", "string", ""), p("answer", "any", "")),
		fn("withdraw", "void", "Withdraws an open request.", p("id", "string", ""), opt("reason", "string", "")),
		fn("steer", "string", "Adds guidance to the running turn; returns the steer's id.", p("text", "string", "")),
		fn("interrupt", "boolean", "Interrupts the running turn; false when none runs.", opt("reason", "string", "")),
		fn("branch", "Session", "A new session with this one's history (up to a row).", opt("options", "object", "{title, upto_row_id, policy}")),
		fn("history", "object[]", "The stored transcript rows.", opt("options", "object", "{tail, after}")),
		fn("set_model", "string", "Switches the model; returns the resolved name.", p("model", "string", "")),
		fn("set_title", "void", "Sets the title.", p("title", "string", "")),
		fn("wait", "void", "Waits until no turn runs."),
		fn("close", "void", "Interrupts, waits and detaches the session (it stays stored).", opt("reason", "string", "")),
	}},
	{Name: "Turn", Kind: "object", Doc: "A turn started by s.prompt.", Members: []Member{
		val("id", "string", "The turn id (\"\" when the prompt did not start one)."),
		val("status", "string", "How the prompt was admitted: started, queued, steered, rejected, …"),
		val("message", "string", "Why, when not started."),
		fn("events", "iter<Event>", "The turn's events from its start, every time it is called (also after wait), ending with its message.complete."),
		fn("wait", "Outcome", "Drives the turn to its end with handlers and returns its outcome (at once if it already ended).", opt("handlers", "Handlers", "")),
	}},
	{Name: "policy hermes", Kind: "module", Doc: "What require(\"hermes\") gives a policy file: decision helpers.", Members: []Member{
		fn("allow", "object", "An allow decision.", opt("reason", "string", "")),
		fn("deny", "object", "A deny decision.", opt("reason", "string", "")),
		fn("ask", "object", "An ask decision (a person decides).", opt("reason", "string", "")),
		val("hooks", "object", "The hook names: approval, busy_input, steer, route, compact."),
	}},
}

// APIModuleNamed returns the entry of a module or object.
func APIModuleNamed(name string) (APIModule, bool) {
	for _, m := range API {
		if m.Name == name {
			return m, true
		}
	}
	return APIModule{}, false
}

// CheckAPI compares a binding's members with the API's entry for name: it lists the members
// without an entry and the entries without a member.
func CheckAPI(name string, members []string) (undocumented, missing []string) {
	m, ok := APIModuleNamed(name)
	if !ok {
		return members, nil
	}
	have := map[string]bool{}
	for _, n := range members {
		have[n] = true
	}
	doc := map[string]bool{}
	for _, e := range m.Members {
		doc[e.Name] = true
		if !have[e.Name] {
			missing = append(missing, e.Name)
		}
	}
	for _, n := range members {
		if !doc[n] {
			undocumented = append(undocumented, n)
		}
	}
	return undocumented, missing
}
