// Package httpapi is the HTTP surface of `hermes serve`, built on fiber: health checks, bearer
// authentication (constant-time), security headers and a CORS allow-list, the OpenAI-compatible
// API (/v1/chat/completions, /v1/responses, /v1/models, /v1/capabilities), the runs API
// (/v1/runs: detached turns with an SSE event log, approval, steer and stop), and the
// WebSocket mount of the TUI gateway at /api/ws.
//
// Every route fails with the OpenAI error envelope; classify is the one place that maps engine
// errors to statuses and codes.
package httpapi
