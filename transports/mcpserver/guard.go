package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// maxFrame bounds one message on stdio, as the gateway's framing does: a longer line is refused
// and skipped, not read into memory whole.
const maxFrame = 16 << 20

// JSON-RPC error codes the guard answers with.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
)

// frameWriter passes whole frames to the output one at a time: mcp-go writes each message with
// one Write, and the guard writes its answers to the same stream.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Write(p)
}

// guard reads the client's messages from in and passes on to mcp-go (next) only what is a
// JSON-RPC 2.0 message MCP allows; anything else it answers itself on out, in the protocol's
// form: invalid UTF-8 or JSON is -32700; a value that is not an object (a batch included: MCP
// has none since 2025-06-18), a jsonrpc other than "2.0", an id that is not a string or an
// integer, or a message that is neither a request nor a response is -32600; params that are
// not an object (nor null) are -32602. An answer echoes the id when it is a valid one, else null; a
// notification (no id) is never answered. It returns when in ends (nil at EOF) or next is
// closed.
func guard(in io.Reader, next io.Writer, out io.Writer, max int) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, over, err := jsonrpc.ReadLine(r, max+1) // +1: the newline
		line = bytes.TrimSpace(line)
		if len(line) > 0 || over {
			var fwd []byte
			if over {
				answer(out, nil, codeInvalidRequest, "Invalid Request: message too large")
			} else if fwd = check(line, out); fwd != nil {
				if _, werr := next.Write(append(fwd, '\n')); werr != nil {
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

// check returns the line to pass on, or nil after answering it (or dropping it) itself.
func check(line []byte, out io.Writer) []byte {
	if !utf8.Valid(line) || !json.Valid(line) {
		answer(out, nil, codeParse, "Parse error")
		return nil
	}
	if line[0] != '{' {
		msg := "Invalid Request: a message is a JSON object"
		if line[0] == '[' {
			msg = "Invalid Request: batches are not supported (MCP has none since 2025-06-18)"
		}
		answer(out, nil, codeInvalidRequest, msg)
		return nil
	}
	var m map[string]json.RawMessage // a member present with null is there (an id: null)
	if json.Unmarshal(line, &m) != nil {
		answer(out, nil, codeInvalidRequest, "Invalid Request")
		return nil
	}
	rawID, hasID := m["id"]
	method, request := m["method"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	params, hasParams := m["params"]
	var version string
	_ = json.Unmarshal(m["jsonrpc"], &version)
	var id json.RawMessage // a valid id to echo; nil: none, or not a valid one
	if hasID && validID(rawID) {
		id = rawID
	}
	response := !request && (hasResult || hasError)
	reply := func(code int, msg string) []byte {
		// A notification (a method, no id) and a response are never answered.
		if request && hasID || !request && !response {
			answer(out, id, code, msg) // id is nil (null) when the one given is not valid
		}
		return nil
	}
	switch {
	case version != "2.0":
		return reply(codeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`)
	case hasID && id == nil:
		return reply(codeInvalidRequest, "Invalid Request: an id is a string or an integer")
	case !request && !response:
		return reply(codeInvalidRequest, "Invalid Request: neither a request (method) nor a response (result or error)")
	case request && !isString(method):
		return reply(codeInvalidRequest, "Invalid Request: method must be a string")
	case request && hasParams && !isObject(params) && string(bytes.TrimSpace(params)) != "null":
		return reply(codeInvalidParams, "Invalid params: params must be an object")
	}
	return line
}

// validID is an id MCP allows: a string or an integer (never null, a fraction, a boolean, an
// object or an array).
func validID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return !bytes.ContainsAny(raw, ".eE")
	}
	return false
}

func isString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// answer writes one JSON-RPC error response (id null when id is nil). Its id is written as
// encoding/json writes it, with '<', '>', '&', U+2028 and U+2029 escaped.
func answer(out io.Writer, id json.RawMessage, code int, msg string) {
	if id != nil {
		id, _ = json.Marshal(id)
	}
	_, _ = out.Write(append(jsonrpc.ErrorFrame(id, &jsonrpc.Error{Code: code, Message: msg}), '\n'))
}
