// Package jsonrpc is the JSON-RPC 2.0 core shared by the TUI gateway and ACP: byte framing
// (newline-delimited streams, one message per WebSocket frame) kept apart from the protocol
// semantics (requests in both directions, notifications, errors with the standard codes).
//
// Ordering is part of the protocol: a Conn writes frames one at a time in the order they are
// submitted, and handlers run in arrival order on the reader goroutine unless the Handler marks
// a method as async (slow methods whose responses may then arrive after later ones). A peer's
// responses to our requests are routed out of band, so an answer is never stuck behind the
// work it unblocks.
package jsonrpc
