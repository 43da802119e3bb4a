package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

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
