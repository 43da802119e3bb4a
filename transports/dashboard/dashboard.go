// Package dashboard is the operator's web page of `hermes serve`, mounted by the HTTP API at
// /ui when it is enabled (`hermes serve --ui` or server.ui: true). It is a handful of static
// files — one HTML page, plain ES modules and a style sheet — embedded in the binary: no build
// step, no Node.js at run time, nothing loaded from another origin.
//
// The page is a client of the API like any other. It asks for an API key, keeps it in the
// tab's sessionStorage, and sends it as a bearer token on every request; the WebSocket gateway
// (/api/ws) is authenticated with the subprotocols WSProtocol and KeyProtocolPrefix followed by
// the key in base64url, since a browser cannot set headers on a WebSocket and a key in the URL
// would land in access logs. A key sees only its own sessions and runs, as everywhere else.
//
// Views: the sessions list with a search over title, id and first message; a session's
// transcript, live over /api/ws while a turn runs (message deltas, tool calls, status), with
// its open approvals answered in one click; the runs table (GET /v1/runs), refreshed while it
// is shown; and charts (inline SVG) of turns, tokens and durations over time, drawn from the
// runs and the sessions' usage.
package dashboard

import (
	"embed"
	"io/fs"
	"mime"
	"path"
	"strings"
)

// WSProtocol is the subprotocol a browser offers on /api/ws and the server selects.
const WSProtocol = "hermes.v1"

// KeyProtocolPrefix starts the second subprotocol a browser offers on /api/ws: the API key,
// base64url without padding (every character of it is allowed in a subprotocol token).
const KeyProtocolPrefix = "hermes.key."

// CSP is the Content-Security-Policy of every /ui response: scripts, styles and connections
// from this origin only (WebSocket included), no inline script or style, no framing, no plugins,
// no form posting elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed static
var files embed.FS

// File returns the content and media type of the dashboard file name ("" is the page
// itself); ok is false for a name that is not one of its files.
func File(name string) (body []byte, contentType string, ok bool) {
	name = strings.TrimPrefix(name, "/")
	if name == "" {
		name = "index.html"
	}
	if !fs.ValidPath(name) || strings.HasPrefix(path.Base(name), ".") {
		return nil, "", false
	}
	b, err := files.ReadFile("static/" + name)
	if err != nil {
		return nil, "", false
	}
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8" // module scripts need a JavaScript type whatever the host's mime table says
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	return b, ct, true
}
