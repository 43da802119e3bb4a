package scripting

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hermes-go/hermes/internal/textdist"
	"github.com/hermes-go/hermes/stdlib"
)

// ErrInput marks a hook input written by hand (an example's input, hermes policy eval
// --input) with a field the hook does not have or a value of the wrong type: left as it was,
// the field would be ignored and the hook would see its default ("comand" leaves the command
// empty).
var ErrInput = errors.New("invalid input")

// Kinds of input fields.
const (
	inString  = "a string"
	inNumber  = "a number"
	inStrings = "a list of strings"
	inObject  = "an object"
	inArgs    = "an object or a JSON string"
)

// inputFields are the fields an input may give each hook, and their kinds (what Eval reads).
var inputFields = map[string]map[string]string{
	HookApproval: {"session_id": inString, "surface": inString, "tool": inString, "command": inString, "args": inArgs,
		"cwd": inString, "pattern": inString, "patterns": inStrings, "approved": inStrings, "mode": inString},
	HookBusyInput: {"session_id": inString, "surface": inString, "text": inString, "origin": inString, "status": inString,
		"queued": inString, "iteration": inNumber},
	HookSteer: {"session_id": inString, "text": inString, "iteration": inNumber, "tool": inString},
	HookRoute: {"surface": inString, "headers": inObject, "client": inString, "session_id": inString, "model": inString,
		"cwd": inString},
	HookCompact: {"session_id": inString, "model": inString, "context_used": inNumber, "context_max": inNumber,
		"percent": inNumber, "threshold": inNumber, "reason": inString},
}

// CheckInput checks an input written for hook: an object whose fields are the hook's, each of
// its kind (null counts as left out). The error names the first bad field, with the field
// meant when the name is a likely typo of one.
func CheckInput(hook string, in any) error {
	known, ok := inputFields[hook]
	if !ok {
		return fmt.Errorf("%w: unknown hook %q (want %s)", ErrInput, hook, strings.Join(Hooks, ", "))
	}
	m, ok := in.(map[string]any)
	if l, isList := in.([]any); isList && len(l) == 0 { // an empty Lua table
		m, ok = map[string]any{}, true
	}
	if !ok {
		return fmt.Errorf("%w: the %s input must be an object, not %s", ErrInput, hook, typeName(in))
	}
	names := stdlib.Keys(known)
	for _, k := range stdlib.Keys(m) {
		kind, ok := known[k]
		if !ok {
			msg := fmt.Sprintf("unknown field %q in the %s input", k, hook)
			if near := nearestField(k, names); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			return fmt.Errorf("%w: %s; its fields are %s", ErrInput, msg, strings.Join(names, ", "))
		}
		if v := m[k]; v != nil && !ofKind(v, kind) {
			return fmt.Errorf("%w: %s.%s must be %s, not %s", ErrInput, hook, k, kind, typeName(v))
		}
		if l, ok := m[k].([]any); ok && kind == inStrings {
			for i, e := range l {
				if _, ok := e.(string); !ok {
					return fmt.Errorf("%w: %s.%s[%d] must be a string, not %s", ErrInput, hook, k, i, typeName(e))
				}
			}
		}
	}
	return nil
}

func ofKind(v any, kind string) bool {
	switch kind {
	case inString:
		_, ok := v.(string)
		return ok
	case inNumber:
		_, ok := stdlib.ToFloat(v)
		return ok
	case inObject:
		return isObject(v)
	case inArgs:
		_, ok := v.(string)
		return ok || isObject(v)
	case inStrings: // (the elements are checked by the caller)
		if _, ok := v.([]any); ok {
			return true
		}
		m, ok := v.(map[string]any)
		return ok && len(m) == 0 // an empty Lua table
	}
	return false
}

func isObject(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return true
	case []any:
		return len(x) == 0 // an empty Lua table
	}
	return false
}

// typeName names a value's type as JSON would.
func typeName(v any) string {
	if v == nil {
		return "null"
	}
	if l, ok := v.([]any); ok && len(l) > 0 {
		return "a list"
	}
	switch n := stdlib.TypeName(v); n {
	case "object", "array":
		return "an " + n
	default:
		return "a " + n
	}
}

// nearestField is the name of names closest to k when k is a likely typo of it: within one
// edit, or two for names longer than five letters, ignoring case, "_" and "-".
func nearestField(k string, names []string) string {
	norm := func(s string) string { return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s)) }
	best, bestD := "", 3
	for _, n := range names {
		d := textdist.Levenshtein(norm(k), norm(n))
		if (d <= 1 || d == 2 && len(n) > 5) && d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
