package danger

import "strings"

// needles is a prefilter in conjunctive form: every clause must hold, and a clause holds when
// any of its terms occurs in the lowercased variant.
type needles []clause

// clause holds when any of its terms occurs.
type clause []term

// term is a lowercase literal. An end of the literal that is a word byte must sit on a word
// boundary in the text, as \b in the expression demands; "rm" is then not found in "format".
type term struct {
	s          string
	start, end bool // require a word boundary before / after
	// word is the term's index in wordIndex when the term is a whole word (word bytes only,
	// boundaries at both ends), else -1. Whole words are looked up in a per-variant bit set
	// instead of searched for, which is most of the prefilter's work.
	word int
}

// wordIndex numbers every whole-word term of the rule tables. It is filled while the tables
// are initialised and read-only afterwards.
var wordIndex = map[string]int{}

// wordSet records which whole-word terms occur in a variant.
type wordSet [4]uint64

func (w *wordSet) has(i int) bool { return w[i/64]&(1<<(i%64)) != 0 }

// wordsOf tokenises a lowercased variant into maximal runs of word bytes and records the runs
// that are rule terms.
func wordsOf(lower string) wordSet {
	var w wordSet
	for i := 0; i < len(lower); {
		if !isWordByte(lower[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(lower) && isWordByte(lower[j]) {
			j++
		}
		if k, ok := wordIndex[lower[i:j]]; ok {
			w[k/64] |= 1 << (k % 64)
		}
		i = j
	}
	return w
}

// parseNeedles reads clauses written as space-separated alternatives, e.g. "git", "push",
// "--forc* +": git and push and (--forc or +). A `*` at either end of a term waives the
// boundary check there (python* also finds python3).
func parseNeedles(clauses []string) needles {
	out := make(needles, 0, len(clauses))
	for _, c := range clauses {
		var cl clause
		for _, f := range strings.Fields(c) {
			t := term{start: true, end: true}
			if strings.HasPrefix(f, "*") {
				t.start, f = false, f[1:]
			}
			if strings.HasSuffix(f, "*") && len(f) > 1 {
				t.end, f = false, f[:len(f)-1]
			}
			t.s = f
			t.start = t.start && isWordByte(f[0])
			t.end = t.end && isWordByte(f[len(f)-1])
			t.word = -1
			if t.start && t.end && strings.IndexFunc(f, func(r rune) bool { return r > 0x7f || !isWordByte(byte(r)) }) < 0 {
				k, ok := wordIndex[f]
				if !ok {
					k = len(wordIndex)
					if k >= len(wordSet{})*64 {
						panic("danger: too many whole-word needles for wordSet")
					}
					wordIndex[f] = k
				}
				t.word = k
			}
			cl = append(cl, t)
		}
		out = append(out, cl)
	}
	return out
}

// candidate reports whether the variant can match the rule.
func (r *rule) candidate(v *variant) bool {
	for _, cl := range r.needles {
		if !cl.anyIn(v) {
			return false
		}
	}
	return true
}

func (cl clause) anyIn(v *variant) bool {
	for _, t := range cl {
		if t.word >= 0 {
			if v.words.has(t.word) {
				return true
			}
		} else if t.index(v.lower, 0) >= 0 {
			return true
		}
	}
	return false
}

// index returns the first occurrence of t in s at or after from, or -1.
func (t term) index(s string, from int) int {
	for from <= len(s) {
		i := strings.Index(s[from:], t.s)
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(t.s)
		if (!t.start || i == 0 || !isWordByte(s[i-1])) && (!t.end || end == len(s) || !isWordByte(s[end])) {
			return i
		}
		from = i + 1
	}
	return -1
}

// isWordByte matches the ASCII word class of \b.
func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
