// Package conformance replays recorded wire fixtures against a running Hermes build, one
// driver per transport, and compares what comes back with what was recorded.
//
// # Fixture format
//
// A fixture is a txtar archive in testdata/ (the comment before the first file describes it):
//
//	-- meta.json --       {"transports": ["gateway-stdio", "gateway-ws"], "ignore": ["status.update"], "config": "…yaml…"}
//	-- cassette.json --   the scripted model: a replay cassette recorded on the OpenAI wire
//	-- policy.js --       optional policy script (or policy.lua)
//	-- client.jsonl --    the script: one step per line
//	-- want/<transport>.jsonl --   the expected server frames, written only by -update
//
// A step is a JSON object: {"send": <frame>} writes a client frame and then reads until the
// response to its id; {"send": …, "until": "message.complete"} reads on until an event of that
// type; {"raw": "text"} sends bytes that need not be JSON and reads the answer; {"until": "…"} only reads; {"answer": "$id1", "result": {…}} answers a server→client
// request; {"await": 4} reads until the response to request 4; {"close": true} ends the connection and {"reconnect": true} opens a new one to the
// same server (the WebSocket driver; stdio cannot reconnect, so such fixtures list only ws).
//
// # Normalisation and captures
//
// Frames are compared as JSON with keys sorted. Values that differ between runs are replaced by
// placeholders in order of first appearance: session ids ($session1…), server request ids
// ($request1…), tool call ids ($tool1…), row ids ($row1…), task ids, epochs and timestamps
// ($time). Event seq numbers are rebased per session (the first seq seen becomes 1). Client
// frames may use the same placeholders: a value captured earlier (say the session id returned
// by session.create) is substituted before sending. Events whose type is in meta.ignore are
// dropped before comparing (they carry timing, not contract), and so is tool.progress always.
//
// # Running
//
// `go test ./conformance/...` builds hermes and replays every fixture on every transport it
// names; `go test ./conformance/... -update` re-records want/ from the current build.
package conformance
