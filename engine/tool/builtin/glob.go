package builtin

import (
	"errors"
	"regexp"
	"strings"
)

// globRegexp compiles a file-name glob into an anchored regexp. It understands `*` and `?`
// (not crossing '/'), `**` (any number of directories), `[abc]`, `[!abc]` and `{a,b}`
// alternatives, which is what models write ("*.go", "src/**/*.ts", "*.{js,jsx}").
func globRegexp(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	depth := 0 // open { groups
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch c {
		case '*':
			if i+1 < len(glob) && glob[i+1] == '*' {
				i++
				if i+1 < len(glob) && glob[i+1] == '/' {
					i++
					b.WriteString("(?:.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end < 0 {
				return nil, errors.New("unclosed '[' in glob")
			}
			class := glob[i+1 : i+1+end]
			if end == 0 { // "[]...]": a literal ']' first in the class
				end2 := strings.IndexByte(glob[i+2:], ']')
				if end2 < 0 {
					return nil, errors.New("unclosed '[' in glob")
				}
				class = glob[i+1 : i+2+end2]
				end = end2 + 1
			}
			neg := strings.HasPrefix(class, "!") || strings.HasPrefix(class, "^")
			if neg {
				class = class[1:]
			}
			b.WriteString("[")
			if neg {
				b.WriteString("^")
			}
			for _, r := range class {
				if r == '\\' || r == '[' || r == ']' || r == '^' {
					b.WriteByte('\\')
				}
				b.WriteRune(r)
			}
			b.WriteString("]")
			i += end + 1
		case '{':
			depth++
			b.WriteString("(?:")
		case '}':
			if depth == 0 {
				b.WriteString(`\}`)
				continue
			}
			depth--
			b.WriteString(")")
		case ',':
			if depth > 0 {
				b.WriteString("|")
			} else {
				b.WriteString(",")
			}
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
			} else {
				b.WriteString(`\\`)
			}
		default:
			b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
		}
	}
	if depth > 0 {
		return nil, errors.New("unclosed '{' in glob")
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// globMatcher matches the base name, or the slash-separated path below the search root when
// the glob has a '/' in it.
type globMatcher struct {
	re       *regexp.Regexp
	fullPath bool
}

func newGlobMatcher(glob string) (*globMatcher, error) {
	re, err := globRegexp(strings.TrimPrefix(glob, "./"))
	if err != nil {
		return nil, err
	}
	return &globMatcher{re: re, fullPath: strings.Contains(glob, "/")}, nil
}

func (g *globMatcher) match(rel, base string) bool {
	if g.fullPath {
		return g.re.MatchString(rel)
	}
	return g.re.MatchString(base)
}
