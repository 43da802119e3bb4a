package danger

import (
	"path"
	"regexp"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// prepare applies the normalisations that do not depend on shell structure, in an order where
// none can undo another: NUL bytes and terminal escape sequences go first (so they cannot split
// a word), then NFKC (fullwidth ｒｍ folds to rm), then line continuations are joined
// (`rm -rf \<newline>/` runs as `rm -rf /`), then absolute home prefixes are folded to ~/ and
// ~/.hermes/ so one spelling of each sensitive path suffices, and finally $IFS, whose default
// value is whitespace, becomes a space (`rm${IFS}-rf${IFS}/`).
func prepare(s string, o *Options) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	s = stripEscapes(s)
	if !isASCII(s) {
		s = norm.NFKC.String(s)
	}
	s = joinContinuations(s)
	// The profile home first: it usually lives under the user home, and folding the user home
	// first would consume the prefix it needs.
	s = foldHome(s, o.HermesHome, "~/.hermes")
	s = foldHome(s, o.Home, "~")
	if strings.Contains(s, "IFS") {
		s = ifsRe.ReplaceAllLiteralString(s, " ")
	}
	return s
}

var ifsRe = regexp.MustCompile(`\$\{IFS\b[^}]*\}|\$IFS\b`)

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// c1 rewrites the 8-bit C1 introducers to their 7-bit ESC forms so one scanner handles both.
var c1 = strings.NewReplacer(
	"\u009b", "\x1b[", "\u009d", "\x1b]", "\u0090", "\x1bP", "\u0098", "\x1bX",
	"\u009e", "\x1b^", "\u009f", "\x1b_", "\u009c", "\x1b\\",
)

// stripEscapes removes ANSI/ECMA-48 escape sequences: CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC
// strings (terminated by BEL or ESC \), and two- or three-byte escapes. A malformed or
// unterminated sequence loses only its introducer, so it cannot swallow the rest of the
// command and hide it from the rules.
func stripEscapes(s string) string {
	if strings.IndexByte(s, 0xc2) >= 0 {
		s = c1.Replace(s)
	}
	if strings.IndexByte(s, 0x1b) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			i++
			continue
		}
		i += escapeLen(s[i:])
	}
	return b.String()
}

// escapeLen is the length of the escape sequence at the start of s (s[0] == ESC).
func escapeLen(s string) int {
	if len(s) < 2 {
		return 1
	}
	switch c := s[1]; {
	case c == '[':
		j := 2
		for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f { // parameters
			j++
		}
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f { // intermediates
			j++
		}
		if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7e {
			return j + 1
		}
		return 2
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		for j := 2; j < len(s); j++ {
			switch {
			case s[j] == 0x07:
				return j + 1
			case s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\':
				return j + 2
			}
		}
		return 2
	case c >= 0x20 && c <= 0x2f: // nF: intermediates then a final byte, e.g. ESC ( B
		j := 1
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
			j++
		}
		if j < len(s) && s[j] >= 0x30 && s[j] <= 0x7e {
			return j + 1
		}
		return 1
	case c >= 0x30 && c <= 0x7e:
		return 2
	}
	return 1
}

// joinContinuations removes backslash-newline pairs. A backslash that is itself escaped
// (`\\` then newline) is a literal backslash followed by a real line break, which must stay.
func joinContinuations(s string) string {
	if !strings.Contains(s, "\\\n") && !strings.Contains(s, "\\\r\n") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	run := 0 // backslashes immediately before i
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && run%2 == 0 {
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
				continue
			}
			if i+2 < len(s) && s[i+1] == '\r' && s[i+2] == '\n' {
				i += 2
				continue
			}
		}
		if c == '\\' {
			run++
		} else {
			run = 0
		}
		b.WriteByte(c)
	}
	return b.String()
}

// foldHome rewrites every occurrence of the absolute directory dir to repl when it is a whole
// path prefix: not glued to a preceding path word, and followed by a separator or the end of
// the word (so `rm -rf /home/alice` reaches the home-directory rule). Matching ignores ASCII
// case: on case-insensitive file systems /Users/Alice is the same directory, and folding too
// much only makes the rules stricter.
func foldHome(s, dir, repl string) string {
	if dir == "" || !strings.HasPrefix(dir, "/") {
		return s
	}
	dir = path.Clean(dir)
	if dir == "/" || len(s) < len(dir) {
		return s
	}
	lower, ldir := asciiLower(s), asciiLower(dir)
	var b strings.Builder
	last, i := 0, 0
	for i < len(s) {
		j := strings.Index(lower[i:], ldir)
		if j < 0 {
			break
		}
		j += i
		end := j + len(ldir)
		st := j
		for st > last && s[st-1] == '/' { // `//home/alice/x` is the same path
			st--
		}
		if (end == len(s) || strings.IndexByte("/ \t\n;&|)\"'`", s[end]) >= 0) && (st == 0 || !pathByte(s[st-1])) {
			b.WriteString(s[last:st])
			b.WriteString(repl)
			last = end
		}
		i = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '-' || c == '~' || c >= 0x80
}

// unescape removes backslash escapes (r\m is rm to the shell) and then empty quote pairs
// (r""m and its single-quoted twin). It runs after the quote-aware scan, which needs the
// escapes to know where quotes really are.
func unescape(s string) string {
	if strings.IndexByte(s, '\\') >= 0 {
		var b strings.Builder
		b.Grow(len(s))
		for i := 0; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
			b.WriteByte(s[i])
		}
		s = b.String()
	}
	if strings.Contains(s, "''") || strings.Contains(s, `""`) {
		var b strings.Builder
		b.Grow(len(s))
		for i := 0; i < len(s); i++ {
			if (s[i] == '\'' || s[i] == '"') && i+1 < len(s) && s[i+1] == s[i] {
				i++
				continue
			}
			b.WriteByte(s[i])
		}
		s = b.String()
	}
	return s
}

// asciiLower lowercases ASCII letters only, keeping byte offsets intact. Variants are NFKC
// normalised, which leaves no non-ASCII rune whose case folding is an ASCII letter (the Kelvin
// sign and long s fold to K and s), so an ASCII needle found by (?i) is found here too.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
