package builtin

import (
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	cases := []struct {
		glob, rel string
		want      bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "sub/main.go", true}, // no '/': matched against the base name
		{"*.go", "main.gox", false},
		{"*_test.go", "a_test.go", true},
		{"?.txt", "a.txt", true},
		{"?.txt", "ab.txt", false},
		{"*.{ts,tsx}", "x.tsx", true},
		{"*.{ts,tsx}", "x.js", false},
		{"[ab]*.md", "b1.md", true},
		{"[!ab]*.md", "b1.md", false},
		{"[!ab]*.md", "c1.md", true},
		{"src/**/*.go", "src/a.go", true},
		{"src/**/*.go", "src/x/y/a.go", true},
		{"src/**/*.go", "lib/a.go", false},
		{"src/*.go", "src/x/a.go", false},
		{"**/*.go", "a.go", true},
		{"a+b(c).txt", "a+b(c).txt", true},
		{"ünï*.txt", "ünïcode.txt", true},
		{`\*.txt`, "*.txt", true},
		{`\*.txt`, "a.txt", false},
		{"a,b", "a,b", true},
	}
	for _, tc := range cases {
		g, err := newGlobMatcher(tc.glob)
		if err != nil {
			t.Fatalf("%q: %v", tc.glob, err)
		}
		base := tc.rel[strings.LastIndexByte(tc.rel, '/')+1:]
		if got := g.match(tc.rel, base); got != tc.want {
			t.Errorf("glob %q on %q = %v, want %v", tc.glob, tc.rel, got, tc.want)
		}
	}
	for _, bad := range []string{"[abc", "{a,b", "[]"} {
		if _, err := globRegexp(bad); err == nil {
			t.Errorf("glob %q accepted", bad)
		}
	}
}

func FuzzGlob(f *testing.F) {
	for _, s := range []string{"*.go", "src/**/*.{ts,tsx}", "[!a-c]?", `\`, "{", "[]]"} {
		f.Add(s, "src/a/b.go")
	}
	f.Fuzz(func(t *testing.T, glob, name string) {
		g, err := newGlobMatcher(glob)
		if err != nil {
			return
		}
		g.match(name, name)
		// A glob without special characters matches exactly itself.
		if !strings.ContainsAny(glob, `*?[]{}\,`) && !strings.HasPrefix(glob, "./") && !g.match(glob, glob) {
			t.Fatalf("literal glob %q does not match itself", glob)
		}
	})
}

func TestCapture(t *testing.T) {
	c := newCapture(10)
	for _, chunk := range []string{"abc", "defgh", "ijklmnop", "qrstuvwxyz"} {
		c.Write([]byte(chunk))
	}
	got, truncated := c.String()
	if got != "abcde\n[... 16 bytes omitted ...]\nvwxyz" || !truncated || c.Total() != 26 {
		t.Fatalf("got %q %v %d", got, truncated, c.Total())
	}

	c = newCapture(10)
	c.Write([]byte("short"))
	if got, truncated := c.String(); got != "short" || truncated {
		t.Fatalf("short: %q", got)
	}

	// A character split by the head or the tail boundary is dropped, not garbled.
	c = newCapture(8)
	c.Write([]byte("aaaé" + strings.Repeat("-", 20) + "ébbb"))
	got, _ = c.String()
	if got != "aaa\n[... 24 bytes omitted ...]\nbbb" {
		t.Fatalf("runes: %q", got)
	}
}
