package js

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"

	"github.com/hermes-go/hermes/stdlib"
)

// lineVar is the global the instrumented policy writes the line of each return to, so a
// decision of the wrong shape can be reported at the line that produced it.
const lineVar = "__hermes_line"

// Program is a compiled policy file, shared by every VM of a pool.
type Program struct {
	name     string
	prg      *goja.Program
	examples []int
}

// ExampleLines are the lines where the elements of the policy's examples list begin, in
// order, when the list is written as a literal (export const examples = [ … ],
// module.exports = { examples: [ … ] }, exports.examples = [ … ]); nil otherwise.
func (p *Program) ExampleLines() []int { return p.examples }

// exampleLines finds the examples list literal in a parsed policy.
func exampleLines(prg *ast.Program) []int {
	f := prg.File
	var list *ast.ArrayLiteral
	named := func(e ast.Expression) bool {
		switch x := e.(type) {
		case *ast.Identifier:
			return x.Name == "examples"
		case *ast.DotExpression:
			return x.Identifier.Name == "examples"
		case *ast.StringLiteral:
			return x.Value.String() == "examples"
		}
		return false
	}
	walk(reflect.ValueOf(prg), map[uintptr]bool{}, func(n any) {
		if list != nil {
			return
		}
		var target ast.Expression
		var val ast.Expression
		switch x := n.(type) {
		case *ast.Binding:
			if id, ok := x.Target.(*ast.Identifier); ok {
				target, val = id, x.Initializer
			}
		case *ast.PropertyKeyed:
			target, val = x.Key, x.Value
		case *ast.AssignExpression:
			target, val = x.Left, x.Right
		}
		if arr, ok := val.(*ast.ArrayLiteral); ok && target != nil && named(target) {
			list = arr
		}
	})
	if list == nil {
		return nil
	}
	out := make([]int, len(list.Value))
	for i, e := range list.Value {
		if e != nil {
			out[i] = f.Position(int(e.Idx0()) - f.Base()).Line
		}
	}
	return out
}

// Name is the file name the policy was compiled under.
func (p *Program) Name() string { return p.name }

var (
	exportLine = regexp.MustCompile(`^([ \t]*)export[ \t]+`)
	exportDecl = regexp.MustCompile(`^(?:async[ \t]+)?(?:function[ \t]*\*?|class|const|let|var)[ \t]*([A-Za-z_$][\w$]*)`)
	exportList = regexp.MustCompile(`^\{([^}]*)\}[ \t]*;?`)
	ident      = regexp.MustCompile(`^[A-Za-z_$][\w$]*$`)
)

// CompilePolicy compiles a policy file. The file is a CommonJS module (exports.approval = …,
// module.exports = {…}), and may also use `export function name`, `export const name =`,
// `export default {…}` and `export { a, b }` at the start of a line: goja has no ES modules,
// so those statements are rewritten to CommonJS before compiling, keeping every line where it
// was. Every return statement (and arrow-function expression body) is instrumented to record
// its line.
func CompilePolicy(name, src string) (*Program, error) {
	smap := ""
	if IsTypeScript(name) { // types stripped by esbuild; the source map keeps the .ts lines
		code, err := Transform(name, src)
		if err != nil {
			return nil, err
		}
		src = code
		if i := strings.LastIndex(code, "\n//# sourceMappingURL="); i >= 0 {
			src, smap = code[:i], code[i:]
		}
	}
	wrapped := wrapModule(src) + smap
	parsed, err := goja.Parse(name, wrapped, parseOpts...)
	if err != nil {
		// The file as written places the error better (a stray brace closes the wrapper).
		if body, _ := rewriteExports(src); body != "" {
			if _, rawErr := goja.Parse(name, body, parseOpts...); rawErr != nil {
				err = rawErr
			}
		}
		return nil, syntaxError(name, err)
	}
	if err := checkConstructs(parsed); err != nil {
		return nil, err
	}
	// Returns are instrumented in the text (so positions stay those of the file), then
	// concatenations in the tree of the result.
	instrumented, err := goja.Parse(name, applyEdits(wrapped, returnEdits(parsed, wrapped)), parseOpts...)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	countConcat(instrumented)
	prg, err := goja.CompileAST(instrumented, false)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	return &Program{name: name, prg: prg, examples: exampleLines(parsed)}, nil
}

// wrapModule rewrites exports and wraps the module in a CommonJS function. The wrapper starts
// on the first line, so line numbers stay those of the file.
func wrapModule(src string) string {
	body, exported := rewriteExports(src)
	var tail strings.Builder
	for _, n := range exported {
		fmt.Fprintf(&tail, "exports[%q] = %s;", n[1], n[0])
	}
	return "(function (exports, require, module) {" + body + "\n;" + tail.String() + "\n})"
}

// rewriteExports turns ES export statements that begin a line into CommonJS without moving
// any line, and returns the (local, exported) names to assign at the end of the module.
func rewriteExports(src string) (string, [][2]string) {
	var names [][2]string
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		m := exportLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		rest := l[len(m[0]):]
		blank := m[1] + strings.Repeat(" ", len(m[0])-len(m[1]))
		switch {
		case strings.HasPrefix(rest, "default ") || strings.HasPrefix(rest, "default\t"):
			lines[i] = m[1] + "module.exports = " + strings.TrimLeft(rest[len("default"):], " \t")
		case exportList.MatchString(rest):
			sub := exportList.FindStringSubmatch(rest)
			for _, n := range strings.Split(sub[1], ",") {
				local, as, renamed := strings.Cut(strings.TrimSpace(n), " as ")
				local, as = strings.TrimSpace(local), strings.TrimSpace(as)
				if !renamed {
					as = local
				}
				if ident.MatchString(local) && ident.MatchString(as) {
					names = append(names, [2]string{local, as})
				}
			}
			lines[i] = blank + strings.Repeat(" ", len(sub[0])) + rest[len(sub[0]):]
		case exportDecl.MatchString(rest):
			n := exportDecl.FindStringSubmatch(rest)[1]
			names = append(names, [2]string{n, n})
			lines[i] = blank + rest
		}
	}
	return strings.Join(lines, "\n"), names
}

// returnEdits rewrites `return X` to `return (__hermes_line = N, X)` and arrow bodies
// likewise. Insertions never add a newline.
func returnEdits(prg *ast.Program, src string) []edit {
	var edits []edit
	f := prg.File
	end := newEnds(src, f.Base())
	off := func(i file.Idx) int { return int(i) - f.Base() }
	line := func(i file.Idx) int { return f.Position(int(i) - f.Base()).Line }
	walk(reflect.ValueOf(prg), map[uintptr]bool{}, func(n any) {
		switch x := n.(type) {
		case *ast.ReturnStatement:
			if x.Argument == nil {
				edits = append(edits, edit{off(x.Return) + len("return"), fmt.Sprintf(" (%s = %d, undefined)", lineVar, line(x.Return))})
				return
			}
			// The argument starts right after the keyword: its Idx0 may be inside a paren
			// that belongs to a part of it, as in `return (a)++`.
			edits = append(edits, edit{exprStart(src, off(x.Return)+len("return"), off(x.Argument.Idx0())), fmt.Sprintf("(%s = %d, ", lineVar, line(x.Return))}, edit{end.of(x.Argument), ")"})
		case *ast.ArrowFunctionLiteral:
			if b, ok := x.Body.(*ast.ExpressionBody); ok {
				start := off(b.Idx0())
				if arrow := strings.LastIndex(src[:min(start, len(src))], "=>"); arrow >= 0 {
					start = exprStart(src, arrow+len("=>"), start)
				}
				edits = append(edits, edit{start, fmt.Sprintf("(%s = %d, ", lineVar, line(b.Idx0()))}, edit{end.of(b.Expression), ")"})
			}
		}
	})
	return edits
}

// exprStart is where an expression whose first token is at idx0 starts when it follows the
// token ending at from: from moved over blanks and opening parens, if only those lie between
// (else idx0).
func exprStart(src string, from, idx0 int) int {
	if from > idx0 || idx0 > len(src) {
		return idx0
	}
	for i := from; i < idx0; i++ {
		switch src[i] {
		case ' ', '\t', '\n', '\r', '(':
		default:
			return idx0
		}
	}
	for from < idx0 && (src[from] == ' ' || src[from] == '\t' || src[from] == '\n' || src[from] == '\r') {
		from++
	}
	return from
}

// walk visits every AST node reachable from v (pointers, slices, interfaces, struct fields).
func walk(v reflect.Value, seen map[uintptr]bool, visit func(any)) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		if _, isFile := v.Interface().(*file.File); isFile {
			return
		}
		visit(v.Interface())
		walk(v.Elem(), seen, visit)
	case reflect.Interface:
		if !v.IsNil() {
			walk(v.Elem(), seen, visit)
		}
	case reflect.Slice:
		for i := range v.Len() {
			walk(v.Index(i), seen, visit)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walk(v.Field(i), seen, visit)
			}
		}
	}
}

// ErrAsyncHook: a hook returned a Promise. Hooks decide synchronously; there is no event loop
// to settle a promise.
var ErrAsyncHook = errors.New("hooks must be synchronous")

// Policy is a policy program loaded into one VM: its hook functions and other exports.
type Policy struct {
	vm      *VM
	exports *goja.Object
	fns     map[string]goja.Callable
	async   []string // exported async functions
	zero    goja.Value
}

// LoadPolicy runs the policy module in this VM and collects its exports.
func (v *VM) LoadPolicy(ctx context.Context, p *Program) (*Policy, error) {
	stop := v.watch(ctx)
	defer stop()
	if err := v.global.Set(lineVar, 0); err != nil {
		return nil, err
	}
	wrapper, err := v.rt.RunProgram(p.prg)
	if err != nil {
		return nil, v.scriptError(err)
	}
	fn, _ := goja.AssertFunction(wrapper)
	exports := v.rt.NewObject()
	module := v.rt.NewObject()
	_ = module.Set("exports", exports)
	if _, err := fn(goja.Undefined(), exports, v.rt.Get("require"), module); err != nil {
		return nil, v.scriptError(err)
	}
	ex, ok := module.Get("exports").(*goja.Object)
	if !ok {
		return nil, fmt.Errorf("%s: module.exports is not an object", p.name)
	}
	pol := &Policy{vm: v, exports: ex, fns: map[string]goja.Callable{}, zero: v.rt.ToValue(0)}
	asyncProto := v.asyncFunctionPrototype()
	for _, k := range ex.Keys() {
		if f, ok := goja.AssertFunction(ex.Get(k)); ok {
			pol.fns[k] = f
			if o, ok := ex.Get(k).(*goja.Object); ok && (asyncProto != nil && o.Prototype() == asyncProto || asyncMethod.MatchString(o.String())) {
				pol.async = append(pol.async, k)
			}
		}
	}
	return pol, nil
}

// asyncMethod matches the source of an async method ({ async approval(req) {…} }), which goja
// gives Function.prototype instead of AsyncFunction.prototype.
var asyncMethod = regexp.MustCompile(`^async\s`)

// asyncFunctionPrototype is the prototype every async function has (nil if goja has none).
func (v *VM) asyncFunctionPrototype() *goja.Object {
	f, err := v.rt.RunString("(async function () {})")
	if err != nil {
		return nil
	}
	if o, ok := f.(*goja.Object); ok {
		return o.Prototype()
	}
	return nil
}

// Async lists the exported functions declared async: they return a Promise, never a decision.
func (p *Policy) Async() []string { return p.async }

// Has reports whether the policy exports a function named hook.
func (p *Policy) Has(hook string) bool { _, ok := p.fns[hook]; return ok }

// Functions lists the names of the exported functions.
func (p *Policy) Functions() []string { return stdlib.Keys(p.fns) }

// Export returns a non-function export (such as examples) as a Go value; nil when absent.
func (p *Policy) Export(name string) (any, error) {
	val := p.exports.Get(name)
	if _, isFn := goja.AssertFunction(val); isFn {
		return nil, nil
	}
	return p.vm.Export(val)
}

// Call runs hook with in (a map or other Go value, handed to the script without copying: it
// is the caller's, made for this call) and returns the result as a Go value, plus the line of the last return statement
// executed (0 when none ran). Interrupting the VM is the caller's business (see VM.Interrupt).
func (p *Policy) Call(ctx context.Context, hook string, in any) (any, int, error) {
	fn, ok := p.fns[hook]
	if !ok {
		return nil, 0, fmt.Errorf("no hook %q", hook)
	}
	v := p.vm
	_ = v.global.Set(lineVar, p.zero)
	res, err := fn(goja.Undefined(), v.ToValue(in))
	line := int(v.global.Get(lineVar).ToInteger())
	if err != nil {
		return nil, line, v.scriptError(err)
	}
	if _, ok := res.Export().(*goja.Promise); ok { // (exported, it would be an empty object)
		return nil, line, fmt.Errorf("%w (%s returned a Promise)", ErrAsyncHook, hook)
	}
	out, err := v.Export(res)
	if err != nil {
		return nil, line, err
	}
	return out, line, nil
}
