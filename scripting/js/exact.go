package js

import (
	"math"
	"reflect"
	"strconv"
	"time"

	"github.com/dop251/goja"

	"github.com/hermes-go/hermes/stdlib"
)

// Exact export: the members a module names in stdlib.Module.Exact (assert's comparisons) get
// their arguments with the kinds JSON cannot tell apart kept: undefined and null, functions
// by identity, Maps, Sets, Dates, RegExps, typed arrays and class instances.

// nativeExact is native, handing f its arguments as exportExact converts them.
func (v *VM) nativeExact(f stdlib.Func) func(goja.FunctionCall) goja.Value {
	return v.adapt(f, v.exportExact)
}

var (
	mapExport   = reflect.TypeFor[[][2]any]()
	setExport   = reflect.TypeFor[[]any]()
	arrayBuffer = reflect.TypeFor[goja.ArrayBuffer]()
)

// exportExact is export keeping the kinds of values (see above).
func (v *VM) exportExact(val goja.Value, depth int) (any, error) {
	if depth > 64 {
		return v.export(val, depth) // (its error)
	}
	switch {
	case val == nil || goja.IsUndefined(val):
		return stdlib.Undefined, nil
	case goja.IsNull(val):
		return stdlib.Null, nil
	}
	o, ok := val.(*goja.Object)
	if !ok || o.ExportType() == recordType || o.ClassName() == "Error" {
		return v.export(val, depth)
	}
	if _, ok := goja.AssertFunction(val); ok {
		return stdlib.FuncValue{Name: o.Get("name").String(), ID: o}, nil
	}
	list := func(n int) ([]any, error) {
		out := make([]any, n)
		for i := range n {
			var err error
			if out[i], err = v.exportExact(o.Get(strconv.Itoa(i)), depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	ctor := func(o *goja.Object) string {
		if c, ok := o.Get("constructor").(*goja.Object); ok {
			if n := c.Get("name"); n != nil {
				return n.String()
			}
		}
		return ""
	}
	switch cls, t := o.ClassName(), o.ExportType(); {
	case cls == "Array":
		return list(int(o.Get("length").ToInteger()))
	case cls == "Date":
		ms := math.NaN()
		if tm, ok := o.Export().(time.Time); ok {
			ms = float64(tm.UnixMilli())
		}
		return stdlib.DateValue{Ms: ms}, nil
	case cls == "RegExp":
		return stdlib.RegExpValue{Source: o.Get("source").String(), Flags: o.Get("flags").String()}, nil
	case cls == "Object" && t == mapExport:
		var out stdlib.MapValue
		var err error
		v.rt.ForOf(o, func(e goja.Value) bool {
			pair, ok := e.(*goja.Object)
			if !ok {
				return true
			}
			var k, x any
			if k, err = v.exportExact(pair.Get("0"), depth+1); err != nil {
				return false
			}
			if x, err = v.exportExact(pair.Get("1"), depth+1); err != nil {
				return false
			}
			out.Entries = append(out.Entries, [2]any{k, x})
			return true
		})
		return out, err
	case cls == "Object" && t == setExport:
		var out stdlib.SetValue
		var err error
		v.rt.ForOf(o, func(e goja.Value) bool {
			var x any
			if x, err = v.exportExact(e, depth+1); err != nil {
				return false
			}
			out.Items = append(out.Items, x)
			return true
		})
		return out, err
	case t == arrayBuffer:
		b := o.Export().(goja.ArrayBuffer).Bytes()
		out := make([]any, len(b))
		for i, c := range b {
			out[i] = int64(c)
		}
		return stdlib.TypedArrayValue{Kind: "ArrayBuffer", Items: out}, nil
	case t != nil && t.Kind() == reflect.Slice && t.Elem().Kind() >= reflect.Int && t.Elem().Kind() <= reflect.Float64:
		items, err := list(int(o.Get("length").ToInteger()))
		return stdlib.TypedArrayValue{Kind: ctor(o), Items: items}, err
	}
	keys := o.Keys()
	fields := make(map[string]any, len(keys))
	for _, k := range keys {
		x, err := v.exportExact(o.Get(k), depth+1)
		if err != nil {
			return nil, err
		}
		fields[k] = x
	}
	if p := o.Prototype(); p != nil && p != v.rt.NewObject().Prototype() {
		return stdlib.InstanceValue{Class: ctor(p), Proto: p, Fields: fields}, nil
	}
	return fields, nil
}
