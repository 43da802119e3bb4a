package acp

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitDiff(t *testing.T) {
	d := "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n@@ -9,1 +9,2 @@\n nine\n+ten\n\\ No newline at end of file\n"
	o, n := splitDiff(d)
	if o != "one\ntwo\nthree\n\nnine\n" || n != "one\nTWO\nthree\n\nnine\nten\n" {
		t.Fatalf("old %q new %q", o, n)
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	got := truncate(s, 5)
	head, _, _ := strings.Cut(got, "\n")
	if !utf8.ValidString(got) || head != "éé" || !strings.Contains(got, "more bytes") {
		t.Fatalf("%q", got)
	}
	if truncate("short", 10) != "short" {
		t.Fatal("short text changed")
	}
}
