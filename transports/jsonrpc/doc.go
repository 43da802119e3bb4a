// Package jsonrpc is the JSON-RPC 2.0 core shared by the TUI gateway and ACP: byte framing
// (newline-delimited streams, one message per WebSocket frame) kept apart from the protocol
// semantics (requests in both directions, notifications, errors with the standard codes).
//
// Ordering is part of the protocol: a Conn writes frames one at a time in the order they are
// submitted, and handlers run in arrival order on one dispatcher goroutine unless the Handler
// marks a method as async (slow methods whose responses may then arrive after later ones).
// The reader stays a short queue ahead of the dispatcher and handles two things itself, out
// of band: a peer's responses to our requests, so an answer is never stuck behind the work it
// unblocks, and $/cancelRequest, so a cancellation never waits behind the work it cancels.
//
// Every request with an id is answered, once. It gets its own context, derived from the
// connection's and ended when its response has been written, when the peer cancels it and
// when the connection ends; a request that stops for one of those is answered -32800.
//
// The end of the peer's input is not the end of the connection: the requests read before it
// are still handled and answered (for at most Options.EOFWait), and only then does the
// connection end. It ends when Run's context ends, when the input breaks (a read error other
// than EOF, a WebSocket closing), when a write fails, and when this side calls Close. Requests
// still running or queued then are cancelled and answered -32800 while the output can still
// be written; after Close nothing more is written at all.
//
// A handler's panic is logged with its stack and answered with -32603; the connection lives
// on.
package jsonrpc
