// Package lua binds scripts written in Lua 5.1 (gopher-lua) to the host: stdlib modules
// through require, print, policy files with their hooks, and interrupts. Only the base,
// string, table, math and coroutine libraries are opened, minus everything that loads files;
// there is no os, io, debug or package library. A VM belongs to the goroutine that created
// it; only Interrupt may be called from elsewhere.
//
// The package knows nothing about the engine: it converts stdlib values to Lua values and
// back, and leaves pooling, deadlines and decision checking to the scripting package.
package lua

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"

	"github.com/hermes-go/hermes/scripting/internal/guard"
	"github.com/hermes-go/hermes/stdlib"
)

// Options configures a VM.
type Options struct {
	// Modules are offered through require "name".
	Modules []*stdlib.Module
	// Globals are set as global variables (the REPL preloads the API this way).
	Globals map[string]any
	// Stdout receives print; Stderr is unused by Lua itself but kept for symmetry. Nil discards.
	Stdout, Stderr io.Writer
	// Root is the directory require "name" loads name.lua (or name/init.lua) from when no
	// standard module has that name; dots separate directories. Files are confined to it;
	// "" allows none.
	Root string
	// MaxCallStack bounds the call depth (default 1000).
	MaxCallStack int
	// MaxString caps what one native call or .. may build (string.rep, format, gsub,
	// table.concat, ...), in bytes; default 64 MiB. Going over aborts the run like the memory
	// limit.
	MaxString int
}

// VM is one Lua state with the host bindings installed.
type VM struct {
	L    *lua.LState
	opts Options
	mods map[string]*stdlib.Module
	req  map[string]lua.LValue
	// loading marks the file modules being loaded (a cycle is an error).
	loading map[string]bool
	// The state always runs under vctx; Interrupt cancels it, and host functions receive it,
	// so one blocked in I/O or a sleep returns as the script stops. Reset installs a fresh one.
	mu     sync.Mutex
	vctx   context.Context
	cancel context.CancelCauseFunc

	// meta is the metatable shared by every Record userdata.
	meta *lua.LTable

	// hostErr is the last error a host function raised, so it can be recovered (errors.As)
	// when it escapes the script.
	hostErr error

	meter   guard.Meter // the run's memory budget; nil: only MaxString
	tripped error       // the limit the run hit (under mu)
	handed  guard.Tally // string bytes of the value being exported
}

// removed are the base functions that reach files or internals.
var removed = []string{"dofile", "loadfile", "require", "module", "collectgarbage", "_printregs", "newproxy", "print"}

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
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: o.MaxCallStack, RegistryMaxSize: 1 << 20, MinimizeStackMemory: true})
	v := &VM{L: L, opts: o, mods: map[string]*stdlib.Module{}, req: map[string]lua.LValue{}, loading: map[string]bool{}}
	for _, m := range o.Modules {
		v.mods[m.Name] = m
	}
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}, {lua.CoroutineLibName, lua.OpenCoroutine}} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			L.Close()
			return nil, fmt.Errorf("lua: open %s: %w", lib.name, err)
		}
	}
	for _, name := range removed {
		L.SetGlobal(name, lua.LNil)
	}
	v.installLimits()
	L.SetGlobal("require", L.NewFunction(v.require))
	L.SetGlobal("print", L.NewFunction(func(L *lua.LState) int {
		parts := make([]string, L.GetTop())
		for i := range parts {
			lv := L.Get(i + 1)
			if s, ok := lv.(lua.LString); ok {
				parts[i] = string(s)
				continue
			}
			x, err := v.Export(lv)
			if err != nil {
				parts[i] = lv.String()
				continue
			}
			parts[i] = stdlib.Format(x)
		}
		fmt.Fprintln(v.opts.Stdout, strings.Join(parts, " "))
		return 0
	}))
	for name, g := range o.Globals {
		L.SetGlobal(name, v.ToValue(g))
	}
	v.vctx, v.cancel = context.WithCancelCause(context.Background())
	L.SetContext(v.vctx)
	return v, nil
}

// Close releases the state.
func (v *VM) Close() {
	v.cancel(context.Canceled)
	v.L.Close()
}

// Interrupt stops the code running in the VM at its next instruction; the run fails with an
// error wrapping reason. It is the one method safe from any goroutine.
func (v *VM) Interrupt(reason error) {
	v.mu.Lock()
	v.cancel(reason)
	v.mu.Unlock()
}

// Reset clears a past interrupt so the VM can run again (the REPL after Ctrl-C).
func (v *VM) Reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.tripped = nil
	if v.vctx.Err() != nil {
		v.vctx, v.cancel = context.WithCancelCause(context.Background())
		v.L.SetContext(v.vctx)
	}
}

func (v *VM) interrupted() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.vctx.Err() != nil {
		return context.Cause(v.vctx)
	}
	return nil
}

func (v *VM) watch(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() { v.Interrupt(context.Cause(ctx)) })
}

func (v *VM) require(L *lua.LState) int {
	name := L.CheckString(1)
	if val, ok := v.req[name]; ok {
		L.Push(val)
		return 1
	}
	m, ok := v.mods[name]
	if !ok {
		val, err := v.requireFile(name)
		if err != nil {
			var se *stdlib.ScriptError
			if errors.As(err, &se) {
				v.L.Error(lua.LString(se.Error()), 0)
			}
			L.RaiseError("%s", err.Error())
		}
		v.req[name] = val
		L.Push(val)
		return 1
	}
	val := v.ToValue(m.Members)
	v.req[name] = val
	L.Push(val)
	return 1
}

// ErrModule marks a file module that cannot be found or is outside the root.
var ErrModule = errors.New("module")

// requireFile loads name.lua or name/init.lua under the root (dots are directories) and
// returns what the chunk returned (true when nothing).
func (v *VM) requireFile(name string) (lua.LValue, error) {
	if v.opts.Root == "" {
		return nil, fmt.Errorf("require(%q): no such module (available: %s; fs and http must be granted in the configuration)", name, strings.Join(stdlib.Keys(v.mods), ", "))
	}
	if strings.Contains(name, "/") || strings.Contains(name, "\\") || strings.HasPrefix(name, ".") || strings.Contains(name, "..") {
		return nil, fmt.Errorf("require(%q): %w: name a module with dots (require \"lib.helper\" loads lib/helper.lua)", name, ErrModule)
	}
	root, err := filepath.EvalSymlinks(v.opts.Root)
	if err == nil {
		root, err = filepath.Abs(root)
	}
	if err != nil {
		return nil, fmt.Errorf("require(%q): %w: %v", name, ErrModule, err)
	}
	base := filepath.Join(v.opts.Root, filepath.FromSlash(strings.ReplaceAll(name, ".", "/")))
	for _, cand := range []string{base + ".lua", filepath.Join(base, "init.lua")} {
		real, err := filepath.EvalSymlinks(cand)
		if err != nil {
			continue
		}
		if real, err = filepath.Abs(real); err != nil {
			continue
		}
		if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("require(%q): %w: %s is outside the script's directory %s", name, ErrModule, cand, v.opts.Root)
		}
		if v.loading[real] {
			return nil, fmt.Errorf("require(%q): %w: a cycle (the module is still loading)", name, ErrModule)
		}
		src, err := os.ReadFile(real)
		if err != nil {
			return nil, fmt.Errorf("require(%q): %w", name, err)
		}
		proto, err := compile(cand, string(src))
		if err != nil {
			return nil, err
		}
		v.loading[real] = true
		defer delete(v.loading, real)
		top := v.L.GetTop()
		v.L.Push(v.L.NewFunctionFromProto(proto))
		v.L.Call(0, 1) // an error propagates with the module's own position
		ret := v.L.Get(-1)
		v.L.SetTop(top)
		if ret == lua.LNil {
			ret = lua.LTrue
		}
		return ret, nil
	}
	return nil, fmt.Errorf("require(%q): no such module (standard: %s; no file %s.lua or %s)", name, strings.Join(stdlib.Keys(v.mods), ", "), base, filepath.Join(base, "init.lua"))
}

func compile(name, src string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	rewriteConcat(chunk)
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	return proto, nil
}

// compileREPL compiles REPL statements with their top-level locals made globals.
func compileREPL(name, src string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	for i, st := range chunk {
		switch x := st.(type) {
		case *ast.LocalAssignStmt:
			as := &ast.AssignStmt{Rhs: x.Exprs}
			for _, n := range x.Names {
				id := &ast.IdentExpr{Value: n}
				id.SetLine(x.Line())
				as.Lhs = append(as.Lhs, id)
			}
			if len(as.Rhs) == 0 {
				nilExpr := &ast.NilExpr{}
				nilExpr.SetLine(x.Line())
				as.Rhs = []ast.Expr{nilExpr}
			}
			as.SetLine(x.Line())
			as.SetLastLine(x.LastLine())
			chunk[i] = as
		}
	}
	rewriteConcat(chunk)
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	return proto, nil
}

// RunFile runs a script. ctx ending interrupts it.
func (v *VM) RunFile(ctx context.Context, name, src string) error {
	proto, err := compile(name, src)
	if err != nil {
		return err
	}
	stop := v.watch(ctx)
	defer stop()
	v.L.Push(v.L.NewFunctionFromProto(proto))
	return v.scriptError(v.L.PCall(0, 0, nil))
}

// Call runs a script function this VM handed to the host (a Callable), ctx ending
// interrupting it; the test runner calls each registered test this way.
func (v *VM) Call(ctx context.Context, fn stdlib.Callable) error {
	stop := v.watch(ctx)
	defer stop()
	_, err := fn(v.vctx)
	return err
}

// Eval evaluates REPL input: as an expression when it is one (also "= expr", as in the lua
// console), else as statements. Top-level locals become globals, so they persist to the next
// input as they would further down one file.
func (v *VM) Eval(ctx context.Context, name, src string) (any, error) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(src), "="); ok {
		src = rest
	}
	proto, err := compile(name, "return "+src)
	if err != nil {
		if proto, err = compileREPL(name, src); err != nil {
			return nil, err
		}
	}
	stop := v.watch(ctx)
	defer stop()
	top := v.L.GetTop()
	v.L.Push(v.L.NewFunctionFromProto(proto))
	if err := v.L.PCall(0, lua.MultRet, nil); err != nil {
		return nil, v.scriptError(err)
	}
	n := v.L.GetTop() - top
	defer v.L.SetTop(top)
	switch n {
	case 0:
		return nil, nil
	case 1:
		return v.Export(v.L.Get(-1))
	}
	out := make([]any, n)
	for i := range n {
		x, err := v.Export(v.L.Get(top + 1 + i))
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// Incomplete reports whether src is a prefix of valid code (the REPL then asks for more).
func Incomplete(src string) bool {
	if _, err := parse.Parse(strings.NewReader("return "+src), "repl"); err == nil {
		return false // an expression
	}
	_, err := parse.Parse(strings.NewReader(src), "repl")
	var pe *parse.Error
	if errors.As(err, &pe) {
		return pe.Pos.Line == parse.EOF || strings.Contains(pe.Message, "unterminated")
	}
	return false
}

// Globals lists the global names (for completion).
func (v *VM) Globals() []string {
	var out []string
	v.L.G.Global.ForEach(func(k, _ lua.LValue) {
		if s, ok := k.(lua.LString); ok && !strings.HasPrefix(string(s), "_") {
			out = append(out, string(s))
		}
	})
	return out
}

// Members lists the keys of the table a dotted name path names (for completion).
func (v *VM) Members(expr string) []string {
	var cur lua.LValue = v.L.G.Global
	for _, part := range strings.Split(expr, ".") {
		t, ok := cur.(*lua.LTable)
		if !ok || part == "" {
			return nil
		}
		cur = t.RawGetString(part)
	}
	t, ok := cur.(*lua.LTable)
	if !ok {
		return nil
	}
	var out []string
	t.ForEach(func(k, _ lua.LValue) {
		if s, ok := k.(lua.LString); ok {
			out = append(out, string(s))
		}
	})
	return out
}

// ToValue converts a Go value (see package stdlib) to a Lua value. Objects become tables whose
// functions accept both obj.f(x) and obj:f(x).
func (v *VM) ToValue(x any) lua.LValue {
	L := v.L
	switch t := x.(type) {
	case nil:
		return lua.LNil
	case lua.LValue:
		return t
	case bool:
		return lua.LBool(t)
	case string:
		return lua.LString(t)
	case stdlib.Func:
		return L.NewFunction(v.native(t, nil))
	case stdlib.Callable:
		return L.NewFunction(v.native(func(ctx context.Context, a stdlib.Args) (any, error) { return t(ctx, a...) }, nil))
	case *stdlib.Module:
		return v.ToValue(t.Members)
	case stdlib.FuncObject:
		tb := v.ToValue(t.Members).(*lua.LTable)
		mt := L.CreateTable(0, 1)
		mt.RawSetString("__call", L.NewFunction(v.native(t.Call, tb))) // t(x) calls __call(t, x)
		L.SetMetatable(tb, mt)
		return tb
	case stdlib.Object:
		tb := L.CreateTable(0, len(t))
		for _, k := range stdlib.Keys(t) {
			if f, ok := t[k].(stdlib.Func); ok {
				tb.RawSetString(k, L.NewFunction(v.native(f, tb)))
				continue
			}
			tb.RawSetString(k, v.ToValue(t[k]))
		}
		return tb
	case map[string]any:
		tb := L.CreateTable(0, len(t))
		for k, e := range t {
			tb.RawSetString(k, v.ToValue(e))
		}
		return tb
	case []any:
		tb := L.CreateTable(len(t), 0)
		for _, e := range t {
			tb.Append(v.ToValue(e))
		}
		return tb
	case []string:
		tb := L.CreateTable(len(t), 0)
		for _, e := range t {
			tb.Append(lua.LString(e))
		}
		return tb
	case json.RawMessage:
		d, err := stdlib.Unmarshal(t)
		if err != nil {
			return lua.LNil
		}
		return v.ToValue(d)
	case stdlib.Record:
		ud := L.NewUserData()
		ud.Value = t
		L.SetMetatable(ud, v.recordMeta())
		return ud
	case stdlib.Iterator:
		return L.NewFunction(func(L *lua.LState) int {
			val, ok, err := t.Next(v.vctx)
			if err != nil {
				v.raise(err)
			}
			if !ok {
				L.Push(lua.LNil)
				return 1
			}
			L.Push(v.ToValue(val))
			return 1
		})
	}
	if f, ok := stdlib.ToFloat(x); ok {
		return lua.LNumber(f)
	}
	return lua.LString(fmt.Sprint(x))
}

// recordMeta makes Records read like tables: req.tool, req.args.path; they are read-only
// (assigning a field is an error) and json.encode / print show every field.
func (v *VM) recordMeta() *lua.LTable {
	if v.meta != nil {
		return v.meta
	}
	L := v.L
	m := L.NewTable()
	m.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		r := L.CheckUserData(1).Value.(stdlib.Record)
		x, ok := r.Field(L.CheckString(2))
		if !ok {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(v.ToValue(x))
		return 1
	}))
	m.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("cannot set %q: hook requests are read-only (return a decision instead)", L.CheckString(2))
		return 0
	}))
	m.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString(stdlib.Format(L.CheckUserData(1).Value)))
		return 1
	}))
	v.meta = m
	return m
}

// native adapts a host function; self, when set, is dropped from the arguments so obj:f(x)
// and obj.f(x) both work.
func (v *VM) native(f stdlib.Func, self *lua.LTable) lua.LGFunction {
	return func(L *lua.LState) int {
		n := L.GetTop()
		first := 1
		if self != nil && n >= 1 && L.Get(1) == self {
			first = 2
		}
		args := make(stdlib.Args, 0, n-first+1)
		v.handed.Reset()
		for i := first; i <= n; i++ {
			x, err := v.export(L.Get(i), 0)
			if err != nil {
				v.raise(err)
			}
			args = append(args, x)
		}
		// Host code builds from what it gets (json.encode of many references to one long
		// string): the strings handed over are charged, each time they are referenced.
		if err := v.handed.Done(v.reserve); err != nil {
			v.raise(err)
		}
		res, err := callHost(f, v.vctx, args)
		if err != nil {
			v.raise(err)
		}
		L.Push(v.ToValue(res))
		return 1
	}
}

func (v *VM) raise(err error) {
	var se *stdlib.ScriptError
	if errors.As(err, &se) && se.Cause == nil { // a script error coming back through a callback
		v.L.Error(lua.LString(se.Error()), 0)
	}
	v.hostErr = err
	v.L.RaiseError("%s", err.Error())
}

func callHost(f stdlib.Func, ctx context.Context, args stdlib.Args) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("host function panicked: %v", r)
		}
	}()
	return f(ctx, args)
}

// Export converts a Lua value to a Go value (see package stdlib). A table whose keys are
// exactly 1..n becomes a list; any other table a map (an empty table is an empty map).
// Functions become Callables that must only be called on this VM's goroutine.
func (v *VM) Export(lv lua.LValue) (any, error) {
	v.handed.Reset()
	return v.export(lv, 0)
}

func (v *VM) export(lv lua.LValue, depth int) (any, error) {
	if depth > 64 {
		return nil, fmt.Errorf("%w: value nested deeper than 64 levels (a cycle?)", stdlib.ErrArgument)
	}
	switch t := lv.(type) {
	case *lua.LNilType:
		return nil, nil
	case lua.LBool:
		return bool(t), nil
	case lua.LString:
		if err := v.handed.Add(float64(len(t)), v.reserve); err != nil {
			return nil, err
		}
		return string(t), nil
	case lua.LNumber:
		return stdlib.Number(float64(t)), nil
	case *lua.LFunction:
		return stdlib.Callable(func(_ context.Context, args ...any) (any, error) {
			in := make([]lua.LValue, len(args))
			for i, a := range args {
				in[i] = v.ToValue(a)
			}
			if err := v.L.CallByParam(lua.P{Fn: t, NRet: 1, Protect: true}, in...); err != nil {
				return nil, v.scriptError(err)
			}
			ret := v.L.Get(-1)
			v.L.Pop(1)
			return v.Export(ret)
		}), nil
	case *lua.LTable:
		n := t.Len()
		count := 0
		isList := true
		t.ForEach(func(k, _ lua.LValue) {
			count++
			if num, ok := k.(lua.LNumber); !ok || float64(num) != math.Trunc(float64(num)) || num < 1 || int(num) > n {
				isList = false
			}
		})
		if count == 0 {
			return map[string]any{}, nil
		}
		if isList && count == n {
			out := make([]any, n)
			for i := 1; i <= n; i++ {
				e, err := v.export(t.RawGetInt(i), depth+1)
				if err != nil {
					return nil, err
				}
				out[i-1] = e
			}
			return out, nil
		}
		out := make(map[string]any, count)
		var err error
		t.ForEach(func(k, val lua.LValue) {
			if err != nil {
				return
			}
			var e any
			if e, err = v.export(val, depth+1); err == nil {
				out[lua.LVAsString(k)] = e
				if _, isStr := k.(lua.LString); !isStr {
					if _, isNum := k.(lua.LNumber); !isNum {
						err = fmt.Errorf("%w: table key of type %s", stdlib.ErrArgument, k.Type())
					}
				}
			}
		})
		return out, err
	}
	if ud, ok := lv.(*lua.LUserData); ok {
		if r, ok := ud.Value.(stdlib.Record); ok {
			return stdlib.RecordMap(r), nil
		}
	}
	return nil, fmt.Errorf("%w: cannot convert a Lua %s", stdlib.ErrArgument, lv.Type())
}

var (
	posRe   = regexp.MustCompile(`^(.+?):(\d+): (?s:(.*))$`)
	frameRe = regexp.MustCompile(`^(.+?):(\d+):\s*in (.*)$`)
)

// scriptError converts gopher-lua errors to *stdlib.ScriptError with the script position.
func (v *VM) scriptError(err error) error {
	if err == nil {
		return nil
	}
	var ae *lua.ApiError
	if !errors.As(err, &ae) {
		return err
	}
	se := &stdlib.ScriptError{Message: lua.LVAsString(ae.Object)}
	if ae.Object == nil || ae.Object == lua.LNil {
		se.Message = "error"
	}
	for _, l := range strings.Split(ae.StackTrace, "\n") {
		l = strings.TrimSpace(l)
		if m := frameRe.FindStringSubmatch(l); m != nil && !strings.HasPrefix(l, "[G]") {
			se.Stack = append(se.Stack, fmt.Sprintf("at %s (%s:%s)", strings.TrimSpace(m[3]), m[1], m[2]))
			if se.File == "" {
				se.File = m[1]
				se.Line, _ = strconv.Atoi(m[2])
			}
		}
	}
	if m := posRe.FindStringSubmatch(se.Message); m != nil {
		se.File, se.Message = m[1], m[3]
		se.Line, _ = strconv.Atoi(m[2])
	}
	if cause := v.interrupted(); cause != nil {
		se.Message, se.Cause = cause.Error(), cause
		return se
	}
	se.Stack = stdlib.ElideStack(se.Stack)
	if isStackOverflow(se.Message) {
		se.Message = fmt.Sprintf("%s (%s)", guard.ErrStackLimit, se.Message)
		se.Cause = guard.ErrStackLimit
		return se
	}
	if v.hostErr != nil && strings.HasSuffix(se.Message, v.hostErr.Error()) {
		se.Cause = v.hostErr
		se.Message = v.hostErr.Error()
	}
	v.hostErr = nil
	return se
}

func syntaxError(name string, err error) error {
	var pe *parse.Error
	if errors.As(err, &pe) {
		line := pe.Pos.Line
		msg := strings.TrimPrefix(strings.TrimPrefix(pe.Message, "syntax error"), ": ") // said once, below
		if msg == "" {
			msg = "unexpected symbol"
		}
		if pe.Token != "" && line != parse.EOF {
			msg = fmt.Sprintf("%s near '%s'", msg, pe.Token)
		}
		if line == parse.EOF {
			line = 0
			msg += " at end of file"
		}
		if line != 0 && pe.Pos.Column > 0 {
			msg = fmt.Sprintf("%s (column %d)", msg, pe.Pos.Column)
		}
		return &stdlib.ScriptError{Message: "syntax error: " + msg, File: name, Line: line}
	}
	var ce *lua.CompileError
	if errors.As(err, &ce) {
		return &stdlib.ScriptError{Message: "compile error: " + ce.Message, File: name, Line: ce.Line}
	}
	return &stdlib.ScriptError{Message: err.Error(), File: name}
}

// keys returns a table's string keys, sorted.
func keys(t *lua.LTable) []string {
	var out []string
	t.ForEach(func(k, _ lua.LValue) {
		if s, ok := k.(lua.LString); ok {
			out = append(out, string(s))
		}
	})
	sort.Strings(out)
	return out
}
