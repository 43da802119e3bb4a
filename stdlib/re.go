package stdlib

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// reCache holds compiled patterns shared by every VM (a *regexp.Regexp is safe for concurrent
// use). It is bounded: policies use a handful of fixed patterns, and a script that builds
// patterns from input must not grow it without limit.
var reCache = struct {
	sync.RWMutex
	m map[string]*regexp.Regexp
}{m: map[string]*regexp.Regexp{}}

const reCacheMax = 512

func compileRe(pat string) (*regexp.Regexp, error) {
	reCache.RLock()
	re, ok := reCache.m[pat]
	reCache.RUnlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, fmt.Errorf("%w: regular expression %q: %v", ErrArgument, pat, err)
	}
	reCache.Lock()
	if len(reCache.m) >= reCacheMax {
		clear(reCache.m)
	}
	reCache.m[pat] = re
	reCache.Unlock()
	return re, nil
}

func reArgs(a Args) (*regexp.Regexp, string, error) {
	pat, err := a.String(0)
	if err != nil {
		return nil, "", err
	}
	s, err := a.String(1)
	if err != nil {
		return nil, "", err
	}
	re, err := compileRe(pat)
	return re, s, err
}

// Re is the re module: Go (RE2) regular expressions, so a pattern means exactly the same in
// JS and Lua policies. match(pat, s) → boolean; find(pat, s) → first match or nil;
// groups(pat, s) → [whole, group1, …] or nil; find_all(pat, s, n?) → list; replace(pat, s,
// repl) with $1 references; split(pat, s, n?) → list.
func Re() *Module {
	return &Module{Name: "re", Members: Object{
		"match": Func(func(_ context.Context, a Args) (any, error) {
			re, s, err := reArgs(a)
			if err != nil {
				return nil, err
			}
			return re.MatchString(s), nil
		}),
		"find": Func(func(_ context.Context, a Args) (any, error) {
			re, s, err := reArgs(a)
			if err != nil {
				return nil, err
			}
			loc := re.FindStringIndex(s)
			if loc == nil {
				return nil, nil
			}
			return s[loc[0]:loc[1]], nil
		}),
		"groups": Func(func(_ context.Context, a Args) (any, error) {
			re, s, err := reArgs(a)
			if err != nil {
				return nil, err
			}
			m := re.FindStringSubmatch(s)
			if m == nil {
				return nil, nil
			}
			return strs(m), nil
		}),
		"find_all": Func(func(_ context.Context, a Args) (any, error) {
			re, s, err := reArgs(a)
			if err != nil {
				return nil, err
			}
			n, err := a.OptInt(2, -1)
			if err != nil {
				return nil, err
			}
			return strs(re.FindAllString(s, int(n))), nil
		}),
		"replace": Func(func(_ context.Context, a Args) (any, error) {
			re, s, err := reArgs(a)
			if err != nil {
				return nil, err
			}
			repl, err := a.String(2)
			if err != nil {
				return nil, err
			}
			return re.ReplaceAllString(s, repl), nil
		}),
		"split": Func(func(_ context.Context, a Args) (any, error) {
			re, s, err := reArgs(a)
			if err != nil {
				return nil, err
			}
			n, err := a.OptInt(2, -1)
			if err != nil {
				return nil, err
			}
			return strs(re.Split(s, int(n))), nil
		}),
		"quote": Func(func(_ context.Context, a Args) (any, error) {
			s, err := a.String(0)
			if err != nil {
				return nil, err
			}
			return regexp.QuoteMeta(s), nil
		}),
	}}
}

func strs(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

// Path is the path module: lexical slash-separated path helpers (no file system access).
// join(...), clean(p), resolve(base, p) (p made absolute against base), within(p, dir)
// (p is dir or below it, lexically, after resolving against dir), rel(base, p), base(p),
// dir(p), ext(p), is_abs(p).
func Path() *Module {
	one := func(f func(string) any) Func {
		return func(_ context.Context, a Args) (any, error) {
			s, err := a.String(0)
			if err != nil {
				return nil, err
			}
			return f(s), nil
		}
	}
	return &Module{Name: "path", Members: Object{
		"join": Func(func(_ context.Context, a Args) (any, error) {
			parts := make([]string, len(a))
			for i := range a {
				s, err := a.String(i)
				if err != nil {
					return nil, err
				}
				parts[i] = s
			}
			return filepath.ToSlash(filepath.Join(parts...)), nil
		}),
		"clean":  one(func(s string) any { return filepath.ToSlash(filepath.Clean(s)) }),
		"base":   one(func(s string) any { return filepath.Base(s) }),
		"dir":    one(func(s string) any { return filepath.ToSlash(filepath.Dir(s)) }),
		"ext":    one(func(s string) any { return filepath.Ext(s) }),
		"is_abs": one(func(s string) any { return filepath.IsAbs(s) }),
		"resolve": Func(func(_ context.Context, a Args) (any, error) {
			base, err := a.String(0)
			if err != nil {
				return nil, err
			}
			p, err := a.String(1)
			if err != nil {
				return nil, err
			}
			return Resolve(base, p), nil
		}),
		"within": Func(func(_ context.Context, a Args) (any, error) {
			p, err := a.String(0)
			if err != nil {
				return nil, err
			}
			dir, err := a.String(1)
			if err != nil {
				return nil, err
			}
			return Within(p, dir), nil
		}),
		"rel": Func(func(_ context.Context, a Args) (any, error) {
			base, err := a.String(0)
			if err != nil {
				return nil, err
			}
			p, err := a.String(1)
			if err != nil {
				return nil, err
			}
			r, err := filepath.Rel(base, p)
			if err != nil {
				return nil, nil
			}
			return filepath.ToSlash(r), nil
		}),
	}}
}

// Resolve makes p absolute against base, lexically.
func Resolve(base, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.ToSlash(filepath.Clean(p))
}

// Within reports whether p (resolved against dir when relative) is dir or lies below it.
func Within(p, dir string) bool {
	if dir == "" {
		return false
	}
	d := filepath.Clean(dir)
	r := filepath.Clean(Resolve(d, p))
	if r == d {
		return true
	}
	if !strings.HasSuffix(d, string(filepath.Separator)) {
		d += string(filepath.Separator)
	}
	return strings.HasPrefix(r, d)
}
