package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// ErrInvalidArgs marks a call whose arguments do not fit the tool's schema: malformed JSON, a
// missing required field, an unknown field, a value of the wrong type or out of range.
var ErrInvalidArgs = errors.New("invalid arguments")

// schema is the subset of JSON Schema the built-in tools use. It is both what the model is
// shown (Spec) and what arguments are checked against (decodeArgs), so the two cannot drift.
type schema struct {
	Type        string             `json:"type"`
	Description string             `json:"description,omitempty"`
	Enum        []string           `json:"enum,omitempty"`
	Default     any                `json:"default,omitempty"`
	Minimum     *int64             `json:"minimum,omitempty"`
	Maximum     *int64             `json:"maximum,omitempty"`
	Properties  map[string]*schema `json:"properties,omitempty"`
	Required    []string           `json:"required,omitempty"`
	Items       *schema            `json:"items,omitempty"` // arrays: shown to the model; the tool checks elements itself
	// AdditionalProperties is false on every tool object: unknown fields are rejected so a
	// model that guesses a parameter learns at once that it had no effect.
	AdditionalProperties *bool `json:"additionalProperties,omitempty"`
}

func object(required []string, props map[string]*schema) *schema {
	no := false
	return &schema{Type: "object", Properties: props, Required: required, AdditionalProperties: &no}
}

func intRange(lo, hi int64) (*int64, *int64) { return &lo, &hi }

// toolSpec renders a tool's spec. Marshalling a schema cannot fail: it holds only strings,
// numbers, booleans and maps of those.
func toolSpec(name, description string, params *schema) model.ToolSpec {
	b, err := json.Marshal(params)
	if err != nil {
		panic(fmt.Sprintf("builtin: schema of %s: %v", name, err))
	}
	return model.ToolSpec{Name: name, Description: description, Parameters: b}
}

// decodeArgs checks raw against s and decodes it into dst (a pointer to a struct whose json
// tags name the schema properties). Every problem found is reported, so the model can fix
// all of them in one retry. A JSON null counts as an absent field. The returned error wraps
// ErrInvalidArgs and reads like
//
//	invalid arguments for read_file: field "path" must be a string
func decodeArgs(toolName string, s *schema, raw json.RawMessage, dst any) error {
	fail := func(msgs ...string) error {
		return fmt.Errorf("%w for %s: %s", ErrInvalidArgs, toolName, strings.Join(msgs, "; "))
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fail(fmt.Sprintf("malformed JSON (%v)", err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail("malformed JSON (unexpected data after the arguments object)")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fail("arguments must be a JSON object, got " + jsonKind(v))
	}

	var problems []string
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		prop, known := s.Properties[k]
		if !known {
			problems = append(problems, fmt.Sprintf("unknown field %q (accepted fields: %s)", k, acceptedFields(s)))
			delete(obj, k)
			continue
		}
		if obj[k] == nil {
			delete(obj, k)
			continue
		}
		if msg := checkValue(prop, obj[k]); msg != "" {
			problems = append(problems, fmt.Sprintf("field %q %s", k, msg))
		}
	}
	for _, r := range s.Required {
		if _, ok := obj[r]; !ok {
			problems = append(problems, fmt.Sprintf("missing required field %q", r))
		}
	}
	if len(problems) > 0 {
		return fail(problems...)
	}
	// The values now have the declared JSON types, so decoding into the struct cannot fail on
	// a type; round-tripping through the checked map keeps that guarantee in one place.
	clean, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(clean, dst)
	}
	if err != nil {
		return fail(err.Error())
	}
	return nil
}

func acceptedFields(s *schema) string {
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// checkValue returns "" when v fits prop, else the tail of a sentence starting with the
// field name ("must be a string").
func checkValue(prop *schema, v any) string {
	switch prop.Type {
	case "string":
		str, ok := v.(string)
		if !ok {
			return "must be a string, got " + jsonKind(v)
		}
		if len(prop.Enum) > 0 && !slices.Contains(prop.Enum, str) {
			return fmt.Sprintf("must be one of %s, got %q", quoteList(prop.Enum), str)
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return "must be an integer, got " + jsonKind(v)
		}
		i, err := n.Int64()
		if err != nil {
			return fmt.Sprintf("must be an integer, got %s", n)
		}
		if prop.Minimum != nil && i < *prop.Minimum {
			return fmt.Sprintf("must be at least %d, got %d", *prop.Minimum, i)
		}
		if prop.Maximum != nil && i > *prop.Maximum {
			return fmt.Sprintf("must be at most %d, got %d", *prop.Maximum, i)
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			return "must be a number, got " + jsonKind(v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return "must be a boolean (true or false), got " + jsonKind(v)
		}
	case "array":
		if _, ok := v.([]any); !ok {
			return "must be an array, got " + jsonKind(v)
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return "must be an object, got " + jsonKind(v)
		}
	}
	return ""
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// argsResult turns a decodeArgs error into the model-visible result.
func argsResult(err error) tool.Result { return tool.Errorf("%v", err) }
