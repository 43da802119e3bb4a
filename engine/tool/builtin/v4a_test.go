package builtin

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParsePatch(t *testing.T) {
	body := "intro text\n```\n*** Begin Patch\n" +
		"*** Update File: a.py\n" +
		"*** Move to: b.py\n" +
		"@@ class A\n" +
		"@@ def f(self): @@\n" +
		" ctx\n" +
		"-old\n" +
		"+new\n" +
		"\n" + // separator, not context
		"@@ -10,3 +10,4 @@ def g():\n" +
		"unprefixed context\n" +
		"+added\n" +
		"\n" + // empty context line inside the hunk
		" tail\n" +
		"\\ No newline at end of file\n" +
		"*** End of File\n" +
		"\n" +
		"*** Add File: new.txt\n" +
		"+one\n" +
		"+\n" +
		"+*** End Patch\n" + // content, not the marker
		"\n" +
		"*** Delete File: gone.txt\n" +
		"*** End Patch\n```\n"
	ops, err := parsePatch(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []patchOp{
		{kind: opUpdate, path: "a.py", moveTo: "b.py", hunks: []hunk{
			{anchors: []string{"class A", "def f(self):"}, lines: []hunkLine{{' ', "ctx"}, {'-', "old"}, {'+', "new"}}},
			{anchors: []string{"def g():"}, lines: []hunkLine{{' ', "unprefixed context"}, {'+', "added"}, {' ', ""}, {' ', "tail"}}, eof: true},
		}},
		{kind: opAdd, path: "new.txt", lines: []string{"one", "", "*** End Patch"}},
		{kind: opDelete, path: "gone.txt"},
	}
	if got := stripLines(ops); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if ops[0].line != 4 || ops[0].hunks[1].line != 12 {
		t.Fatalf("line numbers %d %d", ops[0].line, ops[0].hunks[1].line)
	}
}

func TestParsePatchErrors(t *testing.T) {
	cases := map[string]string{
		"*** Update File: a\n-x\n*** End Patch":                                       "Begin Patch",
		"*** Begin Patch\n*** Update File: a\n-x\n":                                   "cut off",
		"*** Begin Patch\n*** End Patch":                                              "no file operations",
		"*** Begin Patch\n-x\n*** End Patch":                                          "line 2: expected",
		"*** Begin Patch\n*** Update File:   \n-x\n*** End Patch":                     "needs a file path",
		"*** Begin Patch\n*** Update File: a\n ctx only\n*** End Patch":               "has no changes",
		"*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch":                    "must start with '+'",
		"*** Begin Patch\n*** Delete File: a\n-x\n*** End Patch":                      "after \"*** Delete File: a\"",
		"*** Begin Patch\n*** Frobnicate File: a\n*** End Patch":                      "unknown marker",
		"*** Begin Patch\n*** Add File: a\n*** Move to: b\n*** End Patch":             "must follow an \"*** Update File:\"",
		"*** Begin Patch\n*** Update File: a\n-x\n*** Move to: b\n*** End Patch":      "right after",
		"*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch":         "must end a hunk",
		"*** Begin Patch\n*** Update File: a\n-x\n*** End of File\n+y\n*** End Patch": "cannot continue",
	}
	for body, want := range cases {
		_, err := parsePatch(body)
		if !errors.Is(err, ErrPatchSyntax) || !strings.Contains(err.Error(), want) {
			t.Errorf("parsePatch(%q) = %v, want error containing %q", body, err, want)
		}
	}
}

func stripLines(ops []patchOp) []patchOp {
	out := make([]patchOp, len(ops))
	for i, op := range ops {
		op.line = 0
		if len(op.lines) == 0 {
			op.lines = nil // an empty added file parses to an empty, non-nil slice
		}
		if op.hunks != nil {
			hs := make([]hunk, len(op.hunks))
			for j, h := range op.hunks {
				h.line = 0
				hs[j] = h
			}
			op.hunks = hs
		}
		out[i] = op
	}
	return out
}

// formatPatch renders ops in canonical V4A form: what parsePatch must read back unchanged.
func formatPatch(ops []patchOp) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n")
	for _, op := range ops {
		switch op.kind {
		case opAdd:
			b.WriteString("*** Add File: " + op.path + "\n")
			for _, l := range op.lines {
				b.WriteString("+" + l + "\n")
			}
		case opDelete:
			b.WriteString("*** Delete File: " + op.path + "\n")
		case opUpdate:
			b.WriteString("*** Update File: " + op.path + "\n")
			if op.moveTo != "" {
				b.WriteString("*** Move to: " + op.moveTo + "\n")
			}
			for _, h := range op.hunks {
				if len(h.anchors) == 0 {
					b.WriteString("@@\n")
				}
				for _, a := range h.anchors {
					b.WriteString("@@ " + a + " @@\n")
				}
				for _, l := range h.lines {
					b.WriteString(string(l.kind) + l.text + "\n")
				}
				if h.eof {
					b.WriteString("*** End of File\n")
				}
			}
		}
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// roundTrips reports whether ops can be expected to survive formatPatch: texts with "\r" lose
// it to the CRLF tolerance, and an anchor that looks like a unified-diff range is read as one.
func roundTrips(ops []patchOp) bool {
	for _, op := range ops {
		if strings.Contains(op.path+op.moveTo, "\r") || strings.Contains(strings.Join(op.lines, ""), "\r") {
			return false
		}
		for _, h := range op.hunks {
			for _, a := range h.anchors {
				if strings.Contains(a, "\r") || unifiedHunkHeader.MatchString(a) {
					return false
				}
			}
			for _, l := range h.lines {
				if strings.Contains(l.text, "\r") {
					return false
				}
			}
		}
	}
	return true
}

func FuzzParsePatch(f *testing.F) {
	f.Add("*** Begin Patch\n*** Update File: a\n@@ f\n x\n-y\n+z\n*** End Patch")
	f.Add("*** Begin Patch\n*** Add File: n\n+a\n\n+b\n\n*** Delete File: d\n*** End Patch\n")
	f.Add("*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@ -1,2 +1,2 @@ g\n-a\n+b\n*** End of File\n*** End Patch")
	f.Add("```\n*** Begin Patch\r\n*** Update File: a\r\nctx\r\n-x\r\n+y\r\n\\ No newline\n*** End Patch\r\n```")
	f.Fuzz(func(t *testing.T, body string) {
		ops, err := parsePatch(body)
		if err != nil {
			if !errors.Is(err, ErrPatchSyntax) {
				t.Fatalf("error does not wrap ErrPatchSyntax: %v", err)
			}
			return
		}
		if len(ops) == 0 {
			t.Fatal("success without operations")
		}
		for _, op := range ops {
			if strings.TrimSpace(op.path) == "" || op.path != strings.TrimSpace(op.path) {
				t.Fatalf("bad path %q", op.path)
			}
			switch op.kind {
			case opAdd, opDelete:
				if len(op.hunks) > 0 || op.moveTo != "" {
					t.Fatalf("%s with hunks or a move: %+v", op.kind, op)
				}
			case opUpdate:
				if len(op.hunks) == 0 && op.moveTo == "" {
					t.Fatalf("update without changes: %+v", op)
				}
				for _, h := range op.hunks {
					if !h.changes() {
						t.Fatalf("hunk without changes: %+v", h)
					}
				}
			default:
				t.Fatalf("bad kind %d", op.kind)
			}
		}
		if !roundTrips(ops) {
			return
		}
		again, err := parsePatch(formatPatch(ops))
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, formatPatch(ops))
		}
		if !reflect.DeepEqual(stripLines(again), stripLines(ops)) {
			t.Fatalf("round trip changed the patch:\n%+v\n%+v\n%s", stripLines(ops), stripLines(again), formatPatch(ops))
		}
	})
}

func FuzzApplyHunks(f *testing.F) {
	f.Add("a\nb\nc\n", "*** Begin Patch\n*** Update File: f\n a\n-b\n+B\n*** End Patch")
	f.Add("x\r\ny", "*** Begin Patch\n*** Update File: f\n@@ x\n+z\n*** End of File\n*** End Patch")
	f.Add("", "*** Begin Patch\n*** Update File: f\n+only\n*** End Patch")
	f.Fuzz(func(t *testing.T, content, body string) {
		ops, err := parsePatch(body)
		if err != nil {
			return
		}
		for _, op := range ops {
			if op.kind != opUpdate {
				continue
			}
			out, err := applyHunks(content, op.hunks)
			if err != nil {
				continue
			}
			// Every added line is in the result.
			for _, h := range op.hunks {
				for _, l := range h.lines {
					if l.kind == '+' && !strings.Contains(out, l.text) {
						t.Fatalf("added line %q missing from %q", l.text, out)
					}
				}
			}
		}
	})
}
