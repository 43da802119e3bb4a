// Package httpapi is the HTTP surface of `hermes serve`, built on fiber: health checks, bearer
// authentication (constant-time), security headers and a CORS allow-list, the OpenAI-compatible
// API (/v1/chat/completions, /v1/responses, /v1/models, /v1/capabilities), the runs API
// (/v1/runs: detached turns with an SSE event log, approval, steer and stop), sessions as
// resources (/api/sessions: list, create, read, update, delete, messages, fork, and one turn
// as JSON or as named SSE events), the provider-aware model picker (/api/model/options),
// browser control (/v1/browser-control, off by default), the WebSocket mount of the TUI
// gateway at /api/ws, and the dashboard at /ui (package dashboard, off by default; it
// authenticates /api/ws with the key as a subprotocol, and its own origin passes the CORS check).
//
// Every API key is a principal (engine.Principal), and what it creates is its own: sessions
// (store.Session.Principal), runs, stored responses and conversation names, open requests,
// and its browser controller. Another principal gets 404, exactly as for an unknown id; the
// /api/ws connection acts for the key it authenticated with (gateway.Server.ServeAs). The
// primary key is the local owner's, an optional admin key sees everything. Browser control
// binds a controller to the principal that registered it, and a turn's browser tool calls go
// only to the controller of the principal whose request started that turn.
//
// Every route fails with the OpenAI error envelope; wire.Classify is the one place that maps
// engine errors to statuses and codes.
package httpapi
