package js

import (
	"errors"
	"reflect"
	"sort"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
	"github.com/dop251/goja/token"

	"github.com/hermes-go/hermes/stdlib"
)

// Concatenation in the interpreter (a + b, a += b, template literals) builds a string in one
// instruction, which no native sees. Scripts are compiled with every such expression wrapped
// in a call of checkFunc, which charges a long result as soon as it exists: a loop that keeps
// doubling a string stops at the first result past the budget instead of growing until the
// heap watchdog looks. Code the rewrite cannot see would escape it, so eval and the Function
// constructors are disabled, and a script may not use the name checkFunc nor a with statement.

const checkFunc = "__hermes_chk"

// checkFrom is the string length from which a concatenation result is charged.
const checkFrom = 4096

// ErrDynamicCode is raised by eval and the Function constructors.
var ErrDynamicCode = errors.New("code generation from strings is disabled in hermes scripts")

type edit struct {
	at   int
	text string
}

// checkConstructs refuses what would get around the concatenation rewrite: the reserved name
// and with statements.
func checkConstructs(prg *ast.Program) error {
	f := prg.File
	off := func(i file.Idx) int { return int(i) - f.Base() }
	var bad error
	walk(reflect.ValueOf(prg), map[uintptr]bool{}, func(n any) {
		if bad != nil {
			return
		}
		switch x := n.(type) {
		case *ast.Identifier:
			if x.Name == checkFunc {
				bad = &stdlib.ScriptError{Message: "SyntaxError: the name " + checkFunc + " is reserved", File: f.Name(), Line: f.Position(off(x.Idx)).Line}
			}
		case *ast.WithStatement:
			bad = &stdlib.ScriptError{Message: "SyntaxError: with statements are not allowed in hermes scripts", File: f.Name(), Line: f.Position(off(x.With)).Line}
		}
	})
	return bad
}

var exprType = reflect.TypeFor[ast.Expression]()

// countConcat wraps every a + b, a += b and untagged template literal with substitutions in
// the program in a call of checkFunc, in the syntax tree.
func countConcat(prg *ast.Program) {
	rewriteNode(reflect.ValueOf(prg), map[uintptr]bool{})
}

func rewriteNode(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		if _, isFile := v.Interface().(*file.File); isFile {
			return
		}
		rewriteNode(v.Elem(), seen)
	case reflect.Interface:
		if !v.IsNil() {
			rewriteNode(v.Elem(), seen)
		}
	case reflect.Slice:
		for i := range v.Len() {
			rewriteSlot(v.Index(i), seen)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				rewriteSlot(v.Field(i), seen)
			}
		}
	}
}

// rewriteSlot rewrites a field or element: its children first, then, if it holds a
// concatenation, the concatenation is replaced by the checked call.
func rewriteSlot(f reflect.Value, seen map[uintptr]bool) {
	rewriteNode(f, seen)
	if f.Type() != exprType || !f.CanSet() || f.IsNil() {
		return
	}
	e := f.Interface().(ast.Expression)
	switch x := e.(type) {
	case *ast.BinaryExpression:
		if x.Operator != token.PLUS {
			return
		}
	case *ast.AssignExpression:
		if x.Operator != token.PLUS {
			return
		}
	case *ast.TemplateLiteral:
		if x.Tag != nil || len(x.Expressions) == 0 {
			return
		}
	default:
		return
	}
	call := &ast.CallExpression{
		Callee:           &ast.Identifier{Name: checkFunc, Idx: e.Idx0()},
		LeftParenthesis:  e.Idx0(),
		ArgumentList:     []ast.Expression{e},
		RightParenthesis: e.Idx1(),
	}
	f.Set(reflect.ValueOf(ast.Expression(call)))
}

// ends finds where expressions end in one source. goja places the end of a postfix ++/--
// two characters after its operand, which is wrong when a paren or a blank comes between
// (`(a)++`, `a ++`), and so is the end of every expression that ends with one.
type ends struct {
	src  string
	base int
	memo map[ast.Expression]int
}

func newEnds(src string, base int) *ends {
	return &ends{src: src, base: base, memo: map[ast.Expression]int{}}
}

func (x *ends) of(e ast.Expression) int {
	if n, ok := x.memo[e]; ok {
		return n
	}
	end := int(e.Idx1()) - x.base
	walk(reflect.ValueOf(e), map[uintptr]bool{}, func(n any) {
		u, ok := n.(*ast.UnaryExpression)
		if !ok || !u.Postfix || u == e {
			return
		}
		end = max(end, x.of(u))
	})
	if u, ok := e.(*ast.UnaryExpression); ok && u.Postfix {
		i := x.of(u.Operand)
		for i < len(x.src) && strings.IndexByte(") \t\n\r", x.src[i]) >= 0 {
			i++
		}
		if i+2 <= len(x.src) && (x.src[i:i+2] == "++" || x.src[i:i+2] == "--") {
			end = max(end, i+2)
		}
	}
	x.memo[e] = end
	return end
}

// applyEdits inserts the edits into src, from the end so earlier offsets stay valid; at one
// offset, closers go first.
func applyEdits(src string, edits []edit) string {
	sort.SliceStable(edits, func(i, j int) bool {
		if edits[i].at != edits[j].at {
			return edits[i].at > edits[j].at
		}
		return edits[i].text == ")" && edits[j].text != ")"
	})
	b := []byte(src)
	for _, e := range edits {
		if e.at < 0 || e.at > len(b) {
			continue
		}
		b = append(b[:e.at], append([]byte(e.text), b[e.at:]...)...)
	}
	return string(b)
}

// compileScript compiles a script (hermes run, the REPL) with its concatenations counted.
func compileScript(name, src string) (*goja.Program, error) {
	parsed, err := goja.Parse(name, src, parseOpts...)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	if err := checkConstructs(parsed); err != nil {
		return nil, err
	}
	countConcat(parsed)
	prg, err := goja.CompileAST(parsed, false)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	return prg, nil
}

// installCheck defines checkFunc (fixed, so a script cannot replace it) and disables eval and
// the Function constructors.
func (v *VM) installCheck() error {
	rt := v.rt
	check := rt.ToValue(func(c goja.FunctionCall) goja.Value {
		x := c.Argument(0)
		if s, ok := x.(goja.String); ok && s.Length() >= checkFrom {
			n := float64(s.Length()) * charBytes
			v.charge(n, n)
		}
		return x
	})
	if err := rt.GlobalObject().DefineDataProperty(checkFunc, check, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
		return err
	}
	deny := func(goja.FunctionCall) goja.Value { panic(rt.NewTypeError(ErrDynamicCode.Error())) }
	if err := rt.GlobalObject().DefineDataProperty("eval", rt.ToValue(deny), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return err
	}
	fn := rt.Get("Function").ToObject(rt)
	denyCtor := rt.ToValue(func(goja.ConstructorCall) *goja.Object { panic(rt.NewTypeError(ErrDynamicCode.Error())) }).(*goja.Object)
	_ = denyCtor.DefineDataProperty("prototype", fn.Get("prototype"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
	_ = fn.Get("prototype").ToObject(rt).DefineDataProperty("constructor", denyCtor, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	for _, src := range []string{"(function* () {})", "(async function () {})", "(async function* () {})"} {
		f, err := rt.RunString(src)
		if err != nil {
			continue
		}
		if p := f.ToObject(rt).Prototype(); p != nil {
			_ = p.DefineDataProperty("constructor", denyCtor, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
		}
	}
	return rt.GlobalObject().DefineDataProperty("Function", denyCtor, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}
