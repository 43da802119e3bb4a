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
// Every request gets its own context, derived from the connection's and ended when its
// response has been written, when the peer cancels it and when the connection ends. A
// handler's panic is logged with its stack and answered with -32603; the connection lives on.
package jsonrpc
