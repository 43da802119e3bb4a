package builtin

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// applyUnified applies a diff made by unifiedDiff to old: the inverse the tests check it
// against.
func applyUnified(old, diff string) (string, error) {
	if diff == "" {
		return old, nil
	}
	type rec struct {
		kind byte
		text string
	}
	raw := strings.SplitAfter(diff, "\n")
	if len(raw) < 3 || !strings.HasPrefix(raw[0], "--- ") || !strings.HasPrefix(raw[1], "+++ ") {
		return "", fmt.Errorf("bad header %q", raw[:min(2, len(raw))])
	}
	a := splitLines(old)
	var out []string
	ai := 0
	for i := 2; i < len(raw) && raw[i] != ""; {
		var aStart, aLen int
		h := strings.TrimSuffix(raw[i], "\n")
		fields := strings.Fields(h)
		if len(fields) != 4 || fields[0] != "@@" || fields[3] != "@@" {
			return "", fmt.Errorf("bad hunk header %q", h)
		}
		startLen := strings.SplitN(strings.TrimPrefix(fields[1], "-"), ",", 2)
		aStart, _ = strconv.Atoi(startLen[0])
		aLen = 1
		if len(startLen) == 2 {
			aLen, _ = strconv.Atoi(startLen[1])
		}
		i++
		var recs []rec
		for i < len(raw) && raw[i] != "" && !strings.HasPrefix(raw[i], "@@") {
			if strings.HasPrefix(raw[i], `\`) {
				if len(recs) == 0 {
					return "", fmt.Errorf("dangling no-newline marker")
				}
				recs[len(recs)-1].text = strings.TrimSuffix(recs[len(recs)-1].text, "\n")
			} else {
				recs = append(recs, rec{raw[i][0], raw[i][1:]})
			}
			i++
		}
		start := aStart - 1
		if aLen == 0 {
			start = aStart
		}
		if start < ai || start > len(a) {
			return "", fmt.Errorf("hunk at %d out of order", aStart)
		}
		out = append(out, a[ai:start]...)
		ai = start
		for _, r := range recs {
			switch r.kind {
			case ' ', '-':
				if ai >= len(a) || a[ai] != r.text {
					return "", fmt.Errorf("line %d: have %q, diff says %q", ai+1, safeIndex(a, ai), r.text)
				}
				if r.kind == ' ' {
					out = append(out, r.text)
				}
				ai++
			case '+':
				out = append(out, r.text)
			default:
				return "", fmt.Errorf("bad line kind %q", r.kind)
			}
		}
	}
	out = append(out, a[ai:]...)
	return strings.Join(out, ""), nil
}

func safeIndex(a []string, i int) string {
	if i < len(a) {
		return a[i]
	}
	return "<EOF>"
}

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, old, new string
		oldEx, newEx   bool
		want           string
	}{
		{"equal", "a\n", "a\n", true, true, ""},
		{"create", "", "x\ny\n", false, true, "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{"delete", "x\n", "", true, false, "--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"},
		{"create empty", "", "", false, true, "--- /dev/null\n+++ b/f\n"},
		{"no newline", "a\nb", "a\nc", true, true, "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"add newline", "a", "a\n", true, true, "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n", true, true,
			"--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n 1\n-2\n+X\n 3\n 4\n 5\n@@ -8,5 +8,5 @@\n 8\n 9\n 10\n-11\n+Y\n 12\n"},
		{"merged hunks", "1\n2\n3\n4\n5\n6\n7\n8\n", "1\nX\n3\n4\n5\n6\nY\n8\n", true, true,
			"--- a/f\n+++ b/f\n@@ -1,8 +1,8 @@\n 1\n-2\n+X\n 3\n 4\n 5\n 6\n-7\n+Y\n 8\n"},
		{"insert middle", "a\nb\n", "a\nnew\nb\n", true, true, "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n+new\n b\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := unifiedDiff("f", tc.old, tc.new, tc.oldEx, tc.newEx)
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			if back, err := applyUnified(tc.old, got); err != nil || back != tc.new {
				t.Fatalf("apply: %q, %v", back, err)
			}
		})
	}
}

func TestDiffIsMinimalAndFallsBack(t *testing.T) {
	// A single changed line among many: exactly one '-' and one '+'.
	var a, b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&a, "line %d\n", i)
		if i == 250 {
			b.WriteString("changed\n")
		} else {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	d := unifiedDiff("f", a.String(), b.String(), true, true)
	body := d[strings.Index(d, "@@"):]
	if strings.Count(body, "\n-") != 1 || strings.Count(body, "\n+") != 1 || !strings.HasPrefix(body, "@@ -248,7 +248,7 @@\n") {
		t.Fatalf("not minimal:\n%s", d)
	}
	// A rewrite past the edit bound still yields a diff that applies.
	var c strings.Builder
	for i := range 3 * maxDiffEdits {
		fmt.Fprintf(&c, "other %d\n", i)
	}
	d = unifiedDiff("f", a.String(), c.String(), true, true)
	if back, err := applyUnified(a.String(), d); err != nil || back != c.String() {
		t.Fatalf("fallback diff does not apply: %v", err)
	}
}

func FuzzUnifiedDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\nd\n")
	f.Add("", "x")
	f.Add("x\ny", "x\ny\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "0\n1\n2\n3\n5\n6\n7\n8\n9\n10\n")
	f.Fuzz(func(t *testing.T, old, new string) {
		d := unifiedDiff("f", old, new, true, true)
		if (d == "") != (old == new) {
			t.Fatalf("empty diff for different contents, or the reverse: %q", d)
		}
		back, err := applyUnified(old, d)
		if err != nil {
			t.Fatalf("diff does not apply: %v\n%s", err, d)
		}
		if back != new {
			t.Fatalf("applied diff gives %q, want %q\n%s", back, new, d)
		}
	})
}
