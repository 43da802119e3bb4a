package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/ids"
)

// Standard error codes a handler may answer with.
const (
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
)

// Standard error codes the connection answers with itself.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInternalError  = -32603
)

// Error is a JSON-RPC error object. Handlers return it (or wrap it) to choose the wire code.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Request is an incoming call or notification (ID nil).
type Request struct {
	ID     json.RawMessage // nil for notifications
	Method string
	Params json.RawMessage // never nil: omitted or null params become {}
}

// IsNotification reports whether no response is expected.
func (r *Request) IsNotification() bool { return r.ID == nil }

// wireMsg is any JSON-RPC message as decoded. Every member stays raw so that a member of the
// wrong type is reported against the message's id rather than losing it (a request whose
// method is a number is still a request with an id, and gets its answer).
type wireMsg struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// kind of a decoded message.
type kind int

const (
	kindRequest kind = iota
	kindResponse
)

// decoded is one message after validation.
type decoded struct {
	kind   kind
	req    Request
	id     json.RawMessage // responses
	result json.RawMessage
	err    *Error
}

var nullID = json.RawMessage("null")

// decode validates one frame. On failure it returns the error to send and the id to send it
// with: the request's own id, byte for byte, whenever the frame has one that is a string or a
// number of valid UTF-8; null otherwise (an id that is not valid UTF-8 cannot be echoed: the
// response would not be JSON).
func decode(frame []byte) (decoded, *Error, json.RawMessage) {
	frame = bytes.TrimSpace(frame)
	if len(frame) == 0 || frame[0] != '{' {
		if !json.Valid(frame) {
			return decoded{}, &Error{Code: codeParseError, Message: "parse error"}, nullID
		}
		return decoded{}, &Error{Code: codeInvalidRequest, Message: "invalid request: expected an object"}, nullID
	}
	var m wireMsg
	dec := json.NewDecoder(bytes.NewReader(frame))
	if err := dec.Decode(&m); err != nil || dec.More() {
		return decoded{}, &Error{Code: codeParseError, Message: "parse error"}, nullID
	}
	hasMethod := !isNull(m.Method)
	if !hasMethod && m.ID != nil && (m.Result != nil || m.Error != nil) {
		// A response to one of our requests. It is never answered, whatever it holds.
		d := decoded{kind: kindResponse, id: m.ID, result: m.Result}
		if m.Error != nil && !isNull(m.Error) {
			var e Error
			if json.Unmarshal(m.Error, &e) != nil {
				e = Error{Code: codeInternalError, Message: "malformed error object in response"}
			}
			d.err = &e
		}
		return d, nil, nil
	}
	id := nullID
	if m.ID != nil && !isNull(m.ID) {
		if err := ids.CheckRPC(m.ID); err != nil {
			if echo := EchoID(m.ID); echo != nil {
				id = echo
			}
			return decoded{}, &Error{Code: codeInvalidRequest, Message: "invalid request: " + err.Error()}, id
		}
		id = m.ID
	}
	var version string
	if json.Unmarshal(m.JSONRPC, &version) != nil || version != "2.0" {
		return decoded{}, &Error{Code: codeInvalidRequest, Message: `invalid request: jsonrpc must be "2.0"`}, id
	}
	var name string
	if !hasMethod || json.Unmarshal(m.Method, &name) != nil || name == "" {
		return decoded{}, &Error{Code: codeInvalidRequest, Message: "invalid request: method must be a non-empty string"}, id
	}
	params := m.Params
	if isNull(params) {
		params = json.RawMessage("{}")
	} else if params[0] != '{' {
		return decoded{}, &Error{Code: CodeInvalidParams, Message: "invalid params: expected an object"}, id
	}
	return decoded{kind: kindRequest, req: Request{ID: m.ID, Method: name, Params: params}}, nil, nil
}

// EchoID returns the id an answer to a message with id may carry: id itself, byte for byte,
// when it is a string or a number of valid UTF-8, even one refused (the peer matches the
// refusal by it); nil otherwise, for an answer with null. An id that is not valid UTF-8 would
// make the answer invalid JSON (RFC 8259 §8.1); json.Valid does not check UTF-8.
func EchoID(id json.RawMessage) json.RawMessage {
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9')) && utf8.Valid(id) {
		return id
	}
	return nil
}

// isNull reports a member that is absent or null.
func isNull(raw json.RawMessage) bool { return raw == nil || string(raw) == "null" }

type outRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}
