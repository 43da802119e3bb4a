package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

const (
	defaultSearchLimit = 50
	maxSearchLimit     = 1000
	maxSearchContext   = 20
	// maxSearchFileSize: bigger files are skipped (generated, minified, data).
	maxSearchFileSize = 1 << 20
	// maxSearchCount stops the walk once this many results were counted, so a search that
	// matches everything in a huge tree still returns promptly.
	maxSearchCount  = 10_000
	maxMatchLineLen = 300
)

// skipDirs are never descended into: version-control internals and dependency trees, which
// are large and almost never what the model is looking for.
var skipDirs = []string{".git", ".hg", ".svn", "node_modules"}

// SearchFiles is the `search_files` tool: a regexp search over file contents, or a glob search
// over file names, below a directory. It walks the tree itself (no external grep), skipping
// skipDirs, binary files and files over 1 MiB, and its output is in walk order (sorted by
// name within each directory), so the same tree always gives the same page.
type SearchFiles struct{}

var searchSchema = func() *schema {
	llo, lhi := intRange(1, maxSearchLimit)
	olo, ohi := intRange(0, 1<<31-1)
	clo, chi := intRange(0, maxSearchContext)
	return object([]string{"pattern"}, map[string]*schema{
		"pattern": {Type: "string", Description: "target content: a regular expression (RE2 syntax; (?i) for " +
			"case-insensitive) matched against each line. target files: a glob matched against file names, e.g. " +
			"\"*.go\", \"*_test.go\", \"src/**/*.{ts,tsx}\" (a glob with '/' is matched against the path below path)."},
		"target":      {Type: "string", Enum: []string{"content", "files"}, Default: "content", Description: "Search file contents or file names."},
		"path":        {Type: "string", Default: ".", Description: "Directory (or single file) to search, relative to the working directory."},
		"file_glob":   {Type: "string", Description: "Only search files whose names match this glob, e.g. \"*.py\"."},
		"limit":       {Type: "integer", Minimum: llo, Maximum: lhi, Default: defaultSearchLimit, Description: "Maximum results to return."},
		"offset":      {Type: "integer", Minimum: olo, Maximum: ohi, Default: 0, Description: "Results to skip, for paging."},
		"output_mode": {Type: "string", Enum: []string{"content", "files_only", "count"}, Default: "content", Description: "target content only: matching lines (path:line:text), only the names of matching files, or match counts per file."},
		"context":     {Type: "integer", Minimum: clo, Maximum: chi, Default: 0, Description: "output_mode content only: lines of context to show around each match."},
	})
}()

type searchArgs struct {
	Pattern    string `json:"pattern"`
	Target     string `json:"target"`
	Path       string `json:"path"`
	FileGlob   string `json:"file_glob"`
	Limit      int    `json:"limit"`
	Offset     int    `json:"offset"`
	OutputMode string `json:"output_mode"`
	Context    int    `json:"context"`
}

// Spec describes the tool to the model.
func (SearchFiles) Spec() model.ToolSpec {
	return toolSpec("search_files",
		"Search below a directory: file contents by regular expression (like grep -rn), or file names by glob "+
			"(like find -name). Skips .git, node_modules, binary files and files over 1 MiB. Results are paged "+
			"with limit and offset.",
		searchSchema)
}

// Call runs the search.
func (SearchFiles) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a searchArgs
	if err := decodeArgs("search_files", searchSchema, c.Args, &a); err != nil {
		return argsResult(err), nil
	}
	if a.Target == "" {
		a.Target = "content"
	}
	if a.OutputMode == "" {
		a.OutputMode = "content"
	}
	if a.Path == "" {
		a.Path = "."
	}
	limit := orDefault(a.Limit, defaultSearchLimit)
	if a.Target == "files" && (a.OutputMode != "content" || a.Context > 0) {
		return tool.Errorf("output_mode and context apply to target \"content\" only"), nil
	}
	if a.Pattern == "" {
		return tool.Errorf("pattern is empty"), nil
	}
	var fileGlob *globMatcher
	if a.FileGlob != "" {
		g, err := newGlobMatcher(a.FileGlob)
		if err != nil {
			return tool.Errorf("invalid file_glob %q: %v", a.FileGlob, err), nil
		}
		fileGlob = g
	}
	root, realCwd, err := resolve(env, a.Path)
	if err != nil {
		return tool.Errorf("%v", err), nil
	}
	rootInfo, err := os.Stat(root)
	if err != nil {
		return openError(displayPath(realCwd, root), err), nil
	}

	s := &searcher{env: env, realCwd: realCwd, root: root, fileGlob: fileGlob, offset: a.Offset, limit: limit, mode: a.OutputMode, context: a.Context}
	if a.Target == "files" {
		g, err := newGlobMatcher(a.Pattern)
		if err != nil {
			return tool.Errorf("invalid glob %q: %v", a.Pattern, err), nil
		}
		s.nameGlob = g
	} else {
		re, err := regexp.Compile(a.Pattern)
		if err != nil {
			return tool.Errorf("invalid regular expression %q: %v (RE2 syntax: escape literal ( ) [ ] { } . * + ? | with a backslash)", a.Pattern, err), nil
		}
		s.re = re
	}
	if err := s.run(ctx, rootInfo.IsDir()); err != nil {
		if ctx.Err() != nil {
			return tool.Errorf("search interrupted"), nil
		}
		return tool.Errorf("search failed: %v", err), nil
	}
	return s.result(a), nil
}

// searcher holds one search: its filters, the page window and what was found.
type searcher struct {
	env      *tool.Env
	realCwd  string
	root     string
	re       *regexp.Regexp
	nameGlob *globMatcher
	fileGlob *globMatcher
	offset   int
	limit    int
	mode     string
	context  int

	total   int  // results counted (matches, files or per-file counts, by mode)
	files   int  // files with a result
	capped  bool // the walk stopped at maxSearchCount
	out     strings.Builder
	skipped int // files skipped as binary or too large
}

var errSearchFull = errors.New("search result cap reached")

func (s *searcher) run(ctx context.Context, isDir bool) error {
	if !isDir {
		return s.visit(s.root, filepath.Base(s.root))
	}
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			if p == s.root {
				return err
			}
			return nil // an unreadable subdirectory is skipped, not fatal
		}
		if d.IsDir() {
			if p != s.root && slices.Contains(skipDirs, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(s.root, p)
		rel = filepath.ToSlash(rel)
		if d.Type()&fs.ModeSymlink != 0 {
			// Follow links to files only (links to directories could loop), and only to
			// files the session may read.
			target, err := realPath(p)
			if err != nil || (!s.env.AllowOutside && !within(s.realCwd, target)) {
				return nil
			}
			fi, err := os.Stat(target)
			if err != nil || !fi.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		return s.visit(p, rel)
	})
	if errors.Is(err, errSearchFull) {
		s.capped = true
		return nil
	}
	return err
}

// inPage reports whether result number n (0-based) is on the requested page.
func (s *searcher) inPage(n int) bool { return n >= s.offset && n < s.offset+s.limit }

func (s *searcher) visit(p, rel string) error {
	base := filepath.Base(p)
	if s.fileGlob != nil && !s.fileGlob.match(rel, base) {
		return nil
	}
	shown := displayPath(s.realCwd, p)
	if s.nameGlob != nil {
		if !s.nameGlob.match(rel, base) {
			return nil
		}
		if s.inPage(s.total) {
			s.out.WriteString(shown + "\n")
		}
		return s.count(1)
	}

	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() { // a FIFO would block the read
		return nil
	}
	if fi.Size() > maxSearchFileSize {
		s.skipped++
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	if looksBinary(data[:min(len(data), sniffSize)]) {
		s.skipped++
		return nil
	}
	if !s.re.Match(data) {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var matched []int
	for i, l := range lines {
		if s.re.MatchString(strings.TrimSuffix(l, "\r")) {
			matched = append(matched, i)
		}
	}
	if len(matched) == 0 { // the regexp matched across a line break only
		return nil
	}
	s.files++
	switch s.mode {
	case "files_only":
		if s.inPage(s.total) {
			s.out.WriteString(shown + "\n")
		}
		return s.count(1)
	case "count":
		if s.inPage(s.total) {
			fmt.Fprintf(&s.out, "%s:%d\n", shown, len(matched))
		}
		return s.count(1)
	}
	var page []int
	for k, i := range matched {
		if s.inPage(s.total + k) {
			page = append(page, i)
		}
	}
	s.writeMatches(shown, lines, page)
	return s.count(len(matched))
}

func (s *searcher) count(n int) error {
	s.total += n
	if s.total >= maxSearchCount {
		return errSearchFull
	}
	return nil
}

// writeMatches prints the matching lines of one file as path:line:text, with context lines as
// path-line-text and "--" between separate groups, as grep does.
func (s *searcher) writeMatches(shown string, lines []string, page []int) {
	if len(page) == 0 {
		return
	}
	isMatch := make(map[int]bool, len(page))
	for _, i := range page {
		isMatch[i] = true
	}
	last := -1
	for _, m := range page {
		from := max(0, m-s.context, last+1)
		to := min(len(lines)-1, m+s.context)
		if s.context > 0 && last >= 0 && from > last+1 {
			s.out.WriteString("--\n")
		}
		for i := from; i <= to; i++ {
			sep := "-"
			if isMatch[i] {
				sep = ":"
			}
			fmt.Fprintf(&s.out, "%s%s%d%s%s\n", shown, sep, i+1, sep, clipLine(strings.TrimSuffix(lines[i], "\r")))
		}
		last = max(last, to)
	}
	if s.context > 0 {
		s.out.WriteString("--\n")
	}
}

func clipLine(l string) string {
	if len(l) <= maxMatchLineLen {
		return l
	}
	cut := maxMatchLineLen
	for cut > 0 && !utf8.RuneStart(l[cut]) {
		cut--
	}
	return l[:cut] + fmt.Sprintf(" [... %d more bytes]", len(l)-cut)
}

func (s *searcher) result(a searchArgs) tool.Result {
	shownRoot := displayPath(s.realCwd, s.root)
	what := "matches"
	switch {
	case a.Target == "files":
		what = "files"
	case s.mode != "content":
		what = "files"
	}
	meta := map[string]any{"pattern": a.Pattern, "target": a.Target, "path": shownRoot, "total": s.total}
	if s.total == 0 {
		msg := fmt.Sprintf("No %s found for %q in %s.", what, a.Pattern, shownRoot)
		if s.skipped > 0 {
			msg += fmt.Sprintf(" (%d binary or over-1-MiB files were skipped.)", s.skipped)
		}
		return tool.Result{Content: msg, Meta: meta}
	}
	var b strings.Builder
	body := s.out.String()
	if a.Target == "content" && s.context > 0 {
		body = strings.TrimSuffix(body, "--\n")
	}
	b.WriteString(body)
	totalText := fmt.Sprint(s.total)
	if s.capped {
		totalText = fmt.Sprintf("at least %d (the search stopped there; narrow path, pattern or file_glob)", s.total)
		meta["capped"] = true
	}
	shownTo := min(s.total, s.offset+s.limit)
	switch {
	case s.offset >= s.total:
		fmt.Fprintf(&b, "[offset %d is past the end: %s %s in total]", s.offset, totalText, what)
	case shownTo < s.total || s.offset > 0 || s.capped:
		fmt.Fprintf(&b, "[%s %d-%d of %s", what, s.offset+1, shownTo, totalText)
		if shownTo < s.total {
			fmt.Fprintf(&b, "; use offset=%d for more", shownTo)
			meta["truncated"] = true
		}
		b.WriteString("]")
	default:
		if a.Target == "content" && s.mode == "content" {
			fmt.Fprintf(&b, "[%s in %s]", plural(s.total, "match", "matches"), plural(s.files, "file", "files"))
		} else {
			fmt.Fprintf(&b, "[%s]", plural(s.total, "file", "files"))
		}
	}
	return tool.Result{Content: b.String(), Meta: meta}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
