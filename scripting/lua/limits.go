package lua

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"

	"github.com/hermes-go/hermes/scripting/internal/guard"
	"github.com/hermes-go/hermes/scripting/lua/internal/pm"
)

// Counted natives. The string library functions that build strings (rep, format, gsub,
// upper, lower, reverse, table.concat and the .. operator) charge what they are about to build
// before building it: against the per-call cap (Options.MaxString) and the run's memory budget
// (SetMeter). Pattern matching (find, match, gmatch, gsub) runs on a copy of gopher-lua's
// matcher that looks at the interrupt as it goes, and gsub builds its result in one pass.
//
// A limit hit aborts the run: the VM is interrupted, so every later instruction raises, and
// pcall, xpcall and coroutine.resume re-raise a limit error instead of returning it, so no
// script code runs after it. Tripped reports the limit afterwards.

// concatFunc is the global the compiler's .. rewrite calls (see rewriteConcat).
const concatFunc = "__hermes_concat"

// loopCheck is how many iterations a counted native runs between looks at the interrupt.
const loopCheck = 4096

// SetMeter makes the counted natives charge m (the memory budget of the run in progress).
func (v *VM) SetMeter(m guard.Meter) { v.meter = m }

// Tripped returns the limit the last run hit, or nil. A tripped VM must not decide anything:
// whatever the script returned after the limit hit is void.
func (v *VM) Tripped() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.tripped
}

// abort ends the run with err: the state is interrupted and L raises now.
func (v *VM) abort(L *lua.LState, err error) {
	v.trip(err)
	L.RaiseError("%s", err.Error())
}

// trip records err as the limit the run hit and interrupts it: every later instruction raises.
func (v *VM) trip(err error) {
	v.mu.Lock()
	if v.tripped == nil {
		v.tripped = err
	}
	v.mu.Unlock()
	v.Interrupt(err)
}

// charge accounts for delta more bytes built by the native call in progress, which has built
// total bytes so far (delta included).
func (v *VM) charge(L *lua.LState, total, delta float64) {
	if total > float64(v.opts.MaxString) || math.IsNaN(total) {
		v.abort(L, fmt.Errorf("%w: one call would build %.0f MiB (cap %d MiB)", guard.ErrMemoryLimit, total/(1<<20), v.opts.MaxString>>20))
	}
	if v.meter != nil && delta > 0 {
		if err := v.meter.Reserve(int64(delta)); err != nil {
			v.abort(L, err)
		}
	}
}

// reserve is charge for code outside a native call: it trips and interrupts the state but
// returns the error instead of raising.
func (v *VM) reserve(n float64) error {
	var err error
	if n > float64(v.opts.MaxString) {
		err = fmt.Errorf("%w: a value of %.0f MiB (cap %d MiB)", guard.ErrMemoryLimit, n/(1<<20), v.opts.MaxString>>20)
	} else if v.meter != nil {
		err = v.meter.Reserve(int64(n))
	}
	if err != nil {
		v.trip(err)
	}
	return err
}

// stopErr is nil while the run may go on, else why it must stop.
func (v *VM) stopErr() error {
	if err := v.Tripped(); err != nil {
		return err
	}
	return v.interrupted()
}

func (v *VM) checkLoop(L *lua.LState, i int) {
	if i%loopCheck == 0 {
		if err := v.stopErr(); err != nil {
			v.abort(L, err)
		}
	}
}

// installLimits replaces the string-building and pattern functions and the protected calls.
func (v *VM) installLimits() {
	L := v.L
	str, _ := L.GetGlobal("string").(*lua.LTable)
	tab, _ := L.GetGlobal("table").(*lua.LTable)
	co, _ := L.GetGlobal("coroutine").(*lua.LTable)
	if str == nil || tab == nil || co == nil {
		return
	}
	str.RawSetString("rep", L.NewFunction(v.rep))
	str.RawSetString("format", L.NewFunction(v.counted(str, "format", func(L *lua.LState) float64 {
		return formatSize(L.CheckString(1), L)
	})))
	for _, name := range []string{"upper", "lower", "reverse"} {
		str.RawSetString(name, L.NewFunction(v.counted(str, name, func(L *lua.LState) float64 {
			return float64(len(L.CheckString(1)))
		})))
	}
	tab.RawSetString("concat", L.NewFunction(v.counted(tab, "concat", v.tableConcatSize)))
	str.RawSetString("find", L.NewFunction(v.strFind))
	str.RawSetString("match", L.NewFunction(v.strMatch))
	str.RawSetString("gmatch", L.NewFunction(v.strGmatch))
	str.RawSetString("gsub", L.NewFunction(v.strGsub))

	g := L.G.Global
	if f, ok := g.RawGetString("pcall").(*lua.LFunction); ok && f.IsG {
		g.RawSetString("pcall", L.NewFunction(v.protected(f.GFunction)))
	}
	if f, ok := g.RawGetString("xpcall").(*lua.LFunction); ok && f.IsG {
		xpcall := v.protected(f.GFunction)
		g.RawSetString("xpcall", L.NewFunction(func(L *lua.LState) int {
			// The handler sees the error first and could replace its message: a stack overflow
			// is noted before it runs.
			if h, ok := L.Get(2).(*lua.LFunction); ok {
				L.Replace(2, L.NewFunction(func(L *lua.LState) int {
					if msg, ok := L.Get(1).(lua.LString); ok && isStackOverflow(string(msg)) {
						v.trip(fmt.Errorf("%w: %s", guard.ErrStackLimit, msg))
					}
					L.Push(h)
					L.Push(L.Get(1))
					L.Call(1, 1)
					return 1
				}))
			}
			return xpcall(L)
		}))
	}
	if f, ok := co.RawGetString("resume").(*lua.LFunction); ok && f.IsG {
		co.RawSetString("resume", L.NewFunction(v.protected(f.GFunction)))
	}
	g.RawSetString("loadstring", L.NewFunction(v.loadString))
	g.RawSetString("load", L.NewFunction(v.load))
	g.RawSetString(concatFunc, L.NewFunction(v.concat))
}

// counted wraps the function name of t so it charges size(L) bytes before running.
func (v *VM) counted(t *lua.LTable, name string, size func(L *lua.LState) float64) lua.LGFunction {
	orig := t.RawGetString(name).(*lua.LFunction).GFunction
	return func(L *lua.LState) int {
		n := size(L)
		v.charge(L, n, n)
		return orig(L)
	}
}

// protected wraps pcall, xpcall or coroutine.resume: a limit the protected code hit is raised
// again instead of being returned to the script.
func (v *VM) protected(orig lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		n := orig(L)
		if err := v.stopErr(); err != nil {
			v.abort(L, err)
		}
		if n == 2 && L.Get(-2) == lua.LFalse {
			if msg, ok := L.Get(-1).(lua.LString); ok && isStackOverflow(string(msg)) {
				v.abort(L, fmt.Errorf("%w: %s", guard.ErrStackLimit, msg))
			}
		}
		return n
	}
}

func isStackOverflow(msg string) bool {
	return strings.HasSuffix(msg, "stack overflow") || strings.HasSuffix(msg, "registry overflow") || strings.HasSuffix(msg, "pattern/input too complex")
}

func (v *VM) rep(L *lua.LState) int {
	s := L.CheckString(1)
	n := L.CheckInt(2)
	sep := L.OptString(3, "")
	if n <= 0 {
		L.Push(lua.LString(""))
		return 1
	}
	size := float64(len(s)+len(sep)) * float64(n)
	v.charge(L, size, size)
	var b strings.Builder
	b.Grow(int(size))
	for i := range n {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(s)
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// formatSize bounds what string.format(f, ...) builds: the format, each argument (strings
// at their length, %q doubled, others 32 bytes) and every width and precision.
func formatSize(f string, L *lua.LState) float64 {
	total := float64(len(f))
	arg := 2
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
			i++
		}
		width, prec := 0.0, 0.0
		for ; i < len(f) && f[i] >= '0' && f[i] <= '9'; i++ {
			width = width*10 + float64(f[i]-'0')
		}
		if i < len(f) && f[i] == '.' {
			for i++; i < len(f) && f[i] >= '0' && f[i] <= '9'; i++ {
				prec = prec*10 + float64(f[i]-'0')
			}
		}
		n := 32.0
		if s, ok := L.Get(arg).(lua.LString); ok {
			n = float64(len(s)) + 2
			if i < len(f) && f[i] == 'q' {
				n *= 2
			}
		}
		arg++
		total += math.Max(width, n) + prec
	}
	return total
}

// tableConcatSize is what table.concat(t, sep, i, j) builds (up to the first element it would
// reject, where it raises).
func (v *VM) tableConcatSize(L *lua.LState) float64 {
	t := L.CheckTable(1)
	sep := float64(len(L.OptString(2, "")))
	i := L.OptInt(3, 1)
	j := L.OptInt(4, t.Len())
	total := 0.0
	for k := i; k <= j; k++ {
		v.checkLoop(L, k-i+1)
		switch e := t.RawGetInt(k).(type) {
		case lua.LString:
			total += float64(len(e)) + sep
		case lua.LNumber:
			total += 24 + sep
		default:
			return total
		}
	}
	return total
}

// concat is the .. operator (the compiler rewrites a .. b .. c to a call of this with every
// operand): strings and numbers are joined after charging the result; a table or userdata
// operand goes through its __concat metamethod, right to left as in Lua.
func (v *VM) concat(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	rhs := L.Get(n)
	for i := n - 1; i >= 1; {
		if !isStringy(rhs) || !isStringy(L.Get(i)) {
			lhs := L.Get(i)
			mm := L.GetMetaField(lhs, "__concat")
			if mm == lua.LNil {
				mm = L.GetMetaField(rhs, "__concat")
			}
			if mm == lua.LNil {
				bad := lhs
				if isStringy(lhs) {
					bad = rhs
				}
				L.RaiseError("attempt to concatenate a %s value", bad.Type().String())
			}
			L.Push(mm)
			L.Push(lhs)
			L.Push(rhs)
			L.Call(2, 1)
			rhs = L.Get(-1)
			L.Pop(1)
			i--
			continue
		}
		// The run of strings and numbers ending at rhs.
		j := i
		for j > 1 && isStringy(L.Get(j-1)) {
			j--
		}
		parts := make([]string, 0, i-j+2)
		size := 0.0
		for k := j; k <= i; k++ {
			s := lua.LVAsString(L.Get(k))
			parts = append(parts, s)
			size += float64(len(s))
		}
		last := lua.LVAsString(rhs)
		parts = append(parts, last)
		size += float64(len(last))
		v.charge(L, size, size)
		rhs = lua.LString(strings.Join(parts, ""))
		i = j - 1
	}
	L.Push(rhs)
	return 1
}

func isStringy(x lua.LValue) bool {
	switch x.(type) {
	case lua.LString, lua.LNumber:
		return true
	}
	return false
}

// rewriteConcat replaces every .. chain in a chunk by a call of concatFunc with all its
// operands, so concatenation is counted. A call or ... operand keeps only its first value, as
// it does as an operand of ...
func rewriteConcat(chunk []ast.Stmt) {
	rewriteNode(reflect.ValueOf(chunk), map[uintptr]bool{})
}

var exprType = reflect.TypeFor[ast.Expr]()

func rewriteNode(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		switch x := v.Interface().(type) {
		case *ast.GenericForStmt:
			x.Stmts = padLoopBody(x.Stmts)
		case *ast.WhileStmt:
			x.Stmts = padLoopBody(x.Stmts)
		case *ast.RepeatStmt:
			x.Stmts = padLoopBody(x.Stmts)
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

// rewriteSlot rewrites a field or element: a concatenation held in an ast.Expr is replaced.
func rewriteSlot(f reflect.Value, seen map[uintptr]bool) {
	if f.Type() == exprType && f.CanSet() && !f.IsNil() {
		if c, ok := f.Interface().(*ast.StringConcatOpExpr); ok {
			var args []ast.Expr
			flattenConcat(c, &args)
			for _, a := range args {
				rewriteNode(reflect.ValueOf(a), seen)
			}
			call := &ast.FuncCallExpr{Func: &ast.IdentExpr{Value: concatFunc}, Args: args}
			call.Func.SetLine(c.Line())
			call.Func.SetLastLine(c.LastLine())
			call.SetLine(c.Line())
			call.SetLastLine(c.LastLine())
			f.Set(reflect.ValueOf(ast.Expr(call)))
			return
		}
	}
	rewriteNode(f, seen)
}

// padLoopBody works around a gopher-lua miscompilation: its jump-to-jump optimisation
// resolves the instructions in order, so a loop's backward jump to a body that begins with a
// jump (break, goto, an if or loop whose first instruction is a jump) reads that jump's
// already-resolved offset as a label id and lands elsewhere, often inside an earlier loop's
// body: `for x in it() do break end` after another loop ran that loop again. A body that may
// begin with a jump gets a first statement that compiles to one LOADNIL of a hidden local.
func padLoopBody(body []ast.Stmt) []ast.Stmt {
	if len(body) == 0 {
		return body
	}
	switch body[0].(type) {
	case *ast.BreakStmt, *ast.GotoStmt, *ast.IfStmt, *ast.DoBlockStmt, *ast.WhileStmt, *ast.RepeatStmt:
	default:
		return body
	}
	pad := &ast.LocalAssignStmt{Names: []string{"(loop)"}}
	pad.SetLine(body[0].Line())
	pad.SetLastLine(body[0].Line())
	return append([]ast.Stmt{pad}, body...)
}

func flattenConcat(e ast.Expr, out *[]ast.Expr) {
	if c, ok := e.(*ast.StringConcatOpExpr); ok {
		flattenConcat(c.Lhs, out)
		flattenConcat(c.Rhs, out)
		return
	}
	switch x := e.(type) {
	case *ast.FuncCallExpr:
		x.AdjustRet = true
	case *ast.Comma3Expr:
		x.AdjustRet = true
	}
	*out = append(*out, e)
}

// loadString is loadstring(s [, name]), compiling s with the same rewrite as any script.
func (v *VM) loadString(L *lua.LState) int {
	return v.loadSource(L, L.CheckString(1), L.OptString(2, "<string>"))
}

// load is load(f [, name]) (f returns the chunk in pieces) or load(s [, name]).
func (v *VM) load(L *lua.LState) int {
	if s, ok := L.Get(1).(lua.LString); ok {
		return v.loadSource(L, string(s), L.OptString(2, "<string>"))
	}
	fn := L.CheckFunction(1)
	name := L.OptString(2, "=(load)")
	var b strings.Builder
	for i := 1; ; i++ {
		v.checkLoop(L, i)
		L.Push(fn)
		L.Call(0, 1)
		piece := L.Get(-1)
		L.Pop(1)
		s, ok := piece.(lua.LString)
		if !ok || len(s) == 0 {
			break
		}
		n := float64(b.Len() + len(s))
		v.charge(L, n, float64(len(s)))
		b.WriteString(string(s))
	}
	return v.loadSource(L, b.String(), name)
}

func (v *VM) loadSource(L *lua.LState, src, name string) int {
	proto, err := compile(name, src)
	if err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(err.Error()))
		return 2
	}
	L.Push(L.NewFunctionFromProto(proto))
	return 1
}

// Pattern functions, after gopher-lua's string library (MIT licence), on the interruptible
// matcher.

func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func (v *VM) find(L *lua.LState, pattern, str string, offset, limit int) []*pm.MatchData {
	mds, err := pm.Find(pattern, bytesOf(str), offset, limit, v.stopErr)
	if err != nil {
		var perr *pm.Error
		if errors.As(err, &perr) {
			L.RaiseError("%s", err.Error())
		}
		v.abort(L, err)
	}
	return mds
}

func startIndex(str string, i int) int {
	if i != 0 {
		i--
	}
	if l := len(str); i < 0 {
		i = l + i + 1
	}
	return max(i, 0)
}

func pushCaptures(L *lua.LState, str string, md *pm.MatchData, whole bool) int {
	if md.CaptureLength() == 2 {
		if whole {
			L.Push(lua.LString(str[md.Capture(0):md.Capture(1)]))
			return 1
		}
		return 0
	}
	for i := 2; i < md.CaptureLength(); i += 2 {
		if md.IsPosCapture(i) {
			L.Push(lua.LNumber(md.Capture(i)))
		} else {
			L.Push(lua.LString(str[md.Capture(i):md.Capture(i+1)]))
		}
	}
	return md.CaptureLength()/2 - 1
}

func (v *VM) strFind(L *lua.LState) int {
	str := L.CheckString(1)
	pattern := L.CheckString(2)
	if len(pattern) == 0 {
		L.Push(lua.LNumber(1))
		L.Push(lua.LNumber(0))
		return 2
	}
	init := startIndex(str, L.OptInt(3, 1))
	if init > len(str) {
		L.Push(lua.LNil)
		return 1
	}
	if L.GetTop() == 4 && lua.LVAsBool(L.Get(4)) {
		pos := strings.Index(str[init:], pattern)
		if pos < 0 {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LNumber(init+pos) + 1)
		L.Push(lua.LNumber(init + pos + len(pattern)))
		return 2
	}
	mds := v.find(L, pattern, str, init, 1)
	if len(mds) == 0 {
		L.Push(lua.LNil)
		return 1
	}
	md := mds[0]
	L.Push(lua.LNumber(md.Capture(0) + 1))
	L.Push(lua.LNumber(md.Capture(1)))
	return 2 + pushCaptures(L, str, md, false)
}

func (v *VM) strMatch(L *lua.LState) int {
	str := L.CheckString(1)
	pattern := L.CheckString(2)
	offset := L.OptInt(3, 1)
	if offset < 0 {
		offset = len(str) + offset + 1
	}
	offset = max(offset-1, 0)
	mds := v.find(L, pattern, str, offset, 1)
	if len(mds) == 0 {
		L.Push(lua.LNil)
		return 1
	}
	return pushCaptures(L, str, mds[0], true)
}

// strGmatch finds one match per call of the iterator, not all of them up front.
func (v *VM) strGmatch(L *lua.LState) int {
	str := L.CheckString(1)
	pattern := L.CheckString(2)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		if pos > len(str) {
			return 0
		}
		mds := v.find(L, pattern, str, pos, 1)
		if len(mds) == 0 {
			pos = len(str) + 1
			return 0
		}
		md := mds[0]
		pos = md.Capture(1)
		if pos == md.Capture(0) {
			pos++ // an empty match: go on one further
		}
		return pushCaptures(L, str, md, true)
	}))
	return 1
}

// strGsub is string.gsub, finding one match at a time and writing the result once, each
// piece charged as it is added.
func (v *VM) strGsub(L *lua.LState) int {
	str := L.CheckString(1)
	pattern := L.CheckString(2)
	L.CheckTypes(3, lua.LTString, lua.LTNumber, lua.LTTable, lua.LTFunction)
	repl := L.Get(3)
	limit := L.OptInt(4, -1)
	anchor := strings.HasPrefix(pattern, "^")
	var b strings.Builder
	total := 0.0
	write := func(s string) {
		total += float64(len(s))
		v.charge(L, total, float64(len(s)))
		b.WriteString(s)
	}
	n, pos, last := 0, 0, 0
	for pos <= len(str) && (limit < 0 || n < limit) {
		v.checkLoop(L, n+1)
		mds := v.find(L, pattern, str, pos, 1)
		if len(mds) == 0 {
			break
		}
		md := mds[0]
		start, end := md.Capture(0), md.Capture(1)
		n++
		write(str[last:start])
		whole := str[start:end]
		var out lua.LValue
		switch r := repl.(type) {
		case lua.LString, lua.LNumber:
			out = lua.LString(expandRepl(L, lua.LVAsString(r), str, md))
		case *lua.LTable:
			key := lua.LValue(lua.LString(whole))
			if md.CaptureLength() > 2 {
				if md.IsPosCapture(2) {
					key = lua.LNumber(md.Capture(2))
				} else {
					key = lua.LString(str[md.Capture(2):md.Capture(3)])
				}
			}
			out = L.GetTable(r, key)
		case *lua.LFunction:
			L.Push(r)
			nargs := pushCaptures(L, str, md, true)
			L.Call(nargs, 1)
			out = L.Get(-1)
			L.Pop(1)
		}
		switch o := out.(type) {
		case lua.LString, lua.LNumber:
			write(lua.LVAsString(o))
		default:
			if lua.LVIsFalse(out) {
				write(whole)
			} else {
				L.RaiseError("invalid replacement value (a %s)", out.Type().String())
			}
		}
		last = end
		if end > start {
			pos = end
		} else {
			if start < len(str) {
				write(str[start : start+1])
			}
			pos = start + 1
			last = pos
		}
		if anchor {
			break
		}
	}
	if last < len(str) {
		write(str[last:])
	}
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(n))
	return 2
}

// expandRepl expands a gsub replacement string: %0-%9 are captures (%0 and, without captures,
// %1 the whole match), %% a percent sign.
func expandRepl(L *lua.LState, repl, str string, md *pm.MatchData) string {
	if !strings.Contains(repl, "%") {
		return repl
	}
	var b strings.Builder
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '%' || i == len(repl)-1 {
			b.WriteByte(c)
			continue
		}
		i++
		d := repl[i]
		if d < '0' || d > '9' {
			b.WriteByte(d)
			continue
		}
		idx := 2 * int(d-'0')
		if idx == 0 || (idx == 2 && md.CaptureLength() == 2) {
			b.WriteString(str[md.Capture(0):md.Capture(1)])
			continue
		}
		if idx >= md.CaptureLength() {
			L.RaiseError("invalid capture index")
		}
		if md.IsPosCapture(idx) {
			b.WriteString(strconv.Itoa(md.Capture(idx)))
		} else {
			b.WriteString(str[md.Capture(idx):md.Capture(idx+1)])
		}
	}
	return b.String()
}
