package stdlib

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Script values of kinds JSON cannot tell apart. A binding hands them only to the members a
// Module names in Exact (the assert module's comparisons), so equality and failure messages see
// a Map's entries, a Date's time and undefined as distinct from null; everywhere else values
// keep their plain shapes (a Map is an empty object, undefined is nil).

// Undefined is JS undefined; Null is JS null, which equals nil (Lua's nil, and null
// everywhere else).
var (
	Undefined = UndefinedValue{}
	Null      = NullValue{}
)

// UndefinedValue is the type of Undefined.
type UndefinedValue struct{}

// NullValue is the type of Null.
type NullValue struct{}

// MapValue is a JS Map: its entries in insertion order.
type MapValue struct{ Entries [][2]any }

// SetValue is a JS Set: its members in insertion order.
type SetValue struct{ Items []any }

// DateValue is a JS Date: milliseconds since the epoch, NaN for an invalid date.
type DateValue struct{ Ms float64 }

// RegExpValue is a JS RegExp.
type RegExpValue struct{ Source, Flags string }

// TypedArrayValue is a typed array or an ArrayBuffer: its constructor's name and elements.
type TypedArrayValue struct {
	Kind  string
	Items []any
}

// InstanceValue is an object whose prototype is not Object's: the constructor's name, Proto
// identifying the prototype (instances are equal only when they share it) and its own
// enumerable properties.
type InstanceValue struct {
	Class  string
	Proto  any
	Fields map[string]any
}

// FuncValue is a script function as a value: its name and ID, which identifies it.
type FuncValue struct {
	Name string
	ID   any
}

// DeepEqual is structural equality as Deno's assertEquals: numbers by value (NaN equals NaN,
// whatever the Go type), arrays by element, objects by their keys and values, Maps by entries
// and Sets by members in any order, Dates by time, RegExps by source and flags, typed arrays
// by kind and elements, class instances by prototype and fields, functions by identity.
// undefined is not null, and an array is not an object even when both are empty.
func DeepEqual(a, b any) bool { return deepEqual(a, b, 0) }

func deepEqual(a, b any, depth int) bool {
	if depth > 100 {
		return false
	}
	if r, ok := a.(Record); ok {
		a = RecordMap(r)
	}
	if r, ok := b.(Record); ok {
		b = RecordMap(r)
	}
	if a == Null {
		a = nil
	}
	if b == Null {
		b = nil
	}
	if fa, ok := ToFloat(a); ok {
		fb, ok := ToFloat(b)
		return ok && (fa == fb || math.IsNaN(fa) && math.IsNaN(fb))
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case UndefinedValue:
		_, ok := b.(UndefinedValue)
		return ok
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		return ok && listEqual(x, y, depth)
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && fieldsEqual(x, y, depth)
	case MapValue:
		y, ok := b.(MapValue)
		if !ok || len(x.Entries) != len(y.Entries) {
			return false
		}
		used := make([]bool, len(y.Entries))
		for _, e := range x.Entries {
			if findEntry(y.Entries, used, e[0], e[1], depth) < 0 {
				return false
			}
		}
		return true
	case SetValue:
		y, ok := b.(SetValue)
		if !ok || len(x.Items) != len(y.Items) {
			return false
		}
		used := make([]bool, len(y.Items))
		for _, e := range x.Items {
			if findItem(y.Items, used, e, depth) < 0 {
				return false
			}
		}
		return true
	case DateValue:
		y, ok := b.(DateValue)
		return ok && (x.Ms == y.Ms || math.IsNaN(x.Ms) && math.IsNaN(y.Ms))
	case RegExpValue:
		y, ok := b.(RegExpValue)
		return ok && x == y
	case TypedArrayValue:
		y, ok := b.(TypedArrayValue)
		return ok && x.Kind == y.Kind && listEqual(x.Items, y.Items, depth)
	case InstanceValue:
		y, ok := b.(InstanceValue)
		return ok && x.Proto != nil && x.Proto == y.Proto && fieldsEqual(x.Fields, y.Fields, depth)
	case FuncValue:
		y, ok := b.(FuncValue)
		return ok && x.ID != nil && x.ID == y.ID
	case Func, Callable, Iterator, Object:
		return false // no identity to compare
	}
	return reflect.DeepEqual(a, b)
}

func listEqual(x, y []any, depth int) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !deepEqual(x[i], y[i], depth+1) {
			return false
		}
	}
	return true
}

func fieldsEqual(x, y map[string]any, depth int) bool {
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		w, ok := y[k]
		if !ok || !deepEqual(v, w, depth+1) {
			return false
		}
	}
	return true
}

// findEntry marks and returns the first unused entry of es equal to k => v, or -1.
func findEntry(es [][2]any, used []bool, k, v any, depth int) int {
	for i, e := range es {
		if !used[i] && deepEqual(e[0], k, depth+1) && deepEqual(e[1], v, depth+1) {
			used[i] = true
			return i
		}
	}
	return -1
}

func findItem(items []any, used []bool, v any, depth int) int {
	for i, e := range items {
		if !used[i] && deepEqual(e, v, depth+1) {
			used[i] = true
			return i
		}
	}
	return -1
}

// maxDiffLines bounds the paths a failure lists.
const maxDiffLines = 12

// Diff lists where got differs from want, one line per path ("at .a.b: expected 1, got 2"),
// at most a dozen and a line saying how many more; nil when they are equal or differ as a
// whole (different kinds, two different numbers), which the caller's own message says.
func Diff(got, want any) []string {
	var out []string
	n := 0
	diffAt("", got, want, &out, &n, 0)
	if n > maxDiffLines {
		out = append(out, fmt.Sprintf("… and %d more", n-maxDiffLines))
	}
	return out
}

func diffAt(path string, got, want any, out *[]string, n *int, depth int) {
	add := func(s string) {
		*n++
		if *n <= maxDiffLines {
			*out = append(*out, s)
		}
	}
	leaf := func() {
		if path != "" { // a difference as a whole is the caller's message
			add(fmt.Sprintf("at %s: expected %s, got %s", path, Inspect(want), Inspect(got)))
		}
	}
	if deepEqual(got, want, depth) {
		return
	}
	if depth > 100 {
		leaf()
		return
	}
	if r, ok := got.(Record); ok {
		got = RecordMap(r)
	}
	if r, ok := want.(Record); ok {
		want = RecordMap(r)
	}
	switch w := want.(type) {
	case []any:
		if g, ok := got.([]any); ok {
			diffList(path, g, w, add, out, n, depth)
			return
		}
	case map[string]any:
		if g, ok := got.(map[string]any); ok {
			diffFields(path, g, w, add, out, n, depth)
			return
		}
	case InstanceValue:
		if g, ok := got.(InstanceValue); ok && g.Proto == w.Proto {
			diffFields(path, g.Fields, w.Fields, add, out, n, depth)
			return
		}
	case TypedArrayValue:
		if g, ok := got.(TypedArrayValue); ok && g.Kind == w.Kind {
			diffList(path, g.Items, w.Items, add, out, n, depth)
			return
		}
	case MapValue:
		if g, ok := got.(MapValue); ok {
			used := make([]bool, len(g.Entries))
			var missing [][2]any
			for _, e := range w.Entries {
				if findEntry(g.Entries, used, e[0], e[1], depth) >= 0 {
					continue
				}
				missing = append(missing, e)
			}
			for _, e := range missing { // the same key with another value: descend
				i := -1
				for j, ge := range g.Entries {
					if !used[j] && deepEqual(ge[0], e[0], depth+1) {
						i = j
						break
					}
				}
				if i < 0 {
					add(fmt.Sprintf("%smissing entry %s => %s", at(path), Inspect(e[0]), Inspect(e[1])))
					continue
				}
				used[i] = true
				diffAt(fmt.Sprintf("%s.get(%s)", path, Inspect(e[0])), g.Entries[i][1], e[1], out, n, depth+1)
			}
			for i, ge := range g.Entries {
				if !used[i] {
					add(fmt.Sprintf("%sunexpected entry %s => %s", at(path), Inspect(ge[0]), Inspect(ge[1])))
				}
			}
			return
		}
	case SetValue:
		if g, ok := got.(SetValue); ok {
			used := make([]bool, len(g.Items))
			for _, e := range w.Items {
				if findItem(g.Items, used, e, depth) < 0 {
					add(fmt.Sprintf("%smissing member %s", at(path), Inspect(e)))
				}
			}
			for i, e := range g.Items {
				if !used[i] {
					add(fmt.Sprintf("%sunexpected member %s", at(path), Inspect(e)))
				}
			}
			return
		}
	}
	leaf()
}

// at prefixes a difference with its path (nothing at the top).
func at(p string) string {
	if p == "" {
		return ""
	}
	return "at " + p + ": "
}

func diffList(path string, g, w []any, add func(string), out *[]string, n *int, depth int) {
	for i := range max(len(g), len(w)) {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case i >= len(g):
			add(fmt.Sprintf("at %s: missing, expected %s", p, Inspect(w[i])))
		case i >= len(w):
			add(fmt.Sprintf("at %s: unexpected %s", p, Inspect(g[i])))
		default:
			diffAt(p, g[i], w[i], out, n, depth+1)
		}
	}
}

func diffFields(path string, g, w map[string]any, add func(string), out *[]string, n *int, depth int) {
	keys := Keys(w)
	for _, k := range Keys(g) {
		if _, ok := w[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := path + keyPath(k)
		gv, inG := g[k]
		wv, inW := w[k]
		switch {
		case !inG:
			add(fmt.Sprintf("at %s: missing, expected %s", p, Inspect(wv)))
		case !inW:
			add(fmt.Sprintf("at %s: unexpected %s", p, Inspect(gv)))
		default:
			diffAt(p, gv, wv, out, n, depth+1)
		}
	}
}

func keyPath(k string) string {
	ident := k != ""
	for i, r := range k {
		if !(r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			ident = false
			break
		}
	}
	if ident {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// Inspect renders a value for assertion messages: like Format (JSON with sorted keys for
// plain values), and readably for the kinds JSON cannot show: Map(1) {1 => 2}, Set(1) {1},
// Date(1970-01-01T00:00:00.000Z), /a+/g, Uint8Array(2) [1,2], Point {"x":1}, undefined,
// NaN, and functions by name ([Function: f]).
func Inspect(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return strconv.Quote(x)
	case map[string]any:
		if hasFuncs(x) {
			return summary(x)
		}
	}
	var b strings.Builder
	inspect(&b, v, 0)
	return b.String()
}

func inspect(b *strings.Builder, v any, depth int) {
	if depth > 20 {
		b.WriteString("…")
		return
	}
	if r, ok := v.(Record); ok {
		v = RecordMap(r)
	}
	if f, ok := ToFloat(v); ok {
		switch {
		case math.IsNaN(f):
			b.WriteString("NaN")
		case math.IsInf(f, 1):
			b.WriteString("Infinity")
		case math.IsInf(f, -1):
			b.WriteString("-Infinity")
		default:
			j, _ := Marshal(v, "")
			b.Write(j)
		}
		return
	}
	list := func(items []any) {
		b.WriteByte('[')
		for i, e := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			inspect(b, e, depth+1)
		}
		b.WriteByte(']')
	}
	fields := func(m map[string]any) {
		b.WriteByte('{')
		for i, k := range Keys(m) {
			if i > 0 {
				b.WriteByte(',')
			}
			j, _ := Marshal(k, "")
			b.Write(j)
			b.WriteByte(':')
			inspect(b, m[k], depth+1)
		}
		b.WriteByte('}')
	}
	switch x := v.(type) {
	case nil, NullValue:
		b.WriteString("null")
	case UndefinedValue:
		b.WriteString("undefined")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		j, _ := Marshal(x, "")
		b.Write(j)
	case []any:
		list(x)
	case map[string]any:
		fields(x)
	case MapValue:
		fmt.Fprintf(b, "Map(%d) {", len(x.Entries))
		for i, e := range x.Entries {
			if i > 0 {
				b.WriteString(", ")
			}
			inspect(b, e[0], depth+1)
			b.WriteString(" => ")
			inspect(b, e[1], depth+1)
		}
		b.WriteByte('}')
	case SetValue:
		fmt.Fprintf(b, "Set(%d) {", len(x.Items))
		for i, e := range x.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			inspect(b, e, depth+1)
		}
		b.WriteByte('}')
	case DateValue:
		if math.IsNaN(x.Ms) || math.IsInf(x.Ms, 0) {
			b.WriteString("Date(Invalid Date)")
		} else {
			b.WriteString("Date(" + time.UnixMilli(int64(x.Ms)).UTC().Format("2006-01-02T15:04:05.000Z07:00") + ")")
		}
	case RegExpValue:
		b.WriteString("/" + x.Source + "/" + x.Flags)
	case TypedArrayValue:
		fmt.Fprintf(b, "%s(%d) ", x.Kind, len(x.Items))
		list(x.Items)
	case InstanceValue:
		name := x.Class
		if name == "" {
			name = "Object"
		}
		b.WriteString(name + " ")
		fields(x.Fields)
	case FuncValue:
		if x.Name == "" {
			b.WriteString("[Function (anonymous)]")
		} else {
			b.WriteString("[Function: " + x.Name + "]")
		}
	case Func, Callable:
		b.WriteString("<function>")
	case Iterator:
		b.WriteString("<iterator>")
	case Object:
		b.WriteString("<object>")
	default:
		j, err := Marshal(v, "")
		if err != nil {
			fmt.Fprintf(b, "%v", v)
			return
		}
		b.Write(j)
	}
}
