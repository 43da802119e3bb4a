// Package stdlib defines the host modules offered to scripts, once, in a shape that belongs to
// no script language: a Module is a named Object whose members are Go functions (Func) and
// plain values. The JS and Lua bindings in scripting/ adapt the same Module to their VM, so a
// module is written and tested once and behaves the same in both languages.
//
// Values that cross between Go and a script are: nil, bool, numbers (int, int64, float64),
// string, []any, map[string]any, Object, Func, Callable (a script function handed to Go) and
// Iterator. Numbers coming from a script are int64 when they are whole and fit, float64
// otherwise. Modules that reach the operating system (fs, http) are only built when the
// configuration grants them, and receive their reach as capabilities, never ambiently.
package stdlib

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
)

// Func is a host function. It runs on the goroutine that owns the calling VM; ctx ends when the
// script is interrupted (deadline, Ctrl-C), so anything that blocks must honour it.
type Func func(ctx context.Context, args Args) (any, error)

// Object is a host object: members by name (Func, Object, Iterator or plain values).
type Object map[string]any

// FuncObject is a Func with members of its own: a JS function with properties, a callable Lua
// table (test(name, fn) with test.skip and test.only).
type FuncObject struct {
	Call    Func
	Members Object
}

// Module is an Object offered to scripts under a name (require("name")).
type Module struct {
	Name    string
	Members Object
	// Exact names member functions whose arguments keep the kinds a script value has beyond
	// JSON (see exact.go): a binding whose language has Maps, Sets, Dates, undefined, class
	// instances and named functions hands them over as MapValue, SetValue, DateValue,
	// Undefined, InstanceValue and FuncValue instead of flattening them to plain objects.
	Exact []string
}

// Callable is a script function handed to Go (a callback). It may only be called from inside a
// Func, synchronously, because only the VM's own goroutine may run script code.
type Callable func(ctx context.Context, args ...any) (any, error)

// Iterator is a host sequence that a script walks with for…of (JS) or a generic for (Lua).
// Next returns ok=false at the end.
type Iterator interface {
	Next(ctx context.Context) (v any, ok bool, err error)
}

// IteratorFunc adapts a function to Iterator.
type IteratorFunc func(ctx context.Context) (any, bool, error)

// Next calls f.
func (f IteratorFunc) Next(ctx context.Context) (any, bool, error) { return f(ctx) }

// Record is a read-only object whose fields are produced on demand. Hook requests are
// Records: a hook that reads three fields pays for three, not for converting the whole
// request (and decoding tool arguments it never looks at) on every call.
type Record interface {
	Fields() []string
	Field(name string) (any, bool)
}

// RecordMap copies a Record into a map (for JSON, printing, equality).
func RecordMap(r Record) map[string]any {
	names := r.Fields()
	out := make(map[string]any, len(names))
	for _, n := range names {
		if v, ok := r.Field(n); ok {
			out[n] = v
		}
	}
	return out
}

// Sentinel errors shared by the modules and bindings.
var (
	// ErrArgument marks a bad argument to a host function (wrong type, missing).
	ErrArgument = errors.New("bad argument")
	// ErrDenied marks an operation outside the capabilities granted to the script.
	ErrDenied = errors.New("not permitted")
)

// Args are the arguments of one call, converted to Go values.
type Args []any

// Len is the number of arguments.
func (a Args) Len() int { return len(a) }

// Get returns argument i or nil.
func (a Args) Get(i int) any {
	if i < len(a) {
		return a[i]
	}
	return nil
}

func argErr(i int, want string, got any) error {
	return fmt.Errorf("%w #%d: want %s, got %s", ErrArgument, i+1, want, TypeName(got))
}

// String returns argument i as a string.
func (a Args) String(i int) (string, error) {
	if s, ok := a.Get(i).(string); ok {
		return s, nil
	}
	return "", argErr(i, "string", a.Get(i))
}

// OptString returns argument i as a string, or def when it is absent or nil.
func (a Args) OptString(i int, def string) (string, error) {
	if a.Get(i) == nil {
		return def, nil
	}
	return a.String(i)
}

// Float returns argument i as a number.
func (a Args) Float(i int) (float64, error) {
	if f, ok := ToFloat(a.Get(i)); ok {
		return f, nil
	}
	return 0, argErr(i, "number", a.Get(i))
}

// Int returns argument i as a whole number.
func (a Args) Int(i int) (int64, error) {
	f, ok := ToFloat(a.Get(i))
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, argErr(i, "integer", a.Get(i))
	}
	return int64(f), nil
}

// OptInt returns argument i as a whole number, or def when absent or nil.
func (a Args) OptInt(i int, def int64) (int64, error) {
	if a.Get(i) == nil {
		return def, nil
	}
	return a.Int(i)
}

// Map returns argument i as a table/object. A nil argument gives an empty map.
func (a Args) Map(i int) (map[string]any, error) {
	switch v := a.Get(i).(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	case []any:
		if len(v) == 0 { // an empty Lua table is both
			return map[string]any{}, nil
		}
	}
	return nil, argErr(i, "object", a.Get(i))
}

// Callable returns argument i as a script function.
func (a Args) Callable(i int) (Callable, error) {
	if c, ok := a.Get(i).(Callable); ok {
		return c, nil
	}
	return nil, argErr(i, "function", a.Get(i))
}

// ToFloat converts any Go number to float64.
func ToFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint32:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	return 0, false
}

// Number normalises a script number: whole values that fit become int64.
func Number(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) <= 1<<53 && !(f == 0 && math.Signbit(f)) {
		return int64(f)
	}
	return f
}

// TypeName names a value's script-level type for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "boolean"
	case string:
		return "string"
	case int, int64, int32, uint64, uint32, float64, float32:
		return "number"
	case []any:
		return "array"
	case map[string]any, Object, Record:
		return "object"
	case Func, Callable:
		return "function"
	case Iterator:
		return "iterator"
	}
	return fmt.Sprintf("%T", v)
}

// Keys returns the sorted keys of m (for stable output).
func Keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
