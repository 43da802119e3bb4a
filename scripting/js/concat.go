package js

import (
	"errors"
	"reflect"
	"sort"

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

// concatEdits returns the edits that wrap each concatenation of prg (whose source is src) in
// a call of checkFunc, or an error for a construct that would get around them.
func concatEdits(prg *ast.Program, src string) ([]edit, error) {
	f := prg.File
	off := func(i file.Idx) int { return int(i) - f.Base() }
	var edits []edit
	var bad error
	wrap := func(start, end int) {
		if start >= 0 && end <= len(src) && start < end {
			edits = append(edits, edit{start, checkFunc + "("}, edit{end, ")"})
		}
	}
	walk(reflect.ValueOf(prg), map[uintptr]bool{}, func(n any) {
		switch x := n.(type) {
		case *ast.Identifier:
			if x.Name == checkFunc && bad == nil {
				bad = &stdlib.ScriptError{Message: "SyntaxError: the name " + checkFunc + " is reserved", File: f.Name(), Line: f.Position(off(x.Idx)).Line}
			}
		case *ast.WithStatement:
			if bad == nil {
				bad = &stdlib.ScriptError{Message: "SyntaxError: with statements are not allowed in hermes scripts", File: f.Name(), Line: f.Position(off(x.With)).Line}
			}
		case *ast.BinaryExpression:
			if x.Operator != token.PLUS {
				return
			}
			l0, l1, r0, r1 := off(x.Left.Idx0()), off(x.Left.Idx1()), off(x.Right.Idx0()), off(x.Right.Idx1())
			closeL, op, ok := scanTo(src, l1, r0, ')', '+')
			if !ok {
				return
			}
			openR, _, ok := scanTo(src, op+1, r0, '(', 0)
			if !ok {
				return
			}
			start, ok1 := back(src, l0, '(', closeL)
			end, ok2 := forward(src, r1, ')', openR)
			if ok1 && ok2 {
				wrap(start, end)
			}
		case *ast.AssignExpression:
			if x.Operator != token.PLUS {
				return
			}
			l1, r0, r1 := off(x.Left.Idx1()), off(x.Right.Idx0()), off(x.Right.Idx1())
			n, op, ok := scanTo(src, l1, r0, ')', '+')
			if !ok || n != 0 || op+1 >= len(src) || src[op+1] != '=' {
				return
			}
			openR, _, ok := scanTo(src, op+2, r0, '(', 0)
			if !ok {
				return
			}
			if end, ok := forward(src, r1, ')', openR); ok {
				wrap(off(x.Left.Idx0()), end)
			}
		case *ast.TemplateLiteral:
			if x.Tag == nil && len(x.Expressions) > 0 {
				wrap(off(x.OpenQuote), off(x.CloseQuote)+1)
			}
		}
	})
	return edits, bad
}

// scanTo reads src[from:to] over blanks and comments, counting the paren characters, up to
// stop (0: to the end); it fails on anything else. It returns the count and where stop is.
func scanTo(src string, from, to int, paren, stop byte) (count, at int, ok bool) {
	for i := from; i < to && i < len(src); i++ {
		switch c := src[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == paren:
			count++
		case stop != 0 && c == stop:
			return count, i, true
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < to && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := indexFrom(src, "*/", i+2)
			if j < 0 {
				return 0, 0, false
			}
			i = j + 1
		default:
			return 0, 0, false
		}
	}
	return count, to, stop == 0
}

func indexFrom(s, sub string, from int) int {
	for i := from; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// back moves from i over n paren characters (and blanks) to the left.
func back(src string, i int, paren byte, n int) (int, bool) {
	for n > 0 {
		i--
		if i < 0 {
			return 0, false
		}
		switch src[i] {
		case ' ', '\t', '\n', '\r':
		case paren:
			n--
		default:
			return 0, false
		}
	}
	return i, true
}

// forward moves from i over n closing parens (and blanks, comments) to the right.
func forward(src string, i int, paren byte, n int) (int, bool) {
	for n > 0 {
		if i >= len(src) {
			return 0, false
		}
		switch c := src[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == ')':
			n--
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := indexFrom(src, "*/", i+2)
			if j < 0 {
				return 0, false
			}
			i = j + 1
		default:
			return 0, false
		}
		i++
	}
	return i, true
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
	parsed, err := goja.Parse(name, src)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	edits, err := concatEdits(parsed, src)
	if err != nil {
		return nil, err
	}
	prg, err := goja.Compile(name, applyEdits(src, edits), false)
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
