package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/ids"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// common params every method accepts.
type common struct {
	Profile string `json:"profile,omitempty"`
}

// decode reads params strictly: an unknown key is 4000 (the client and the backend are out
// of sync), a wrong type is -32602.
func decode[T any](method string, raw json.RawMessage) (T, error) {
	var v T
	if err := checkIDParams(method, raw); err != nil {
		return v, err
	}
	raw = withoutMeta(raw)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return v, rpcErr(codeUnknownParam, "invalid params for %s: %s: extra fields not permitted — the client and the Hermes backend are out of sync", method, strings.Trim(f, `"`))
		}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return v, rpcErr(jsonrpc.CodeInvalidParams, "invalid params for %s: %s must be %s", method, ute.Field, jsonType(ute.Type.Kind().String()))
		}
		return v, rpcErr(jsonrpc.CodeInvalidParams, "invalid params for %s: %v", method, err)
	}
	return v, nil
}

// checkIDParams applies the identifier rule of every edge (ids.Check) to each top-level
// param named *_id, before anything is looked up or stored. It reads the raw bytes: decoding
// would quietly turn invalid UTF-8 into U+FFFD, a different id. session.resume also takes an
// exact title in session_id, so there only UTF-8, length and control characters are checked.
func checkIDParams(method string, raw json.RawMessage) error {
	if !bytes.Contains(bytes.ToLower(raw), []byte(`_id"`)) {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil // decode reports it
	}
	for k, v := range m {
		// Lower-cased: decoding matches struct fields case-insensitively, so "SESSION_ID"
		// would reach the method as session_id.
		if !strings.HasSuffix(strings.ToLower(k), "_id") || len(v) == 0 || v[0] != '"' {
			continue
		}
		bad := func(reason string) error {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params for " + method + ": " + k + ": " + reason,
				Data: map[string]any{"param": k}}
		}
		if !utf8.Valid(v) {
			return bad("not valid UTF-8")
		}
		var id string
		if json.Unmarshal(v, &id) != nil || id == "" {
			continue // a missing id is the method's own error
		}
		if method == "session.resume" && strings.EqualFold(k, "session_id") {
			if len(id) > maxTitleOrID || strings.IndexFunc(id, unicode.IsControl) >= 0 {
				return bad("not a session id or title")
			}
			continue
		}
		if err := ids.Check(id); err != nil {
			var ie *ids.Error
			if errors.As(err, &ie) {
				return bad(ie.Reason)
			}
			return bad(err.Error())
		}
	}
	return nil
}

// maxTitleOrID bounds session.resume's session_id, which may be a title (titles are up to
// 4096 bytes in the store).
const maxTitleOrID = 4096

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "uint64", "float64", "int32":
		return "a number"
	case "slice":
		return "a list"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "of another type"
}

// intParam is an integer that refuses booleans, strings and fractions with 4004, as the
// rewind fields require.
type intParam struct {
	set bool
	v   int64
	bad string
}

func (p *intParam) UnmarshalJSON(b []byte) error {
	p.set = true
	if string(b) == "null" {
		p.set = false
		return nil
	}
	var n json.Number
	// json.Number also takes a string holding a number ("3"); the wire wants the number.
	if len(b) > 0 && b[0] == '"' {
		p.bad = string(b)
		return nil
	}
	if err := json.Unmarshal(b, &n); err != nil {
		p.bad = string(b)
		return nil
	}
	v, err := n.Int64()
	if err != nil {
		p.bad = string(b)
		return nil
	}
	p.v = v
	return nil
}
