package js

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"

	"github.com/hermes-go/hermes/scripting/internal/guard"
)

// Counted natives. goja's builtins that build a string or a buffer in one call cannot be
// interrupted and are invisible to the heap watchdog until they return, so they are replaced
// here by versions that charge what they are about to build before building it: against the
// per-call cap (Options.MaxString) and against the run's memory budget (SetMeter). Natives
// that loop over a length the script controls also look at the interrupt as they go. A limit
// hit aborts the run: the VM is interrupted, which no try/catch/finally, promise handler or
// async function can intercept, and Tripped reports it afterwards.

// Sizes charged, in bytes: a string character may take two, an array element a value header.
const (
	charBytes = 2
	elemBytes = 16
	// loopCheck is how many iterations a counted native runs between looks at the interrupt.
	loopCheck = 4096
)

// MatchTimeout bounds one regular-expression match run by the backtracking engine (patterns
// with backreferences or lookaround), which does not look at the interrupt: a match still
// running then gives up as if nothing matched. A hook past its deadline has failed closed by
// then, so this only bounds the CPU it burns; scripts see a failed match.
const MatchTimeout = time.Second

func init() { regexp2.DefaultMatchTimeout = MatchTimeout }

// SetMeter makes the counted natives charge m (the memory budget of the run in progress).
func (v *VM) SetMeter(m guard.Meter) { v.meter = m }

// Tripped returns the limit the last run hit, or nil. A tripped VM must not decide anything:
// whatever the script returned after the limit hit is void.
func (v *VM) Tripped() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.tripped
}

// abort ends the run with err: the VM is interrupted (uncatchable from the script) and the
// native unwinds at once.
func (v *VM) abort(err error) {
	v.mu.Lock()
	if v.tripped == nil {
		v.tripped = err
	}
	v.mu.Unlock()
	v.Interrupt(err)
	panic(v.rt.NewGoError(err))
}

// charge accounts for delta more bytes built by the native call in progress, which has built
// total bytes so far (delta included).
func (v *VM) charge(total, delta float64) {
	if total > float64(v.opts.MaxString) || math.IsNaN(total) {
		v.abort(fmt.Errorf("%w: one call would build %.0f MiB (cap %d MiB)", guard.ErrMemoryLimit, total/(1<<20), v.opts.MaxString>>20))
	}
	if v.meter != nil && delta > 0 {
		if err := v.meter.Reserve(int64(delta)); err != nil {
			v.abort(err)
		}
	}
}

// reserve is charge for code outside a native call: it trips and interrupts the VM but
// returns the error instead of unwinding.
func (v *VM) reserve(n float64) error {
	var err error
	if n > float64(v.opts.MaxString) {
		err = fmt.Errorf("%w: a value of %.0f MiB (cap %d MiB)", guard.ErrMemoryLimit, n/(1<<20), v.opts.MaxString>>20)
	} else if v.meter != nil {
		err = v.meter.Reserve(int64(n))
	}
	if err != nil {
		v.mu.Lock()
		if v.tripped == nil {
			v.tripped = err
		}
		v.mu.Unlock()
		v.Interrupt(err)
	}
	return err
}

// checkLoop aborts when the VM was interrupted (deadline, caller gone) while a native loops.
func (v *VM) checkLoop(i int) {
	if i%loopCheck == 0 && v.ctx.Err() != nil {
		v.abort(context.Cause(v.ctx))
	}
}

func (v *VM) str(x goja.Value) goja.String {
	if x == nil {
		x = goja.Undefined()
	}
	s, ok := x.ToString().(goja.String)
	if !ok {
		return v.rt.ToValue(x.String()).(goja.String)
	}
	return s
}

func call(f goja.Callable, this goja.Value, args ...goja.Value) goja.Value {
	res, err := f(this, args...)
	if err != nil {
		panic(err) // a JS exception stays catchable; an interrupt stays uncatchable
	}
	return res
}

// define replaces o[name] with a native keeping the original's name and length.
func (v *VM) define(o *goja.Object, name string, f func(goja.FunctionCall) goja.Value) {
	length := int64(0)
	if old, ok := o.Get(name).(*goja.Object); ok {
		length = old.Get("length").ToInteger()
	}
	fn := v.rt.ToValue(f).(*goja.Object)
	_ = fn.DefineDataProperty("name", v.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = fn.DefineDataProperty("length", v.rt.ToValue(length), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = o.DefineDataProperty(name, fn, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

func (v *VM) original(o *goja.Object, name string) goja.Callable {
	f, ok := goja.AssertFunction(o.Get(name))
	if !ok {
		panic("js: no builtin " + name)
	}
	return f
}

func coercible(x goja.Value) bool { return x != nil && !goja.IsUndefined(x) && !goja.IsNull(x) }

func toLength(x goja.Value) float64 {
	if x == nil {
		return 0
	}
	n := x.ToFloat()
	if math.IsNaN(n) || n <= 0 {
		return 0
	}
	return math.Min(math.Floor(n), 1<<53-1)
}

// installLimits replaces the string- and buffer-building builtins with counted versions.
func (v *VM) installLimits() error {
	rt := v.rt
	str := rt.Get("String").ToObject(rt)
	sp := str.Get("prototype").ToObject(rt)
	arr := rt.Get("Array").ToObject(rt)
	ap := arr.Get("prototype").ToObject(rt)
	rxp := rt.Get("RegExp").ToObject(rt).Get("prototype").ToObject(rt)

	repeat := v.original(sp, "repeat")
	v.define(sp, "repeat", func(c goja.FunctionCall) goja.Value {
		if !coercible(c.This) {
			return call(repeat, c.This, c.Arguments...)
		}
		s := v.str(c.This)
		n := c.Argument(0).ToFloat()
		if n > 0 && !math.IsInf(n, 1) {
			size := float64(s.Length()) * math.Floor(n) * charBytes
			v.charge(size, size)
		}
		return call(repeat, s, v.rt.ToValue(n))
	})
	for _, name := range []string{"padStart", "padEnd"} {
		orig := v.original(sp, name)
		v.define(sp, name, func(c goja.FunctionCall) goja.Value {
			if !coercible(c.This) {
				return call(orig, c.This, c.Arguments...)
			}
			s := v.str(c.This)
			n := toLength(c.Argument(0))
			if n > float64(s.Length()) {
				v.charge(n*charBytes, n*charBytes)
			}
			return call(orig, s, v.rt.ToValue(n), c.Argument(1))
		})
	}
	concat := v.original(sp, "concat")
	v.define(sp, "concat", func(c goja.FunctionCall) goja.Value {
		if !coercible(c.This) {
			return call(concat, c.This, c.Arguments...)
		}
		s := v.str(c.This)
		total := float64(s.Length())
		args := make([]goja.Value, len(c.Arguments))
		for i, a := range c.Arguments {
			as := v.str(a)
			args[i] = as
			total += float64(as.Length())
		}
		v.charge(total*charBytes, total*charBytes)
		return call(concat, s, args...)
	})
	for _, name := range []string{"replace", "replaceAll"} {
		orig := v.original(sp, name)
		v.define(sp, name, func(c goja.FunctionCall) goja.Value {
			if !coercible(c.This) {
				return call(orig, c.This, c.Arguments...)
			}
			s := v.str(c.This)
			return call(orig, s, c.Argument(0), v.replacer(s, c.Argument(1)))
		})
	}
	symReplace := rxp.GetSymbol(goja.SymReplace)
	if f, ok := goja.AssertFunction(symReplace); ok {
		fn := v.rt.ToValue(func(c goja.FunctionCall) goja.Value {
			s := v.str(c.Argument(0))
			return call(f, c.This, s, v.replacer(s, c.Argument(1)))
		})
		_ = rxp.DefineDataPropertySymbol(goja.SymReplace, fn, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	}
	if f, ok := goja.AssertFunction(rxp.GetSymbol(goja.SymMatch)); ok {
		// A global match returns every match at once: as many strings as the subject has
		// positions, at worst.
		fn := v.rt.ToValue(func(c goja.FunctionCall) goja.Value {
			s := v.str(c.Argument(0))
			if o, ok := c.This.(*goja.Object); ok && o.Get("global") != nil && o.Get("global").ToBoolean() {
				n := float64(s.Length()+1) * elemBytes * 2
				v.charge(0, n)
			}
			return call(f, c.This, s)
		})
		_ = rxp.DefineDataPropertySymbol(goja.SymMatch, fn, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	}
	split := v.original(sp, "split")
	v.define(sp, "split", func(c goja.FunctionCall) goja.Value {
		if _, isObj := c.Argument(0).(*goja.Object); coercible(c.This) && !isObj && !goja.IsUndefined(c.Argument(0)) {
			{
				sep := v.str(c.Argument(0))
				s := v.str(c.This)
				var n float64
				if sep.Length() == 0 {
					n = float64(s.Length())
				} else {
					n = float64(strings.Count(s.String(), sep.String()) + 1)
				}
				if lim := c.Argument(1); !goja.IsUndefined(lim) {
					n = math.Min(n, float64(uint32(lim.ToInteger())))
				}
				v.charge(n*elemBytes*2, n*elemBytes*2)
				return call(split, s, sep, c.Argument(1))
			}
		}
		return call(split, c.This, c.Arguments...)
	})
	if f, ok := goja.AssertFunction(rxp.GetSymbol(goja.SymSplit)); ok {
		fn := v.rt.ToValue(func(c goja.FunctionCall) goja.Value {
			s := v.str(c.Argument(0))
			n := float64(s.Length() + 1)
			if lim := c.Argument(1); !goja.IsUndefined(lim) {
				n = math.Min(n, float64(uint32(lim.ToInteger())))
			}
			v.charge(n*elemBytes*2, n*elemBytes*2)
			return call(f, c.This, s, c.Argument(1))
		})
		_ = rxp.DefineDataPropertySymbol(goja.SymSplit, fn, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	}
	v.define(str, "raw", v.stringRaw)
	for _, name := range []string{"fromCharCode", "fromCodePoint"} {
		orig := v.original(str, name)
		v.define(str, name, func(c goja.FunctionCall) goja.Value {
			n := float64(len(c.Arguments)) * charBytes * 2
			v.charge(n, n)
			return call(orig, c.This, c.Arguments...)
		})
	}

	v.define(ap, "join", func(c goja.FunctionCall) goja.Value {
		return v.join(c, func(el goja.Value) goja.String { return v.str(el) })
	})
	v.define(ap, "toLocaleString", func(c goja.FunctionCall) goja.Value {
		c.Arguments = nil // the separator is always ","
		return v.join(c, func(el goja.Value) goja.String {
			f, ok := goja.AssertFunction(el.ToObject(v.rt).Get("toLocaleString"))
			if !ok {
				panic(v.rt.NewTypeError("toLocaleString is not a function"))
			}
			return v.str(call(f, el))
		})
	})
	// Methods that walk an array-like up to its length run in one native call: a sparse array
	// (or {length: 2**53 - 1}) makes them loop for minutes. The walk is charged as if the
	// elements were there, so it is bounded as a dense array of that length would be.
	for _, name := range []string{"indexOf", "lastIndexOf", "includes", "forEach", "map", "filter", "some", "every",
		"reduce", "reduceRight", "find", "findIndex", "findLast", "findLastIndex", "reverse", "sort", "copyWithin",
		"slice", "splice", "concat", "flat", "flatMap", "unshift", "shift", "toReversed", "toSorted", "toSpliced", "with"} {
		orig, ok := goja.AssertFunction(ap.Get(name))
		if !ok {
			continue
		}
		v.define(ap, name, func(c goja.FunctionCall) goja.Value {
			if v.meter != nil && coercible(c.This) {
				if n := toLength(c.This.ToObject(v.rt).Get("length")) * elemBytes; n >= 1<<20 {
					if err := v.meter.Reserve(int64(math.Min(n, 1<<62))); err != nil {
						v.abort(err)
					}
				}
			}
			return call(orig, c.This, c.Arguments...)
		})
	}
	fill := v.original(ap, "fill")
	v.define(ap, "fill", func(c goja.FunctionCall) goja.Value {
		if coercible(c.This) {
			n := toLength(c.This.ToObject(v.rt).Get("length")) * elemBytes
			v.charge(n, n)
		}
		return call(fill, c.This, c.Arguments...)
	})
	from := v.original(arr, "from")
	v.define(arr, "from", func(c goja.FunctionCall) goja.Value {
		if src := c.Argument(0); coercible(src) {
			if _, isStr := src.(goja.String); !isStr {
				n := toLength(src.ToObject(v.rt).Get("length")) * elemBytes
				v.charge(n, n)
			}
		}
		return call(from, c.This, c.Arguments...)
	})

	json := rt.Get("JSON").ToObject(rt)
	stringify := v.original(json, "stringify")
	v.define(json, "stringify", func(c goja.FunctionCall) goja.Value {
		return call(stringify, c.This, c.Argument(0), v.jsonCounter(c.Argument(1)), c.Argument(2))
	})

	for _, name := range []string{"encodeURI", "encodeURIComponent", "escape"} {
		orig, ok := goja.AssertFunction(rt.Get(name))
		if !ok {
			continue
		}
		v.define(rt.GlobalObject(), name, func(c goja.FunctionCall) goja.Value {
			s := v.str(c.Argument(0))
			n := float64(s.Length()) * 12 // %XX%XX%XX for a character, at most
			v.charge(n, n)
			return call(orig, c.This, s)
		})
	}

	// Buffers: their constructors charge the byte size first.
	for _, b := range []struct {
		name string
		per  float64
	}{{"ArrayBuffer", 1}, {"Int8Array", 1}, {"Uint8Array", 1}, {"Uint8ClampedArray", 1}, {"Int16Array", 2}, {"Uint16Array", 2}, {"Int32Array", 4}, {"Uint32Array", 4}, {"Float32Array", 4}, {"Float64Array", 8}, {"BigInt64Array", 8}, {"BigUint64Array", 8}} {
		v.countConstructor(b.name, b.per)
	}
	return nil
}

// countConstructor replaces the global constructor name by one that charges the size of what
// it builds (a length, or an array-like's length or byte length, times per) before building
// it. Statics and the prototype are shared, and the prototype's constructor is the new one,
// so instanceof, .constructor and subclasses work as before.
func (v *VM) countConstructor(name string, per float64) {
	g := v.rt.GlobalObject()
	orig, ok := g.Get(name).(*goja.Object)
	if !ok {
		return
	}
	construct, ok := goja.AssertConstructor(orig)
	if !ok {
		return
	}
	num := func(x goja.Value) float64 {
		if x == nil || goja.IsUndefined(x) {
			return 0
		}
		return x.ToFloat()
	}
	var wrapper *goja.Object
	wrapper = v.rt.ToValue(func(c goja.ConstructorCall) *goja.Object {
		var n float64
		switch a := c.Argument(0).(type) {
		case *goja.Object:
			n = math.Max(num(a.Get("length")), num(a.Get("byteLength")))
		default:
			n = num(a)
		}
		if n > 0 {
			v.charge(n*per, n*per)
		}
		nt := c.NewTarget
		if nt == nil || nt == wrapper {
			nt = orig
		}
		obj, err := construct(nt, c.Arguments...)
		if err != nil {
			panic(err)
		}
		return obj
	}).(*goja.Object)
	for _, k := range orig.GetOwnPropertyNames() {
		if k != "prototype" && k != "length" && k != "name" {
			_ = wrapper.DefineDataProperty(k, orig.Get(k), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
		}
	}
	_ = wrapper.DefineDataProperty("name", v.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = wrapper.DefineDataProperty("length", orig.Get("length"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	proto := orig.Get("prototype").ToObject(v.rt)
	_ = wrapper.DefineDataProperty("prototype", proto, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
	_ = proto.DefineDataProperty("constructor", wrapper, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = wrapper.SetPrototype(orig.Prototype())
	_ = g.DefineDataProperty(name, wrapper, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

// replacer turns the replacement argument of replace/replaceAll/[Symbol.replace] into a
// function that charges what each replacement adds: a string template is expanded here, as
// the builtin would ($$, $&, $`, $', $n, $<name>); a function's results are charged.
func (v *VM) replacer(s goja.String, repl goja.Value) goja.Value {
	v.charge(float64(s.Length())*charBytes, float64(s.Length())*charBytes) // the kept parts
	total := float64(s.Length()) * charBytes
	count := 0
	add := func(r goja.String) goja.String {
		n := float64(r.Length()) * charBytes
		total += n
		count++
		v.checkLoop(count)
		v.charge(total, n)
		return r
	}
	if f, ok := goja.AssertFunction(repl); ok {
		return v.rt.ToValue(func(c goja.FunctionCall) goja.Value {
			return add(v.str(call(f, c.This, c.Arguments...)))
		})
	}
	tmpl := v.str(repl)
	if tmpl.Length() == 0 || !strings.Contains(tmpl.String(), "$") {
		return v.rt.ToValue(func(goja.FunctionCall) goja.Value { return add(tmpl) })
	}
	return v.rt.ToValue(func(c goja.FunctionCall) goja.Value {
		args := c.Arguments
		var groups *goja.Object
		if n := len(args); n > 0 {
			if o, ok := args[n-1].(*goja.Object); ok {
				groups, args = o, args[:n-1]
			}
		}
		if len(args) < 3 {
			return add(tmpl)
		}
		str := v.str(args[len(args)-1])
		pos := int(args[len(args)-2].ToInteger())
		caps := args[:len(args)-2] // caps[0] is the match
		var buf goja.StringBuilder
		v.substitute(str, pos, caps, groups, tmpl, func(piece goja.String) {
			add(piece)
			buf.WriteString(piece)
		})
		return buf.String()
	})
}

// substitute expands a replacement template the way String.prototype.replace does, handing
// each piece to write.
func (v *VM) substitute(s goja.String, position int, caps []goja.Value, groups *goja.Object, t goja.String, write func(goja.String)) {
	capture := func(i int) goja.String {
		if i < len(caps) && coercible(caps[i]) {
			return v.str(caps[i])
		}
		return v.rt.ToValue("").(goja.String)
	}
	dollar := v.rt.ToValue("$").(goja.String)
	dollarLt := v.rt.ToValue("$<").(goja.String)
	l, rl := s.Length(), t.Length()
	matched := capture(0)
	tail := position + matched.Length()
	lit := 0 // start of the pending literal run
	flush := func(end int) {
		if end > lit {
			write(t.Substring(lit, end))
		}
	}
	for i := 0; i < rl; i++ {
		if t.CharAt(i) != '$' || i == rl-1 {
			continue
		}
		flush(i)
		ch := t.CharAt(i + 1)
		switch ch {
		case '$':
			write(dollar)
		case '`':
			write(s.Substring(0, min(max(position, 0), l)))
		case '\'':
			if tail < l {
				write(s.Substring(tail, l))
			}
		case '&':
			write(matched)
		case '<':
			j := i + 2
			for ; j < rl && t.CharAt(j) != '>'; j++ {
			}
			if groups != nil && j < rl {
				if g := groups.Get(t.Substring(i+2, j).String()); g != nil && !goja.IsUndefined(g) {
					write(v.str(g))
				}
				i = j
				lit = i + 1
				continue
			}
			write(dollarLt)
		default:
			index, j := 0, i+1
			for lim := min(j+2, rl); j < lim; j++ {
				d := t.CharAt(j)
				if d < '0' || d > '9' {
					break
				}
				m := index*10 + int(d-'0')
				if m >= len(caps) {
					break
				}
				index = m
			}
			if index > 0 {
				write(capture(index))
				i = j - 1
				lit = j
				continue
			}
			write(dollarLt.Substring(0, 1))
			lit = i + 1
			continue
		}
		i++
		lit = i + 1
	}
	flush(rl)
}

// stringRaw is String.raw, built piece by piece with each piece charged.
func (v *VM) stringRaw(c goja.FunctionCall) goja.Value {
	cooked := c.Argument(0).ToObject(v.rt)
	raw := cooked.Get("raw")
	if !coercible(raw) {
		panic(v.rt.NewTypeError("String.raw: the template has no raw strings"))
	}
	ro := raw.ToObject(v.rt)
	n := toLength(ro.Get("length"))
	var buf goja.StringBuilder
	total := 0.0
	write := func(s goja.String) {
		d := float64(s.Length()) * charBytes
		total += d
		v.charge(total, d)
		buf.WriteString(s)
	}
	for i := 0.0; i < n; i++ {
		v.checkLoop(int(i))
		write(v.str(ro.Get(strconv.FormatInt(int64(i), 10))))
		if i+1 < n && int(i)+1 < len(c.Arguments) {
			write(v.str(c.Arguments[int(i)+1]))
		}
	}
	return buf.String()
}

// join is Array.prototype.join (and, with a per-element conversion, toLocaleString), each
// element charged as it is added. An array that contains itself joins as "" inside, as in
// other engines.
func (v *VM) join(c goja.FunctionCall, conv func(goja.Value) goja.String) goja.Value {
	o := c.This.ToObject(v.rt)
	if v.joining[o] {
		return v.rt.ToValue("")
	}
	if v.joining == nil {
		v.joining = map[*goja.Object]bool{}
	}
	v.joining[o] = true
	defer delete(v.joining, o)
	n := toLength(o.Get("length"))
	sep := goja.String(v.rt.ToValue(",").(goja.String))
	if s := c.Argument(0); !goja.IsUndefined(s) {
		sep = v.str(s)
	}
	if n > 1 {
		// The separators alone are a floor on what the call builds: a sparse array of 2**31
		// holes fails at once instead of after a loop per hole.
		if floor := (n - 1) * float64(sep.Length()) * charBytes; floor > float64(v.opts.MaxString) {
			v.charge(floor, 0)
		}
	}
	var buf goja.StringBuilder
	total := 0.0
	for i := 0.0; i < n; i++ {
		v.checkLoop(int(i))
		d := 0.0
		if i > 0 {
			buf.WriteString(sep)
			d += float64(sep.Length()) * charBytes
		}
		var s goja.String
		if el := o.Get(strconv.FormatInt(int64(i), 10)); coercible(el) {
			s = conv(el)
			d += float64(s.Length()) * charBytes
		}
		total += d
		v.charge(total, d)
		if s != nil {
			buf.WriteString(s)
		}
	}
	return buf.String()
}

// jsonCounter is a JSON.stringify replacer that charges every value and key written (and
// applies the script's own replacer, a function or a list of property names, first).
func (v *VM) jsonCounter(user goja.Value) goja.Value {
	var fn goja.Callable
	var allow map[string]bool
	if f, ok := goja.AssertFunction(user); ok {
		fn = f
	} else if o, ok := user.(*goja.Object); ok && o.ClassName() == "Array" {
		allow = map[string]bool{}
		for _, k := range o.Keys() {
			e := o.Get(k)
			switch e.(type) {
			case goja.String:
				allow[e.String()] = true
			default:
				if _, isNum := e.Export().(int64); isNum {
					allow[e.String()] = true
				} else if _, isF := e.Export().(float64); isF {
					allow[e.String()] = true
				}
			}
		}
	}
	total := 0.0
	count := 0
	return v.rt.ToValue(func(c goja.FunctionCall) goja.Value {
		key, val := c.Argument(0), c.Argument(1)
		if allow != nil && key.String() != "" {
			if h, ok := c.This.(*goja.Object); !ok || h.ClassName() != "Array" {
				if !allow[key.String()] {
					return goja.Undefined()
				}
			}
		}
		if fn != nil {
			val = call(fn, c.This, key, val)
		}
		d := float64(len(key.String())+16) * charBytes
		if s, ok := val.(goja.String); ok {
			d += float64(s.Length()) * charBytes * 2 // escapes
		}
		total += d
		count++
		v.checkLoop(count)
		v.charge(total, d)
		return val
	})
}
