// Package js binds scripts written in JavaScript (goja) to the host: stdlib modules through
// require, print and console, policy files with their hooks, and interrupts. A VM belongs to
// the goroutine that created it; only Interrupt may be called from elsewhere.
//
// The package knows nothing about the engine: it converts stdlib values to JS values and
// back, and leaves pooling, deadlines and decision checking to the scripting package.
package js

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"

	"github.com/hermes-go/hermes/scripting/internal/guard"
	"github.com/hermes-go/hermes/stdlib"
)

// Options configures a VM.
type Options struct {
	// Modules are offered through require(name).
	Modules []*stdlib.Module
	// Globals are set as global variables (the REPL preloads the API this way).
	Globals map[string]any
	// Stdout receives print and console.log/info; Stderr console.warn/error. Nil discards.
	Stdout, Stderr io.Writer
	// Root is the directory relative requires of file modules are confined to (the script's
	// directory); "" allows none.
	Root string
	// MaxCallStack bounds recursion depth (default 1000).
	MaxCallStack int
	// MaxString caps what one native call may build (repeat, replace, join, JSON.stringify,
	// String.raw, typed arrays, ...), in bytes, a character counting 2 and an array element
	// 16; default 64 MiB. Going over aborts the run like the memory limit.
	MaxString int
}

// VM is one goja runtime with the host bindings installed.
type VM struct {
	rt   *goja.Runtime
	opts Options
	mods map[string]*stdlib.Module
	req  map[string]goja.Value // require cache
	// files caches file modules by their real path; loading holds the module objects of the
	// files being loaded (a cycle gets what was exported so far).
	files   map[string]goja.Value
	loading map[string]*goja.Object
	// ctx is what host functions receive: it ends when the VM is interrupted, so a host
	// function blocked in I/O or a sleep returns as the script stops. Only the owner goroutine
	// replaces it (Reset); Interrupt cancels it under mu.
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
	// lineKey is the global the policy instrumentation writes return lines to.
	global *goja.Object

	// Promises rejected with no handler during a RunFile, Call or Eval (tracking), in the order
	// they were rejected; settle marks the next Callable the host calls as a test whose
	// returned promise is awaited.
	tracking bool
	rejected map[*goja.Promise]int
	rejects  int
	settle   bool
	thrower  goja.Callable

	meter   guard.Meter           // the run's memory budget; nil: only MaxString
	tripped error                 // the limit the run hit (under mu)
	joining map[*goja.Object]bool // arrays being joined, for cycles
	handed  guard.Tally           // string bytes of the value being exported
}

// New builds a VM.
func New(o Options) (*VM, error) {
	if o.MaxCallStack <= 0 {
		o.MaxCallStack = 1000
	}
	if o.MaxString <= 0 {
		o.MaxString = 64 << 20
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	rt := goja.New()
	rt.SetParserOptions(parseOpts...)
	rt.SetMaxCallStackSize(o.MaxCallStack)
	v := &VM{rt: rt, opts: o, mods: map[string]*stdlib.Module{}, req: map[string]goja.Value{}, global: rt.GlobalObject(),
		files: map[string]goja.Value{}, loading: map[string]*goja.Object{}}
	v.ctx, v.cancel = context.WithCancelCause(context.Background())
	rt.SetPromiseRejectionTracker(v.trackRejection)
	v.thrower, _ = goja.AssertFunction(rt.ToValue(func(call goja.FunctionCall) goja.Value { panic(call.Argument(0)) }))
	for _, m := range o.Modules {
		v.mods[m.Name] = m
	}
	if err := v.installLimits(); err != nil {
		return nil, fmt.Errorf("js: counted natives: %w", err)
	}
	if err := v.installCheck(); err != nil {
		return nil, fmt.Errorf("js: counted concatenation: %w", err)
	}
	must := func(err error) {
		if err != nil {
			panic(err) // setting a fresh global cannot fail
		}
	}
	must(rt.Set("require", v.requireFrom(o.Root)))
	must(rt.Set("print", func(call goja.FunctionCall) goja.Value {
		v.write(v.opts.Stdout, call.Arguments)
		return goja.Undefined()
	}))
	console := rt.NewObject()
	for name, w := range map[string]io.Writer{"log": o.Stdout, "info": o.Stdout, "debug": o.Stdout, "warn": o.Stderr, "error": o.Stderr} {
		must(console.Set(name, func(call goja.FunctionCall) goja.Value {
			v.write(w, call.Arguments)
			return goja.Undefined()
		}))
	}
	must(rt.Set("console", console))
	for name, g := range o.Globals {
		must(rt.Set(name, v.ToValue(g)))
	}
	return v, nil
}

// Runtime exposes the goja runtime to code in this module that needs more (tests, REPL).
func (v *VM) Runtime() *goja.Runtime { return v.rt }

// Interrupt stops the code running in the VM as soon as it executes its next instruction;
// the run fails with an error wrapping reason. It is the one method safe from any goroutine.
func (v *VM) Interrupt(reason error) {
	v.mu.Lock()
	v.cancel(reason)
	v.mu.Unlock()
	v.rt.Interrupt(reason)
}

// Reset clears a past interrupt so the VM can run again (the REPL after Ctrl-C).
func (v *VM) Reset() {
	v.rt.ClearInterrupt()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.tripped = nil
	if v.ctx.Err() != nil {
		v.ctx, v.cancel = context.WithCancelCause(context.Background())
	}
}

// watch interrupts the VM when ctx ends while code runs; the returned func stops watching.
func (v *VM) watch(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() { v.Interrupt(context.Cause(ctx)) })
}

// RunFile runs a script in the global scope; one written with ES module syntax, or in
// TypeScript, runs as a module (its own scope) after esbuild turned it into CommonJS. ctx ending
// interrupts it.
//
// Promise jobs run to the end before it returns (there is no event loop: no timers, no
// asynchronous I/O). A promise still rejected with no handler then fails the run, as an
// uncaught exception would: "Uncaught (in promise) Error: …" at the line that created the error.
func (v *VM) RunFile(ctx context.Context, name, src string) error {
	if needsTransform(name, src) {
		if _, err := Transform(name, src); err != nil {
			return err // placed in the file as written, before anything runs
		}
		stop := v.watch(ctx)
		defer stop()
		v.track()
		_, err := v.runModule(name, filepath.Dir(name), src)
		return v.untracked(name, v.scriptError(err))
	}
	prg, err := compileScript(name, src)
	if err != nil {
		return err
	}
	stop := v.watch(ctx)
	defer stop()
	v.track()
	_, err = v.rt.RunProgram(prg)
	return v.untracked(name, v.scriptError(err))
}

// ErrNeverSettled fails a test whose returned promise is still pending once every promise job
// has run: nothing is left that could settle it.
var ErrNeverSettled = errors.New("the promise the test returned never settled: nothing was left to run that could settle it (scripts have no event loop: no timers, no asynchronous I/O)")

// Call runs a script function this VM handed to the host (a Callable), ctx ending
// interrupting it; the test runner calls each registered test this way. When the function
// returns a promise (an async test), Call waits for it as the promise jobs run: a rejection
// fails the call with the rejection's error; a promise still pending when no job is left fails
// with ErrNeverSettled. A promise rejected with no handler during the call fails it too.
func (v *VM) Call(ctx context.Context, fn stdlib.Callable) error {
	stop := v.watch(ctx)
	defer stop()
	v.track()
	v.settle = true
	_, err := fn(v.ctx)
	v.settle = false
	return v.untracked("", err)
}

// track starts recording the promises rejected with no handler.
func (v *VM) track() {
	v.tracking, v.rejected, v.rejects = true, map[*goja.Promise]int{}, 0
}

// untracked stops recording; when err is nil and a promise is still rejected with no handler,
// it returns the earliest such rejection as an uncaught error (placed in file when its value
// carries no position).
func (v *VM) untracked(file string, err error) error {
	first, seq := (*goja.Promise)(nil), 0
	for p, n := range v.rejected {
		if first == nil || n < seq {
			first, seq = p, n
		}
	}
	v.tracking, v.rejected = false, nil
	if err != nil || first == nil {
		return err
	}
	rerr := v.rejection(first.Result())
	var se *stdlib.ScriptError
	if errors.As(rerr, &se) {
		se.Message = "Uncaught (in promise) " + se.Message
		if se.File == "" {
			se.File = file
		}
	}
	return rerr
}

// trackRejection is goja's host promise rejection tracker.
func (v *VM) trackRejection(p *goja.Promise, op goja.PromiseRejectionOperation) {
	if !v.tracking {
		return
	}
	switch op {
	case goja.PromiseRejectionReject:
		v.rejects++
		v.rejected[p] = v.rejects
	case goja.PromiseRejectionHandle:
		delete(v.rejected, p)
	}
}

// rejection is the error a promise was rejected with, as a script error located where the
// error object was created (an Error keeps the stack of its creation).
func (v *VM) rejection(reason goja.Value) error {
	_, err := v.thrower(goja.Undefined(), reason)
	if err == nil {
		return errors.New("promise rejected")
	}
	return v.scriptError(err)
}

// settled waits for what a test returned: nothing for a value that is not a promise; the jobs
// have run when control came back to the host, so a promise is settled now or never.
func (v *VM) settled(res goja.Value) error {
	o, ok := res.(*goja.Object)
	if !ok {
		return nil
	}
	p, ok := o.Export().(*goja.Promise)
	if !ok {
		return nil
	}
	switch p.State() {
	case goja.PromiseStateRejected:
		delete(v.rejected, p) // the runner handles it
		return v.rejection(p.Result())
	case goja.PromiseStatePending:
		return ErrNeverSettled
	}
	return nil
}

// Eval evaluates REPL input in the global scope and returns its value as a Go value.
// Top-level const and let declare with var, so a name can be declared again on a later line,
// as in the Node console.
func (v *VM) Eval(ctx context.Context, name, src string) (any, error) {
	prg, err := compileScript(name, redeclarable(src))
	if err != nil {
		return nil, err
	}
	stop := v.watch(ctx)
	defer stop()
	v.track()
	res, err := v.rt.RunProgram(prg)
	if err := v.untracked(name, v.scriptError(err)); err != nil {
		return nil, err
	}
	return v.Export(res)
}

// Incomplete reports whether src is a prefix of valid code (the REPL then asks for more).
func Incomplete(src string) bool {
	_, err := goja.Parse("repl", src, parseOpts...)
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "Unexpected end of input") || strings.Contains(msg, "Unterminated template")
}

// Globals lists the names of the global variables (for completion).
func (v *VM) Globals() []string { return v.global.Keys() }

// Members lists the properties of the value an expression names, own and inherited (for
// completion); nil when it does not evaluate to an object. expr must be a dotted name path.
func (v *VM) Members(expr string) []string {
	var cur goja.Value = v.global
	for _, part := range strings.Split(expr, ".") {
		o, ok := cur.(*goja.Object)
		if !ok || part == "" {
			return nil
		}
		cur = o.Get(part)
	}
	o, ok := cur.(*goja.Object)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for p := o; p != nil; p = p.Prototype() {
		if p == v.rt.NewObject().Prototype() {
			break // skip Object.prototype noise
		}
		for _, k := range p.GetOwnPropertyNames() {
			if !seen[k] && !strings.HasPrefix(k, "__") {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

func (v *VM) requireStd(name string) goja.Value {
	if val, ok := v.req[name]; ok {
		return val
	}
	m, ok := v.mods[name]
	if !ok {
		panic(v.throw(fmt.Errorf("require(%q): no such module (available: %s; fs and http must be granted in the configuration; files are required by a relative path, ./%s.js)", name, strings.Join(stdlib.Keys(v.mods), ", "), name)))
	}
	val := v.ToValue(m.Members)
	for _, x := range m.Exact { // (assert's comparisons see Maps, Dates, undefined, …)
		if f, ok := m.Members[x].(stdlib.Func); ok {
			_ = val.(*goja.Object).Set(x, v.nativeExact(f))
		}
	}
	v.req[name] = val
	return val
}

func (v *VM) write(w io.Writer, args []goja.Value) {
	parts := make([]string, len(args))
	for i, a := range args {
		if s, ok := a.Export().(string); ok {
			parts[i] = s
			continue
		}
		x, err := v.Export(a)
		if err != nil {
			parts[i] = a.String()
			continue
		}
		parts[i] = stdlib.Format(x)
	}
	fmt.Fprintln(w, strings.Join(parts, " "))
}

// ToValue converts a Go value (see package stdlib) to a JS value. Objects and maps are copied;
// Funcs become native functions; Iterators become iterables.
func (v *VM) ToValue(x any) goja.Value {
	switch t := x.(type) {
	case nil:
		return goja.Null()
	case goja.Value:
		return t
	case stdlib.Func:
		return v.rt.ToValue(v.native(t))
	case stdlib.Callable:
		return v.rt.ToValue(v.native(func(ctx context.Context, a stdlib.Args) (any, error) { return t(ctx, a...) }))
	case *stdlib.Module:
		return v.ToValue(t.Members)
	case stdlib.FuncObject:
		o := v.rt.ToValue(v.native(t.Call)).ToObject(v.rt)
		for _, k := range stdlib.Keys(t.Members) {
			_ = o.Set(k, v.ToValue(t.Members[k]))
		}
		return o
	case stdlib.Object:
		o := v.rt.NewObject()
		for _, k := range stdlib.Keys(t) {
			_ = o.Set(k, v.ToValue(t[k]))
		}
		return o
	case map[string]any:
		o := v.rt.NewObject()
		for _, k := range stdlib.Keys(t) {
			_ = o.Set(k, v.ToValue(t[k]))
		}
		return o
	case []any:
		vals := make([]any, len(t))
		for i, e := range t {
			vals[i] = v.ToValue(e)
		}
		return v.rt.NewArray(vals...)
	case []string:
		vals := make([]any, len(t))
		for i, e := range t {
			vals[i] = e
		}
		return v.rt.NewArray(vals...)
	case json.RawMessage:
		d, err := stdlib.Unmarshal(t)
		if err != nil {
			return goja.Null()
		}
		return v.ToValue(d)
	case stdlib.Iterator:
		return v.iterator(t)
	case stdlib.Record:
		return v.rt.NewDynamicObject(&record{v: v, r: t})
	case string:
		return v.rt.ToValue(t)
	}
	return v.rt.ToValue(x)
}

// record presents a stdlib.Record as a read-only JS object, converting a field when the
// script first reads it. Composite fields are converted once, so req.args.a and req.args.b
// read the same object.
type record struct {
	v     *VM
	r     stdlib.Record
	cache map[string]goja.Value
}

func (d *record) Get(key string) goja.Value {
	if val, ok := d.cache[key]; ok {
		return val
	}
	x, ok := d.r.Field(key)
	if !ok {
		return nil
	}
	val := d.v.ToValue(x)
	if _, composite := val.(*goja.Object); composite {
		if d.cache == nil {
			d.cache = map[string]goja.Value{}
		}
		d.cache[key] = val
	}
	return val
}

var recordType = reflect.TypeFor[*record]()

func (d *record) Set(string, goja.Value) bool { return false }
func (d *record) Has(key string) bool         { _, ok := d.r.Field(key); return ok }
func (d *record) Delete(string) bool          { return false }
func (d *record) Keys() []string              { return d.r.Fields() }

func (v *VM) iterator(it stdlib.Iterator) goja.Value {
	o := v.rt.NewObject()
	_ = o.Set("next", func(goja.FunctionCall) goja.Value {
		val, ok, err := it.Next(v.ctx)
		if err != nil {
			panic(v.throw(err))
		}
		res := v.rt.NewObject()
		_ = res.Set("done", !ok)
		if ok {
			_ = res.Set("value", v.ToValue(val))
		}
		return res
	})
	_ = o.SetSymbol(goja.SymIterator, func(goja.FunctionCall) goja.Value { return o })
	return o
}

// native adapts a host function. Go panics are turned into JS errors here so one faulty host
// function cannot take the process down; goja's own control-flow panics pass through.
func (v *VM) native(f stdlib.Func) func(goja.FunctionCall) goja.Value {
	return v.adapt(f, v.export)
}

// adapt is native with the conversion of the arguments given (export, or exportExact).
func (v *VM) adapt(f stdlib.Func, export func(goja.Value, int) (any, error)) func(goja.FunctionCall) goja.Value {
	return func(call goja.FunctionCall) goja.Value {
		args := make(stdlib.Args, len(call.Arguments))
		v.handed.Reset()
		for i, a := range call.Arguments {
			x, err := export(a, 0)
			if err != nil {
				panic(v.throw(err))
			}
			args[i] = x
		}
		// Host code builds from what it gets (json.encode of many references to one long
		// string): the strings handed over are charged, each time they are referenced.
		if err := v.handed.Done(v.reserve); err != nil {
			panic(v.throw(err))
		}
		res, err := callHost(f, v.ctx, args)
		if err != nil {
			panic(v.throw(err))
		}
		return v.ToValue(res)
	}
}

func callHost(f stdlib.Func, ctx context.Context, args stdlib.Args) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			switch r.(type) {
			case *goja.Exception, *goja.InterruptedError, *goja.StackOverflowError:
				panic(r)
			}
			err = fmt.Errorf("host function panicked: %v", r)
		}
	}()
	return f(ctx, args)
}

// throw makes a JS error object carrying err (so errors.As sees it when it escapes).
func (v *VM) throw(err error) goja.Value {
	var ex *goja.Exception
	if errors.As(err, &ex) { // a script error coming back through a callback: rethrow as is
		return ex.Value()
	}
	if errors.Is(err, context.Canceled) { // a host call ended by the interrupt: say why
		v.mu.Lock()
		if cause := context.Cause(v.ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		v.mu.Unlock()
	}
	o := v.rt.NewGoError(err)
	name := "Error"
	if stdlib.IsAssertion(err) {
		name = "AssertionError"
	}
	_ = o.Set("name", name)
	return o
}

// Export converts a JS value to a Go value (see package stdlib). Functions become Callables
// that must only be called on this VM's goroutine.
func (v *VM) Export(val goja.Value) (any, error) {
	v.handed.Reset()
	return v.export(val, 0)
}

func (v *VM) export(val goja.Value, depth int) (any, error) {
	if depth > 64 {
		return nil, fmt.Errorf("%w: value nested deeper than 64 levels (a cycle?)", stdlib.ErrArgument)
	}
	if val == nil || goja.IsUndefined(val) || goja.IsNull(val) {
		return nil, nil
	}
	o, ok := val.(*goja.Object)
	if !ok {
		if s, isStr := val.(goja.String); isStr {
			if err := v.handed.Add(float64(s.Length())*charBytes, v.reserve); err != nil {
				return nil, err
			}
		}
		switch x := val.Export().(type) {
		case float64:
			return stdlib.Number(x), nil
		default:
			return x, nil
		}
	}
	if fn, ok := goja.AssertFunction(val); ok {
		return stdlib.Callable(func(_ context.Context, args ...any) (any, error) {
			settle := v.settle // a test called by Call: await what it returns
			v.settle = false
			in := make([]goja.Value, len(args))
			for i, a := range args {
				in[i] = v.ToValue(a)
			}
			res, err := fn(goja.Undefined(), in...)
			if err != nil {
				return nil, v.scriptError(err)
			}
			if settle {
				return nil, v.settled(res)
			}
			return v.Export(res)
		}), nil
	}
	if o.ExportType() == recordType { // (Export itself would convert a whole array or map)
		if r, ok := o.Export().(*record); ok {
			return stdlib.RecordMap(r.r), nil
		}
	}
	if o.ClassName() == "Array" {
		n := int(o.Get("length").ToInteger())
		out := make([]any, n)
		for i := range n {
			e, err := v.export(o.Get(strconv.Itoa(i)), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	if o.ClassName() == "Error" {
		return o.String(), nil
	}
	keys := o.Keys()
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		e, err := v.export(o.Get(k), depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = e
	}
	return out, nil
}

// scriptError converts goja errors to *stdlib.ScriptError with the script position.
func (v *VM) scriptError(err error) error {
	if err == nil {
		return nil
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		se := fromStack(ie.Stack(), "interrupted")
		if cause, ok := ie.Value().(error); ok {
			se.Message = cause.Error()
			se.Cause = cause
		}
		return se
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		msg := "uncaught exception"
		if ex.Value() != nil {
			msg = ex.Value().String()
			if o, ok := ex.Value().(*goja.Object); ok {
				if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
					name := "Error"
					if n := o.Get("name"); n != nil && !goja.IsUndefined(n) {
						name = n.String()
					}
					msg = name + ": " + m.String()
					if name == "AssertionError" {
						msg = m.String()
					}
				}
			}
		}
		se := fromStack(ex.Stack(), msg)
		se.Cause = ex.Unwrap()
		return se
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		se := fromStack(so.Stack(), fmt.Sprintf("%s (more than %d nested calls)", guard.ErrStackLimit, v.opts.MaxCallStack))
		se.Cause = guard.ErrStackLimit
		return se
	}
	return err
}

func fromStack(stack []goja.StackFrame, msg string) *stdlib.ScriptError {
	se := &stdlib.ScriptError{Message: msg}
	for i := range stack {
		f := &stack[i]
		if f.SrcName() == "<native>" {
			if name := f.FuncName(); name != "<native>" && name != "" && !strings.ContainsAny(name, "/(*") {
				se.Stack = append(se.Stack, "at "+name+" (native)")
			}
			continue
		}
		p := f.Position()
		if se.File == "" && p.Filename != "buffers.js" {
			se.File, se.Line = p.Filename, p.Line
		}
		name := f.FuncName()
		if name == "" || name == "<anonymous>" {
			name = "<anonymous>"
		}
		se.Stack = append(se.Stack, fmt.Sprintf("at %s (%s:%d:%d)", name, p.Filename, p.Line, p.Column))
	}
	se.Stack = stdlib.ElideStack(se.Stack)
	return se
}

var parseLine = regexp.MustCompile(`Line (\d+):(\d+) (.*?)(?: \(and \d+ more errors\))?$`)

// syntaxError places a parse or compile error in the script.
func syntaxError(name string, err error) error {
	var list parser.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		return &stdlib.ScriptError{Message: fmt.Sprintf("SyntaxError: %s (column %d)", list[0].Message, list[0].Position.Column), File: name, Line: list[0].Position.Line}
	}
	var ce *goja.CompilerSyntaxError
	if errors.As(err, &ce) {
		if ce.File != nil {
			pos := ce.File.Position(ce.Offset)
			return &stdlib.ScriptError{Message: fmt.Sprintf("SyntaxError: %s (column %d)", ce.Message, pos.Column), File: name, Line: pos.Line}
		}
		if m := parseLine.FindStringSubmatch(ce.Message); m != nil {
			n, _ := strconv.Atoi(m[1])
			return &stdlib.ScriptError{Message: fmt.Sprintf("SyntaxError: %s (column %s)", m[3], m[2]), File: name, Line: n}
		}
	}
	return &stdlib.ScriptError{Message: err.Error(), File: name}
}

// redeclarable turns the const and let keywords of src's top-level declarations into var
// (padded, so positions stay); src that does not parse is returned as is.
func redeclarable(src string) string {
	prg, err := goja.Parse("repl", src, parseOpts...)
	if err != nil {
		return src
	}
	b := []byte(src)
	base := prg.File.Base()
	for _, st := range prg.Body {
		d, ok := st.(*ast.LexicalDeclaration)
		if !ok {
			continue
		}
		at := int(d.Idx) - base
		for _, kw := range []string{"const", "let"} {
			if at >= 0 && at+len(kw) <= len(b) && string(b[at:at+len(kw)]) == kw {
				copy(b[at:], "var"+strings.Repeat(" ", len(kw)-3))
			}
		}
	}
	return string(b)
}
