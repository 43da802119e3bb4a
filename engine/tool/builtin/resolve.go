package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/tool"
)

// ErrOutsideCwd is returned by Resolve for a path that leads outside the session working
// directory, lexically ("../x", "/etc/x") or through a symbolic link.
var ErrOutsideCwd = errors.New("path is outside the working directory")

// maxSymlinkHops bounds link chasing, as the kernel does (ELOOP), so a link cycle ends in an
// error instead of a hang.
const maxSymlinkHops = 40

// Resolve turns a path given by the model into the absolute path a file tool may touch.
// Relative paths are relative to env.Cwd (the process working directory when Cwd is empty);
// a leading "~" means the user's home directory. The path is cleaned and every symbolic link
// along its longest existing prefix is followed — including a dangling link at the end, whose
// target a write would create — and the result must lie inside the (equally resolved) Cwd
// unless env.AllowOutside is set. The returned path is the resolved one, so a later open does
// not traverse a link again. Errors wrap ErrOutsideCwd, or describe a path that cannot be
// resolved (a link cycle, a permission error); their text is written for the model.
func Resolve(env *tool.Env, p string) (string, error) {
	abs, _, err := resolve(env, p)
	return abs, err
}

// resolve is Resolve that also returns the resolved working directory, which callers use to
// show paths relative to it.
func resolve(env *tool.Env, p string) (target, realCwd string, err error) {
	if strings.TrimSpace(p) == "" {
		return "", "", errors.New("path is empty")
	}
	cwd, err := sessionCwd(env)
	if err != nil {
		return "", "", err
	}
	if realCwd, err = realPath(cwd); err != nil {
		return "", "", fmt.Errorf("working directory %s: %w", cwd, err)
	}
	lexical := p
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, herr := os.UserHomeDir()
		if herr != nil {
			return "", "", fmt.Errorf("path %q: cannot expand ~: %w", p, herr)
		}
		lexical = filepath.Join(home, p[1:])
	}
	if !filepath.IsAbs(lexical) {
		lexical = filepath.Join(cwd, lexical)
	}
	lexical = filepath.Clean(lexical)
	if target, err = realPath(lexical); err != nil {
		return "", "", fmt.Errorf("path %q: %w", p, err)
	}
	if env.AllowOutside || within(realCwd, target) {
		return target, realCwd, nil
	}
	if within(cwd, lexical) || within(realCwd, lexical) {
		return "", "", fmt.Errorf("%w: %q leads through a symbolic link to %s, outside the working directory %s; file tools may only touch files inside it",
			ErrOutsideCwd, p, target, realCwd)
	}
	return "", "", fmt.Errorf("%w: %q resolves to %s, outside the working directory %s; file tools may only touch files inside it (use a path relative to it)",
		ErrOutsideCwd, p, target, realCwd)
}

func sessionCwd(env *tool.Env) (string, error) {
	cwd := env.Cwd
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return "", fmt.Errorf("no working directory: %w", err)
		}
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", fmt.Errorf("working directory %s: %w", cwd, err)
	}
	return abs, nil
}

// within reports whether p is dir or below it. Both must be clean and absolute.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// realPath follows every symbolic link in the absolute, clean path p one component at a time.
// Unlike filepath.EvalSymlinks it succeeds when a suffix of p does not exist (the suffix is
// kept as written), and it follows a dangling link, because writing through it would create
// the link's target.
func realPath(p string) (string, error) {
	vol := filepath.VolumeName(p)
	resolved := vol + string(filepath.Separator)
	rest := splitPath(p[len(vol):])
	hops := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				// Nothing below a missing component exists either; keep the remainder as
				// written. Clean folds any ".." a link target left in it.
				return filepath.Clean(filepath.Join(append([]string{next}, rest...)...)), nil
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if hops++; hops > maxSymlinkHops {
			return "", fmt.Errorf("too many levels of symbolic links at %s", next)
		}
		link, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(link) {
			lv := filepath.VolumeName(link)
			resolved = lv + string(filepath.Separator)
			link = link[len(lv):]
		}
		rest = append(splitPath(link), rest...)
	}
	return resolved, nil
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r < utf8.RuneSelf && os.IsPathSeparator(uint8(r)) })
}

// displayPath is how a resolved path is shown to the model and to surfaces: relative to the
// working directory when inside it (shorter, and what the model usually wrote), else absolute.
func displayPath(realCwd, abs string) string {
	if within(realCwd, abs) {
		if rel, err := filepath.Rel(realCwd, abs); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	return abs
}
