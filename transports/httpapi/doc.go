// Package httpapi is the HTTP surface of `hermes serve`, built on fiber: health checks, bearer
// authentication (constant-time), and the WebSocket mount of the TUI gateway at /api/ws.
package httpapi
