// Package gateway is the TUI gateway: the JSON-RPC 2.0 method set that custom desktop, web and
// terminal hosts use to drive the engine, over newline-delimited stdio (`hermes gateway`) or
// one message per WebSocket frame (`/api/ws` on `hermes serve`).
//
// A Server is shared by every connection of one process: it maps short runtime session ids to
// live engine sessions, so several clients can attach to one session and all receive its
// events. Each (connection, session) attachment has a pump goroutine that renders the
// session's journal as `event` notifications stamped with the journal seq, and turns open
// engine requests (approval, clarify, sudo, secret) into server→client requests.
//
// Ordering: a response never overtakes the events emitted before its request was handled, and
// a response to prompt.submit precedes that turn's message.start: while an inline handler runs,
// the connection's pumps are paused after catching up to the journal.
package gateway
