// Package engine runs the agent: an LLM tool-calling loop over durable sessions. It owns the
// store, the model providers, the tool registry, the policy hooks and the live sessions, and it
// is the one API every surface (gateway, ACP, HTTP, scripts, the CLI) calls.
//
// A session's life is told through its journal: every event gets a per-session monotonic seq,
// and any number of subscribers attach with a cursor, replay what they missed, then follow
// live. A turn is a short explicit loop of named steps (see turn.go) that ends with exactly one
// Outcome, from which every surface derives its terminal signal. When the agent needs a person
// (approval, clarify, sudo, secret) it opens a Request on the session and waits for an answer
// that any attached surface may give; unanswered approvals are denied.
//
// The engine imports nothing outside engine/ (plus the standard library and its storage
// driver); transports and scripting depend on it, never the reverse.
package engine
