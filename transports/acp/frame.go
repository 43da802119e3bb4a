package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/ids"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// lockedWriter serializes whole frames: the SDK writes one complete line per Write call, and
// the input guard writes its own error responses to the same stream. On the way out it puts
// the client's own request ids back into the SDK's responses (see inflight).
type lockedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	ids *inflight // nil: frames pass unchanged
	// follow holds frames to write right behind the first response that names a session
	// ("sessionId":"<id>" in its result), keyed by that marker.
	follow map[string][][]byte
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	out := p
	if l.ids != nil {
		out = l.ids.restore(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(out); err != nil {
		return 0, err
	}
	if len(l.follow) > 0 && bytes.HasPrefix(out, []byte(`{"jsonrpc":"2.0","id":`)) && bytes.Contains(out, []byte(`,"result":`)) {
		for marker, frames := range l.follow {
			if !bytes.Contains(out, []byte(marker)) {
				continue
			}
			delete(l.follow, marker)
			for _, f := range frames {
				if _, err := l.w.Write(f); err != nil {
					return len(p), nil // the response itself went out; the connection is ending
				}
			}
		}
	}
	return len(p), nil
}

// after queues frames (whole lines) to be written right behind the response whose result
// names session id, so nothing can come between them.
func (l *lockedWriter) after(id string, frames [][]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.follow == nil {
		l.follow = map[string][][]byte{}
	}
	marker := `"sessionId":` + strconv.Quote(id)
	l.follow[marker] = append(l.follow[marker], frames...)
}

// JSON-RPC error codes the guard answers with itself.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
	codeOverloaded     = jsonrpc.CodeOverloaded
)

// DefaultMaxInFlight is the default cap on requests in flight on one connection.
const DefaultMaxInFlight = jsonrpc.DefaultMaxInFlight

// inflight tracks the client's requests the SDK is working on. Each is handed to the SDK
// under a surrogate id ("h#<n>") and the client's id is kept here, exactly as it was written:
// the SDK would re-encode it (escaping '<', '&', U+2028, and worse for invalid UTF-8) and
// answers every request on its own goroutine with no limit, so the guard both echoes ids byte
// for byte and caps how many requests run at once.
type inflight struct {
	mu       sync.Mutex
	max      int // <= 0: no cap
	next     uint64
	byToken  map[string]json.RawMessage // surrogate JSON token → the client's raw id
	byClient map[string]string          // the client's raw id → surrogate token ($/cancel_request)
	idle     chan struct{}              // closed when the last running request is answered; nil until waited on
	// ours are the requests the adapter sends the client itself, outside the SDK (whose typed
	// requests lack members the protocol has since gained): their answers are taken off the
	// input here and never reach the SDK.
	ours    map[string]chan []byte // JSON id token → where its answer goes
	nextOut uint64
}

func newInflight(max int) *inflight {
	return &inflight{max: max, byToken: map[string]json.RawMessage{}, byClient: map[string]string{}}
}

// admit registers a request and returns its surrogate token, or "" when the connection is
// at its cap.
func (f *inflight) admit(id json.RawMessage) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.max > 0 && len(f.byToken) >= f.max {
		return ""
	}
	f.next++
	tok := `"h#` + strconv.FormatUint(f.next, 10) + `"`
	f.byToken[tok] = append(json.RawMessage(nil), id...)
	f.byClient[string(id)] = tok
	return tok
}

// surrogate returns the token a still-running request of the client runs under.
func (f *inflight) surrogate(id json.RawMessage) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok, ok := f.byClient[string(id)]
	return tok, ok
}

func (f *inflight) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byToken)
}

// waitIdle waits until every request handed to the SDK has been answered, at most d.
func (f *inflight) waitIdle(d time.Duration) bool {
	f.mu.Lock()
	if len(f.byToken) == 0 {
		f.mu.Unlock()
		return true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-idle:
		return true
	case <-timer.C:
		return false
	}
}

// ownPrefix begins the ids of the adapter's own requests to the client (the SDK numbers its
// own).
const ownPrefix = `"hermes-`

// expect registers a request of the adapter's own and returns its id token and the channel
// its answer (the whole response line) arrives on.
func (f *inflight) expect() (string, <-chan []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ours == nil {
		f.ours = map[string]chan []byte{}
	}
	f.nextOut++
	tok := ownPrefix + strconv.FormatUint(f.nextOut, 10) + `"`
	ch := make(chan []byte, 1)
	f.ours[tok] = ch
	return tok, ch
}

// forget drops a request of the adapter's own that is no longer waited for.
func (f *inflight) forget(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ours, tok)
}

// claim takes the client's response with id when it answers a request of the adapter's own,
// reporting whether it did; a late answer to one no longer waited for is claimed and dropped.
func (f *inflight) claim(id json.RawMessage, line []byte) bool {
	if !bytes.HasPrefix(id, []byte(ownPrefix)) {
		return false
	}
	f.mu.Lock()
	ch, ok := f.ours[string(id)]
	delete(f.ours, string(id))
	f.mu.Unlock()
	if ok {
		ch <- append([]byte(nil), line...)
	}
	return true
}

// responsePrefix is how the SDK begins a response to a surrogate id (its message struct puts
// jsonrpc first and id second; its own requests to the client use numeric ids).
const responsePrefix = `{"jsonrpc":"2.0","id":"h#`

// restore swaps a surrogate id in an outgoing response back to the client's id, and frees the
// request's slot. Anything else passes unchanged.
func (f *inflight) restore(frame []byte) []byte {
	if !bytes.HasPrefix(frame, []byte(responsePrefix)) {
		return frame
	}
	start := len(`{"jsonrpc":"2.0","id":`)
	end := bytes.IndexByte(frame[len(responsePrefix):], '"')
	if end < 0 {
		return frame
	}
	end += len(responsePrefix) + 1
	tok := string(frame[start:end])
	f.mu.Lock()
	id, ok := f.byToken[tok]
	if ok {
		delete(f.byToken, tok)
		if f.byClient[string(id)] == tok {
			delete(f.byClient, string(id))
		}
		if len(f.byToken) == 0 && f.idle != nil {
			close(f.idle)
			f.idle = nil
		}
	}
	f.mu.Unlock()
	if !ok {
		return frame
	}
	out := make([]byte, 0, len(frame)-len(tok)+len(id))
	out = append(out, frame[:start]...)
	out = append(out, id...)
	return append(out, frame[end:]...)
}

// guard copies well-formed lines from in to out and answers the rest itself. The SDK skips
// unparseable lines silently, drops a request whose method is not a string without an answer,
// and closes the connection on a line longer than its scanner buffer; a client deserves an
// error for each, and the agent must survive them. Requests beyond the in-flight cap are
// refused here with the overload error; since refusals are written before the next line is
// read, a client that does not read its answers stops being read.
func guard(in io.Reader, out io.Writer, reply io.Writer, maxLine int, ids *inflight, log *slog.Logger) error {
	r := bufio.NewReaderSize(in, 64*1024)
	for {
		line, over, err := jsonrpc.ReadLine(r, maxLine) // maxLine counts the newline
		line = bytes.TrimRight(line, "\r")
		if len(line) > 0 || over {
			switch {
			case over:
				if id, ok := oversized(line); ok {
					writeError(reply, id, codeInvalidRequest, "message too large", nil)
				} else {
					log.Warn("acp: dropped a message nobody waits an answer to", "reason", "message too large")
				}
			case len(bytes.TrimSpace(line)) == 0:
			case !json.Valid(line):
				writeError(reply, nil, codeParseError, "parse error", nil)
			default:
				fixed, rej := normalize(line, ids)
				if fixed == nil && rej == nil {
					break // an answer to a request of the adapter's own, delivered
				}
				if rej != nil {
					if rej.id != nil || rej.answer {
						writeError(reply, rej.id, rej.code, rej.msg, rej.data)
					} else {
						log.Warn("acp: dropped a message nobody waits an answer to", "reason", rej.msg)
					}
					break
				}
				if _, werr := out.Write(append(fixed, '\n')); werr != nil {
					return werr
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// rejection is the guard's answer to a line it does not pass on.
type rejection struct {
	id     json.RawMessage // the request's id as written; nil answers with null
	answer bool            // answer even without an id (an invalid request)
	code   int
	msg    string
	data   any
}

// normalize checks one JSON line and rebuilds it for the SDK: a JSON-RPC 2.0 object with a
// string method (a request or notification) or an id with a result or error (the client's
// answer to one of ours; nil and no rejection when it answered one the adapter sent itself).
// A request is a message with an id member, null included (JSON-RPC 2.0 and ACP allow a null
// id, and its answer carries null); only a message without one is a notification, which is
// never answered. A request goes on under a surrogate id (inflight) with only the members the
// SDK reads, so the SDK can neither drop it nor answer it under a changed id. A sessionId in
// params is checked by the identifier rule of every edge. Omitted or null params are {} for a
// method whose params are all optional, and a -32602 naming the required ones otherwise. It
// also supplies the mcpServers list some clients omit from session/new and session/load: v1
// requires it, but refusing the session over an empty list helps nobody.
func normalize(line []byte, inf *inflight) ([]byte, *rejection) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, &rejection{answer: true, code: codeInvalidRequest, msg: "a message must be a JSON object"}
	}
	rawID, hasID := m["id"]
	method, hasMethod := m["method"]
	if hasMethod && string(method) == "null" {
		hasMethod = false
	}
	if !hasMethod {
		_, res := m["result"]
		_, errm := m["error"]
		switch {
		case hasID && string(rawID) == "null" && (res || errm):
			// An answer the client could not match to a request: nothing waits for it, and
			// an answer is never answered.
			return nil, &rejection{code: codeInvalidRequest, msg: "a response with a null id"}
		case hasID && (res || errm):
			if inf.claim(rawID, line) {
				return nil, nil
			}
			return line, nil // the client's response to a request of the SDK's
		case hasID:
			return nil, &rejection{id: jsonrpc.EchoID(rawID), answer: true, code: codeInvalidRequest, msg: "invalid request: method must be a non-empty string"}
		}
		return nil, &rejection{answer: true, code: codeInvalidRequest, msg: "a message needs a method or an id"}
	}
	var id json.RawMessage // nil for a notification; null for a request with a null id
	if hasID {
		if string(rawID) != "null" {
			if err := ids.CheckRPC(rawID); err != nil {
				return nil, &rejection{id: jsonrpc.EchoID(rawID), answer: true, code: codeInvalidRequest, msg: "invalid request: " + err.Error()}
			}
		}
		id = rawID
	}
	// A request or notification must say "jsonrpc":"2.0". (A response without it is taken
	// above: an answer is never answered, and dropping it would leave the agent's request
	// waiting.)
	var version string
	if json.Unmarshal(m["jsonrpc"], &version) != nil || version != "2.0" {
		return nil, &rejection{id: id, code: codeInvalidRequest, msg: `invalid request: jsonrpc must be "2.0"`}
	}
	var name string
	if json.Unmarshal(method, &name) != nil || name == "" {
		return nil, &rejection{id: id, answer: true, code: codeInvalidRequest, msg: "invalid request: method must be a non-empty string"}
	}
	params := m["params"]
	if len(params) == 0 || string(params) == "null" {
		if req := requiredParams[name]; req != nil {
			return nil, &rejection{id: id, code: codeInvalidParams, msg: "invalid params: " + name + " requires params: " + strings.Join(req, ", "), data: map[string]any{"required": req}}
		}
		params = json.RawMessage("{}")
	}
	if sid, bad := badSessionID(params); bad != nil {
		return nil, &rejection{id: id, code: codeInvalidParams, msg: "invalid params: sessionId: " + bad.Error(), data: map[string]any{"param": "sessionId", "length": len(sid)}}
	}
	if name == "$/cancel_request" {
		params = cancelTarget(params, inf)
	}
	if name == "session/new" || name == "session/load" {
		params = withMCPServers(params)
	}
	out := map[string]json.RawMessage{"jsonrpc": json.RawMessage(`"2.0"`), "method": method, "params": params}
	if id != nil {
		tok := inf.admit(id)
		if tok == "" {
			e := jsonrpc.OverloadError(inf.max)
			return nil, &rejection{id: id, code: e.Code, msg: e.Message, data: e.Data}
		}
		out["id"] = json.RawMessage(tok)
	}
	b, err := marshalPlain(out)
	if err != nil {
		return nil, &rejection{id: id, answer: true, code: codeInvalidRequest, msg: "invalid request"}
	}
	return b, nil
}

// requiredParams names, for each method the agent serves whose params have required members,
// the members the agent needs (the schema's required list, less mcpServers, which normalize
// supplies). Every other method's params are all optional (session/list) or are the
// handler's to judge (extension methods), and omitted params are {} for them.
var requiredParams = map[string][]string{
	"initialize":                {"protocolVersion"},
	"authenticate":              {"methodId"},
	"session/new":               {"cwd"},
	"session/load":              {"sessionId", "cwd"},
	"session/resume":            {"sessionId", "cwd"},
	"session/fork":              {"sessionId", "cwd"},
	"session/close":             {"sessionId"},
	"session/cancel":            {"sessionId"},
	"session/prompt":            {"sessionId", "prompt"},
	"session/set_mode":          {"sessionId", "modeId"},
	"session/set_config_option": {"sessionId", "configId", "value"},
	"session/set_model":         {"sessionId", "modelId"},
	"$/cancel_request":          {"requestId"},
}

// marshalPlain encodes without HTML escaping: what the client wrote reaches the SDK
// unchanged, and no longer than it came.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// badSessionID checks params.sessionId when it is a string.
func badSessionID(params json.RawMessage) (string, error) {
	if len(params) == 0 || params[0] != '{' {
		return "", nil
	}
	var p struct {
		SessionID json.RawMessage `json:"sessionId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.SessionID) == 0 || p.SessionID[0] != '"' {
		return "", nil // a wrong type is the SDK's invalid params
	}
	if !utf8.Valid(p.SessionID) {
		return "", &ids.Error{Reason: "not valid UTF-8"}
	}
	var sid string
	if json.Unmarshal(p.SessionID, &sid) != nil {
		return "", nil
	}
	return sid, ids.Check(sid)
}

// cancelTarget points a $/cancel_request at the surrogate its request runs under.
func cancelTarget(params json.RawMessage, inf *inflight) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params
	}
	tok, ok := inf.surrogate(p["requestId"])
	if !ok {
		return params
	}
	p["requestId"] = json.RawMessage(tok)
	b, err := marshalPlain(p)
	if err != nil {
		return params
	}
	return b
}

// withMCPServers supplies an empty mcpServers list to session/new and session/load params
// that lack one.
func withMCPServers(raw json.RawMessage) json.RawMessage {
	var params map[string]json.RawMessage
	if json.Unmarshal(raw, &params) != nil || params == nil {
		return raw // the SDK reports bad params
	}
	if v, ok := params["mcpServers"]; ok && string(v) != "null" {
		return raw
	}
	params["mcpServers"] = json.RawMessage("[]")
	b, err := marshalPlain(params)
	if err != nil {
		return raw
	}
	return b
}

// oversized decides the answer to a line over the frame limit from the start of it ReadLine
// kept. Only the top-level members count, read with a small tokenizer: an "id" inside params
// is not the message's. The message's id is echoed when the prefix holds it whole, as
// normalize would echo it; a message with an id that cannot be told is answered with null
// (JSON-RPC's rule for an undeterminable id). A message with a method and no id before the
// prefix ends is taken for a notification (clients write a request's id before its params)
// and not answered, nor is an answer from the client (a result or an error); anything else is
// answered with null.
func oversized(prefix []byte) (id json.RawMessage, answer bool) {
	var (
		rawID                     json.RawMessage // nil: not whole in the prefix
		hasID, hasMethod, isReply bool
	)
	i := skipSpace(prefix, 0)
	if i >= len(prefix) || prefix[i] != '{' {
		return nil, true // not an object, so not a notification; no id to tell
	}
	i++
	for first := true; ; first = false {
		i = skipSpace(prefix, i)
		if i < len(prefix) && prefix[i] == '}' {
			break
		}
		if !first {
			if i >= len(prefix) || prefix[i] != ',' {
				break
			}
			i = skipSpace(prefix, i+1)
		}
		end := stringEnd(prefix, i)
		var key string
		if end < 0 || json.Unmarshal(prefix[i:end], &key) != nil {
			break
		}
		i = skipSpace(prefix, end)
		if i >= len(prefix) || prefix[i] != ':' {
			break
		}
		i = skipSpace(prefix, i+1)
		end = valueEnd(prefix, i)
		switch key {
		case "id":
			hasID, rawID = true, nil
			if end > 0 {
				rawID = prefix[i:end]
			}
		case "method":
			hasMethod = end < 0 || string(prefix[i:end]) != "null"
		case "result", "error":
			isReply = true
		}
		if end < 0 {
			break
		}
		i = end
	}
	switch {
	case isReply && !hasMethod:
		return nil, false // an answer is never answered
	case hasID:
		if rawID != nil && json.Valid(rawID) {
			return jsonrpc.EchoID(rawID), true
		}
		return nil, true
	case hasMethod:
		return nil, false
	}
	return nil, true // a whole object without id or method is invalid, a prefix of one unknown
}

// skipSpace skips JSON whitespace from b[i].
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the end of the JSON string starting at b[i], or -1 when there is none or
// it does not end within b.
func stringEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the end of the JSON value starting at b[i], or -1 when it does not end
// within b. A number or literal ends only at a delimiter: one running to the end of b may go
// on past it.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end := stringEnd(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
	}
	return -1
}

// writeError answers with an error, the id exactly as the client wrote it.
func writeError(w io.Writer, id json.RawMessage, code int, msg string, data any) {
	_, _ = w.Write(append(jsonrpc.ErrorFrame(id, &jsonrpc.Error{Code: code, Message: msg, Data: data}), '\n'))
}
