package stdlib

import (
	"fmt"
	"strings"
	"testing"
)

// TestElideStack: a short stack is kept whole; a long one keeps its first 10 and last 5 frames
// and says how many were left out.
func TestElideStack(t *testing.T) {
	frames := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("at f%d (a.js:%d:1)", i, i)
		}
		return out
	}
	if got := ElideStack(frames(16)); len(got) != 16 {
		t.Fatalf("16 frames: %d", len(got))
	}
	got := ElideStack(frames(10000))
	if len(got) != 16 || got[0] != "at f0 (a.js:0:1)" || got[9] != "at f9 (a.js:9:1)" || got[10] != "… 9985 frames omitted" ||
		got[11] != "at f9995 (a.js:9995:1)" || got[15] != "at f9999 (a.js:9999:1)" {
		t.Fatalf("%q", got)
	}
	se := &ScriptError{Message: "boom", File: "a.js", Line: 1, Stack: got}
	if tr := se.Trace(); strings.Count(tr, "\n") != 16 || !strings.Contains(tr, "\n    … 9985 frames omitted\n") {
		t.Fatalf("%s", tr)
	}
}
