package builtin

import (
	"fmt"
	"strings"
)

const (
	diffContext = 3
	// maxDiffEdits bounds the Myers search (memory grows with its square). Past it the
	// differing middle is shown as removed then added: still a correct diff, just not a
	// minimal one, which is what a wholesale rewrite looks like anyway.
	maxDiffEdits = 1000
	// maxDiffBytes is the largest diff put in Meta; a bigger one is dropped and flagged.
	maxDiffBytes = 512 << 10
)

// diffOp is one line of an edit script: ' ' keep, '-' remove from a, '+' add from b.
type diffOp struct {
	kind byte
	a, b int // line indexes in a and b (a for ' ' and '-', b for ' ' and '+')
}

// splitLines splits s into lines that keep their "\n"; a last line without one stays as is,
// which makes "no newline at end of file" a difference like any other.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// unifiedDiff renders the change from old to new as a unified diff labelled a/name and
// b/name, or /dev/null for a side that does not exist. Equal contents give "".
func unifiedDiff(name, old, new string, oldExists, newExists bool) string {
	if old == new && oldExists == newExists {
		return ""
	}
	a, b := splitLines(old), splitLines(new)
	ops := diffLines(a, b)
	from, to := "a/"+name, "b/"+name
	if !oldExists {
		from = "/dev/null"
	}
	if !newExists {
		to = "/dev/null"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", from, to)
	for _, h := range hunks(ops) {
		writeHunk(&sb, ops[h[0]:h[1]], a, b)
	}
	return sb.String()
}

// hunks groups the changes of ops with diffContext lines of context around each, returning
// [start, end) ranges of ops.
func hunks(ops []diffOp) [][2]int {
	var out [][2]int
	for i := 0; i < len(ops); {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(0, i-diffContext)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*diffContext {
				end = min(end+diffContext, run)
				break
			}
			end = run
		}
		out = append(out, [2]int{start, end})
		i = end
	}
	return out
}

func writeHunk(sb *strings.Builder, ops []diffOp, a, b []string) {
	aStart, bStart, aLen, bLen := -1, -1, 0, 0
	for _, op := range ops {
		if op.kind != '+' {
			if aStart < 0 {
				aStart = op.a
			}
			aLen++
		}
		if op.kind != '-' {
			if bStart < 0 {
				bStart = op.b
			}
			bLen++
		}
	}
	// An empty side is numbered by the line before it, as diff(1) does.
	if aStart < 0 {
		aStart = ops[0].a
	} else {
		aStart++
	}
	if bStart < 0 {
		bStart = ops[0].b
	} else {
		bStart++
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
	for _, op := range ops {
		line := ""
		if op.kind == '+' {
			line = b[op.b]
		} else {
			line = a[op.a]
		}
		sb.WriteByte(op.kind)
		sb.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// diffLines computes an edit script from a to b: common prefix and suffix first, Myers'
// algorithm on what differs between them. For every op, a is the index of the next line of a
// and b of the next line of b, so pure insertions and deletions still carry a position.
func diffLines(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]diffOp, 0, len(a)+len(b))
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{' ', i, i})
	}
	ops = append(ops, myers(a[pre:len(a)-suf], b[pre:len(b)-suf], pre, pre)...)
	for i := 0; i < suf; i++ {
		ops = append(ops, diffOp{' ', len(a) - suf + i, len(b) - suf + i})
	}
	return ops
}

// myers returns a shortest edit script from a to b (offset by a0, b0 in the op indexes), or a
// remove-all-then-add-all script when more than maxDiffEdits edits are needed.
func myers(a, b []string, a0, b0 int) []diffOp {
	n, m := len(a), len(b)
	fallback := func() []diffOp {
		ops := make([]diffOp, 0, n+m)
		for i := range n {
			ops = append(ops, diffOp{'-', a0 + i, b0})
		}
		for j := range m {
			ops = append(ops, diffOp{'+', a0 + n, b0 + j})
		}
		return ops
	}
	if n == 0 || m == 0 {
		return fallback()
	}
	// Compare small integers, not strings, in the inner loop.
	ids := map[string]int32{}
	ia, ib := make([]int32, n), make([]int32, m)
	for i, s := range a {
		id, ok := ids[s]
		if !ok {
			id = int32(len(ids))
			ids[s] = id
		}
		ia[i] = id
	}
	for j, s := range b {
		id, ok := ids[s]
		if !ok {
			id = int32(len(ids))
			ids[s] = id
		}
		ib[j] = id
	}

	maxD := min(n+m, maxDiffEdits)
	off := maxD + 1
	v := make([]int32, 2*maxD+3)
	// trace[d] holds v[k] for k in [-d-1, d+1], as it was before round d.
	var trace [][]int32
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int32(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int32
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - int32(k)
			for int(x) < n && int(y) < m && ia[x] == ib[y] {
				x++
				y++
			}
			v[off+k] = x
			if int(x) >= n && int(y) >= m {
				return backtrack(trace, n, m, a0, b0)
			}
		}
	}
	return fallback()
}

func backtrack(trace [][]int32, n, m, a0, b0 int) []diffOp {
	var rev []diffOp
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		v := trace[d]
		at := func(k int) int { return int(v[k+d+1]) }
		k := x - y
		var prevK int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := at(prevK)
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			rev = append(rev, diffOp{' ', a0 + x, b0 + y})
		}
		if d > 0 {
			if x == prevX {
				y--
				rev = append(rev, diffOp{'+', a0 + x, b0 + y})
			} else {
				x--
				rev = append(rev, diffOp{'-', a0 + x, b0 + y})
			}
		}
		x, y = prevX, prevY
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// metaDiff is unifiedDiff sized for Meta: a diff over maxDiffBytes is left out, and the second
// result says so.
func metaDiff(name, old, new string, oldExists, newExists bool) (string, bool) {
	d := unifiedDiff(name, old, new, oldExists, newExists)
	if len(d) > maxDiffBytes {
		return "", true
	}
	return d, false
}
