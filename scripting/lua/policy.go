package lua

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"

	"github.com/hermes-go/hermes/stdlib"
)

// lineVar is the global the instrumented policy writes the line of each return to, so a
// decision of the wrong shape can be reported at the line that produced it.
const lineVar = "__hermes_line"

// Program is a compiled policy file, shared by every VM of a pool.
type Program struct {
	name     string
	proto    *lua.FunctionProto
	examples []int
}

// ExampleLines are the lines where the entries of the policy's examples table begin, in
// order, when it is written as a table constructor (examples = { … }, M.examples = { … },
// return { examples = { … } }); nil otherwise.
func (p *Program) ExampleLines() []int { return p.examples }

// exampleLines finds the examples table constructor in a parsed chunk.
func exampleLines(chunk []ast.Stmt) []int {
	var list *ast.TableExpr
	named := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.IdentExpr:
			return x.Value == "examples"
		case *ast.AttrGetExpr:
			k, ok := x.Key.(*ast.StringExpr)
			return ok && k.Value == "examples"
		case *ast.StringExpr:
			return x.Value == "examples"
		}
		return false
	}
	var visit func(v reflect.Value, seen map[uintptr]bool)
	visit = func(v reflect.Value, seen map[uintptr]bool) {
		if list != nil {
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			switch x := v.Interface().(type) {
			case *ast.AssignStmt:
				for i, l := range x.Lhs {
					if t, ok := at(x.Rhs, i).(*ast.TableExpr); ok && named(l) {
						list = t
					}
				}
			case *ast.LocalAssignStmt:
				for i, n := range x.Names {
					if t, ok := at(x.Exprs, i).(*ast.TableExpr); ok && n == "examples" {
						list = t
					}
				}
			case *ast.TableExpr:
				for _, f := range x.Fields {
					if t, ok := f.Value.(*ast.TableExpr); ok && f.Key != nil && named(f.Key) {
						list = t
					}
				}
			}
			visit(v.Elem(), seen)
		case reflect.Interface:
			if !v.IsNil() {
				visit(v.Elem(), seen)
			}
		case reflect.Slice:
			for i := range v.Len() {
				visit(v.Index(i), seen)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					visit(v.Field(i), seen)
				}
			}
		}
	}
	visit(reflect.ValueOf(chunk), map[uintptr]bool{})
	if list == nil {
		return nil
	}
	var out []int
	for _, f := range list.Fields {
		if f.Key == nil { // positional entries are the list
			out = append(out, f.Value.Line())
		}
	}
	return out
}

func at(l []ast.Expr, i int) ast.Expr {
	if i < len(l) {
		return l[i]
	}
	return nil
}

// Name is the file name the policy was compiled under.
func (p *Program) Name() string { return p.name }

// CompilePolicy compiles a policy file. The file either returns a table of hooks
// (return { approval = function (req) … end }) or defines them as global functions. Every
// return statement is instrumented to record its line.
func CompilePolicy(name, src string) (*Program, error) {
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	lines := exampleLines(chunk)
	chunk = instrument(chunk)
	instrumentAll(reflect.ValueOf(chunk), map[uintptr]bool{})
	rewriteConcat(chunk)
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	return &Program{name: name, proto: proto, examples: lines}, nil
}

// instrument inserts `__hermes_line = N` before every return statement of one block.
func instrument(stmts []ast.Stmt) []ast.Stmt {
	n := 0
	for _, s := range stmts {
		if _, ok := s.(*ast.ReturnStmt); ok {
			n++
		}
	}
	if n == 0 {
		return stmts
	}
	out := make([]ast.Stmt, 0, len(stmts)+n)
	for _, s := range stmts {
		if r, ok := s.(*ast.ReturnStmt); ok {
			line := r.Line()
			id := &ast.IdentExpr{Value: lineVar}
			num := &ast.NumberExpr{Value: strconv.Itoa(line)}
			as := &ast.AssignStmt{Lhs: []ast.Expr{id}, Rhs: []ast.Expr{num}}
			for _, node := range []interface{ SetLine(int) }{id, num, as} {
				node.SetLine(line)
			}
			as.SetLastLine(line)
			out = append(out, as)
		}
		out = append(out, s)
	}
	return out
}

var stmtSlice = reflect.TypeFor[[]ast.Stmt]()

// instrumentAll applies instrument to every nested block (function bodies, loops, ifs).
func instrumentAll(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		instrumentAll(v.Elem(), seen)
	case reflect.Interface:
		if !v.IsNil() {
			instrumentAll(v.Elem(), seen)
		}
	case reflect.Slice:
		for i := range v.Len() {
			instrumentAll(v.Index(i), seen)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				continue
			}
			if f.Type() == stmtSlice && f.CanSet() {
				f.Set(reflect.ValueOf(instrument(f.Interface().([]ast.Stmt))))
			}
			instrumentAll(f, seen)
		}
	}
}

// Policy is a policy program loaded into one VM: its hook functions and other exports.
type Policy struct {
	vm      *VM
	exports *lua.LTable
	fns     map[string]*lua.LFunction
	globals *lua.LTable
}

// LoadPolicy runs the policy chunk in this VM and collects its hooks: the returned table, or
// the globals when the chunk returns nothing.
func (v *VM) LoadPolicy(ctx context.Context, p *Program) (*Policy, error) {
	stop := v.watch(ctx)
	defer stop()
	L := v.L
	L.SetGlobal(lineVar, lua.LNumber(0))
	top := L.GetTop()
	L.Push(L.NewFunctionFromProto(p.proto))
	if err := L.PCall(0, 1, nil); err != nil {
		return nil, v.scriptError(err)
	}
	ret := L.Get(-1)
	L.SetTop(top)
	exports, ok := ret.(*lua.LTable)
	switch {
	case ret == lua.LNil:
		exports = L.G.Global
	case !ok:
		return nil, fmt.Errorf("%s: the policy chunk returned a %s (want a table of hooks, or nothing and global functions)", p.name, ret.Type())
	}
	pol := &Policy{vm: v, exports: exports, fns: map[string]*lua.LFunction{}, globals: L.G.Global}
	for _, k := range keys(exports) {
		if f, ok := exports.RawGetString(k).(*lua.LFunction); ok {
			pol.fns[k] = f
		}
	}
	return pol, nil
}

// Has reports whether the policy defines a function named hook.
func (p *Policy) Has(hook string) bool { _, ok := p.fns[hook]; return ok }

// Functions lists the names of the functions the policy defines (returned, or global).
func (p *Policy) Functions() []string { return stdlib.Keys(p.fns) }

// Export returns a non-function export (such as examples) as a Go value; nil when absent.
func (p *Policy) Export(name string) (any, error) {
	val := p.exports.RawGetString(name)
	if _, isFn := val.(*lua.LFunction); isFn {
		return nil, nil
	}
	return p.vm.Export(val)
}

// Call runs hook with in (converted to a fresh table) and returns the result as a Go value,
// plus the line of the last return statement executed (0 when none ran).
func (p *Policy) Call(ctx context.Context, hook string, in any) (any, int, error) {
	fn, ok := p.fns[hook]
	if !ok {
		return nil, 0, fmt.Errorf("no hook %q", hook)
	}
	v := p.vm
	L := v.L
	p.globals.RawSetString(lineVar, lua.LNumber(0))
	err := L.CallByParam(lua.P{Fn: fn, NRet: 1, Protect: true}, v.ToValue(in))
	line := 0
	if n, ok := p.globals.RawGetString(lineVar).(lua.LNumber); ok {
		line = int(n)
	}
	if err != nil {
		return nil, line, v.scriptError(err)
	}
	ret := L.Get(-1)
	L.Pop(1)
	out, err := v.Export(ret)
	return out, line, err
}
