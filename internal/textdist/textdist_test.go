package textdist

import "testing"

func TestLevenshtein(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"approval", "approval", 0},
		{"aproval", "approval", 1},
		{"busyInput", "busy_input", 2},
		{"gpt-4o", "gpt-4.1", 2},
		{"", "abc", 3},
		{"kitten", "sitting", 3},
		{"héllo", "hello", 1}, // runes, not bytes
	} {
		if got := Levenshtein(c.a, c.b); got != c.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Levenshtein(c.b, c.a); got != c.want {
			t.Errorf("not symmetric on %q, %q: %d", c.a, c.b, got)
		}
	}
}
