package stdlib

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Equal compares two script values deeply; numbers compare by value whatever their Go type.
func Equal(a, b any) bool {
	if r, ok := a.(Record); ok {
		a = RecordMap(r)
	}
	if r, ok := b.(Record); ok {
		b = RecordMap(r)
	}
	if fa, ok := ToFloat(a); ok {
		fb, ok := ToFloat(b)
		return ok && (fa == fb || math.IsNaN(fa) && math.IsNaN(fb))
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok {
			if m, isMap := b.(map[string]any); isMap && len(m) == 0 && len(x) == 0 {
				return true // an empty Lua table is both an empty list and an empty map
			}
			return false
		}
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			if l, isList := b.([]any); isList && len(l) == 0 && len(x) == 0 {
				return true
			}
			return false
		}
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// Format renders a value for messages: JSON where possible, with stable key order.
func Format(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return strconv.Quote(x)
	case Func, Callable:
		return "<function>"
	case Iterator:
		return "<iterator>"
	case Object:
		return "<object>"
	case map[string]any:
		if hasFuncs(x) {
			return summary(x)
		}
	}
	b, err := Marshal(v, "")
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// Marshal encodes a script value as JSON (sorted keys; indent "" for one line). Functions and
// iterators cannot be encoded.
func Marshal(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(jsonable(v, 0)); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// jsonable replaces values encoding/json cannot take with an error marker it can report.
func jsonable(v any, depth int) any {
	if depth > 100 {
		return unencodable("nesting deeper than 100")
	}
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonable(e, depth+1)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonable(e, depth+1)
		}
		return out
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return unencodable("NaN or Infinity")
		}
	case Func, Callable, Iterator, Object:
		return unencodable(TypeName(v))
	case Record:
		return jsonable(RecordMap(x), depth)
	}
	return v
}

type unencodable string

func (u unencodable) MarshalJSON() ([]byte, error) {
	return nil, fmt.Errorf("%w: cannot encode %s as JSON", ErrArgument, string(u))
}

// Unmarshal decodes JSON into script values (numbers normalised like script numbers).
func Unmarshal(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid JSON: data after the value")
	}
	return normalizeJSON(v), nil
}

func normalizeJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = normalizeJSON(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normalizeJSON(x[k])
		}
	}
	return v
}

func hasFuncs(m map[string]any) bool {
	for _, v := range m {
		switch v.(type) {
		case Func, Callable:
			return true
		}
	}
	return false
}

// summary renders an object with methods readably: a session as Session{id, status, model}, a
// turn as Turn{id, status}, anything else with its methods shown as <function>.
func summary(m map[string]any) string {
	_, prompt := m["prompt"].(Callable)
	_, wait := m["wait"].(Callable)
	id, _ := m["id"].(string)
	switch {
	case prompt && id != "":
		status, model := "", ""
		if info, ok := m["info"].(Callable); ok {
			if x, err := info(context.Background()); err == nil {
				if im, ok := x.(map[string]any); ok {
					status, _ = im["status"].(string)
					model, _ = im["model"].(string)
				}
			}
		}
		return fmt.Sprintf("Session{id: %q, status: %q, model: %q}", id, status, model)
	case wait && m["status"] != nil:
		return fmt.Sprintf("Turn{id: %q, status: %s}", id, Format(m["status"]))
	}
	plain := make(map[string]any, len(m))
	for k, v := range m {
		switch v.(type) {
		case Func, Callable:
			plain[k] = "<function>"
		default:
			plain[k] = v
		}
	}
	b, err := Marshal(plain, "")
	if err != nil {
		return "<object>"
	}
	return string(b)
}
