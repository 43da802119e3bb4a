package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Standard error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Error is a JSON-RPC error object. Handlers return it (or wrap it) to choose the wire code.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(code int, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// Request is an incoming call or notification (ID nil).
type Request struct {
	ID     json.RawMessage // nil for notifications
	Method string
	Params json.RawMessage // never nil: omitted or null params become {}
}

// IsNotification reports whether no response is expected.
func (r *Request) IsNotification() bool { return r.ID == nil }

// wireMsg is any JSON-RPC message as decoded.
type wireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  *string         `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
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
// with (null when the id could not be read).
func decode(frame []byte) (decoded, *Error, json.RawMessage) {
	frame = bytes.TrimSpace(frame)
	if len(frame) == 0 || frame[0] != '{' {
		if !json.Valid(frame) {
			return decoded{}, &Error{Code: CodeParseError, Message: "parse error"}, nullID
		}
		return decoded{}, &Error{Code: CodeInvalidRequest, Message: "invalid request: expected an object"}, nullID
	}
	var m wireMsg
	dec := json.NewDecoder(bytes.NewReader(frame))
	if err := dec.Decode(&m); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return decoded{}, &Error{Code: CodeInvalidRequest, Message: "invalid request: field " + ute.Field + " has the wrong type"}, nullID
		}
		return decoded{}, &Error{Code: CodeParseError, Message: "parse error"}, nullID
	}
	if dec.More() {
		return decoded{}, &Error{Code: CodeParseError, Message: "parse error"}, nullID
	}
	id := m.ID
	if id != nil && !validID(id) {
		return decoded{}, &Error{Code: CodeInvalidRequest, Message: "invalid request: id must be a string, a number or null"}, nullID
	}
	if id == nil {
		id = nullID
	}
	if m.JSONRPC != "2.0" {
		return decoded{}, &Error{Code: CodeInvalidRequest, Message: `invalid request: jsonrpc must be "2.0"`}, id
	}
	if m.Method == nil {
		if m.ID == nil || (m.Result == nil && m.Error == nil) {
			return decoded{}, &Error{Code: CodeInvalidRequest, Message: "invalid request: method must be a non-empty string"}, id
		}
		return decoded{kind: kindResponse, id: m.ID, result: m.Result, err: m.Error}, nil, nil
	}
	if *m.Method == "" {
		return decoded{}, &Error{Code: CodeInvalidRequest, Message: "invalid request: method must be a non-empty string"}, id
	}
	params := m.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	} else if params[0] != '{' {
		return decoded{}, &Error{Code: CodeInvalidParams, Message: "invalid params: expected an object"}, id
	}
	return decoded{kind: kindRequest, req: Request{ID: m.ID, Method: *m.Method, Params: params}}, nil, nil
}

func validID(id json.RawMessage) bool {
	switch id[0] {
	case '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case 'n':
		return string(id) == "null"
	default:
		var f json.Number
		return json.Unmarshal(id, &f) == nil
	}
}

type outResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

type outRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}
