package builtin

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrPatchSyntax marks a V4A patch body that cannot be parsed.
var ErrPatchSyntax = errors.New("malformed patch")

// A V4A patch, as coding models write it:
//
//	*** Begin Patch
//	*** Update File: src/app.py
//	*** Move to: src/main.py          (optional: rename while updating)
//	@@ def handler(request):           (optional anchors, outermost first)
//	 context line
//	-removed line
//	+added line
//	*** End of File                    (optional: the hunk ends at the end of the file)
//	*** Add File: docs/notes.md
//	+every line of the new file
//	*** Delete File: old.txt
//	*** End Patch
//
// Lines before "*** Begin Patch" and after "*** End Patch" (code fences, a heredoc) are
// ignored. Inside a hunk a line with no ' ', '-' or '+' prefix is taken as context, and blank
// lines at the end of a hunk or of an added file are separators, not content.

type opKind int

const (
	opAdd opKind = iota + 1
	opUpdate
	opDelete
)

func (k opKind) String() string {
	switch k {
	case opAdd:
		return "add"
	case opUpdate:
		return "update"
	case opDelete:
		return "delete"
	}
	return "?"
}

// patchOp is one file operation of a patch.
type patchOp struct {
	kind   opKind
	path   string
	moveTo string   // update: the new name, if renamed
	lines  []string // add: the lines of the new file
	hunks  []hunk   // update
	line   int      // 1-based line of the header in the patch body
}

// hunk is one change inside an updated file.
type hunk struct {
	anchors []string // texts of its @@ lines, to be found in order before the hunk
	lines   []hunkLine
	eof     bool // the hunk must match at the end of the file
	line    int  // 1-based line in the patch body where it starts
}

type hunkLine struct {
	kind byte // ' ', '-' or '+'
	text string
}

// changes reports whether the hunk adds or removes anything.
func (h *hunk) changes() bool {
	for _, l := range h.lines {
		if l.kind != ' ' {
			return true
		}
	}
	return false
}

// split returns the lines the hunk expects in the file and the lines it leaves there.
func (h *hunk) split() (old, new []string) {
	for _, l := range h.lines {
		if l.kind != '+' {
			old = append(old, l.text)
		}
		if l.kind != '-' {
			new = append(new, l.text)
		}
	}
	return old, new
}

var unifiedHunkHeader = regexp.MustCompile(`^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@(.*)$`)

// parsePatch parses a V4A patch body. Errors wrap ErrPatchSyntax and name the line.
func parsePatch(body string) ([]patchOp, error) {
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	begin := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "*** Begin Patch" {
			begin = i
			break
		}
	}
	if begin < 0 {
		return nil, fmt.Errorf("%w: the body must start with a \"*** Begin Patch\" line", ErrPatchSyntax)
	}
	end := -1
	for i := begin + 1; i < len(lines); i++ {
		// Column 0 only: " *** End Patch" is a context line that mentions the marker.
		if strings.TrimRight(lines[i], " \t") == "*** End Patch" {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("%w: no \"*** End Patch\" line (was the patch cut off?)", ErrPatchSyntax)
	}

	p := parser{}
	for i := begin + 1; i < end; i++ {
		if err := p.line(i+1, lines[i]); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrPatchSyntax, i+1, err)
		}
	}
	p.flushOp()
	if len(p.ops) == 0 {
		return nil, fmt.Errorf("%w: the patch has no file operations (\"*** Update File:\", \"*** Add File:\" or \"*** Delete File:\")", ErrPatchSyntax)
	}
	for _, op := range p.ops {
		if op.kind == opUpdate && len(op.hunks) == 0 && op.moveTo == "" {
			return nil, fmt.Errorf("%w: line %d: \"*** Update File: %s\" has no changes (hunk lines start with ' ', '-' or '+')", ErrPatchSyntax, op.line, op.path)
		}
	}
	return p.ops, nil
}

// parser is the state of parsePatch between lines.
type parser struct {
	ops   []patchOp
	op    *patchOp
	hunk  *hunk
	bare  int  // blank lines at the end of the current hunk or added file
	ended bool // the current hunk saw "*** End of File"
}

func (p *parser) line(n int, l string) error {
	if strings.HasPrefix(l, "***") {
		return p.marker(n, l)
	}
	if p.op == nil {
		if strings.TrimSpace(l) == "" {
			return nil
		}
		return fmt.Errorf("expected \"*** Update File:\", \"*** Add File:\" or \"*** Delete File:\", got %q", clip(l))
	}
	switch p.op.kind {
	case opDelete:
		if strings.TrimSpace(l) != "" {
			return fmt.Errorf("unexpected content after \"*** Delete File: %s\"", p.op.path)
		}
		return nil
	case opAdd:
		switch {
		case l == "":
			p.op.lines = append(p.op.lines, "")
			p.bare++
		case l[0] == '+':
			p.op.lines = append(p.op.lines, l[1:])
			p.bare = 0
		default:
			return fmt.Errorf("every line of an added file must start with '+', got %q", clip(l))
		}
		return nil
	}
	// Update.
	if strings.HasPrefix(l, "@@") {
		anchor := anchorText(l)
		if p.hunk == nil || len(p.hunk.lines) > 0 || p.ended {
			p.flushHunk()
			p.hunk = &hunk{line: n}
		}
		if anchor != "" {
			p.hunk.anchors = append(p.hunk.anchors, anchor)
		}
		return nil
	}
	if strings.HasPrefix(l, `\ `) { // "\ No newline at end of file" from diff(1)
		return nil
	}
	if p.ended {
		if strings.TrimSpace(l) == "" {
			return nil
		}
		return errors.New("a hunk ended by \"*** End of File\" cannot continue; start a new one with @@")
	}
	if p.hunk == nil {
		p.hunk = &hunk{line: n}
	}
	switch {
	case l == "":
		p.hunk.lines = append(p.hunk.lines, hunkLine{' ', ""})
		p.bare++
		return nil
	case l[0] == ' ' || l[0] == '-' || l[0] == '+':
		p.hunk.lines = append(p.hunk.lines, hunkLine{l[0], l[1:]})
	default:
		p.hunk.lines = append(p.hunk.lines, hunkLine{' ', l}) // context missing its leading space
	}
	p.bare = 0
	return nil
}

func (p *parser) marker(n int, l string) error {
	header := func(prefix string) (string, bool, error) {
		if !strings.HasPrefix(l, prefix) {
			return "", false, nil
		}
		path := strings.TrimSpace(l[len(prefix):])
		if path == "" {
			return "", true, fmt.Errorf("%q needs a file path", strings.TrimSpace(prefix))
		}
		return path, true, nil
	}
	for _, h := range []struct {
		prefix string
		kind   opKind
	}{{"*** Update File:", opUpdate}, {"*** Add File:", opAdd}, {"*** Delete File:", opDelete}} {
		path, ok, err := header(h.prefix)
		if err != nil {
			return err
		}
		if ok {
			p.flushOp()
			p.op = &patchOp{kind: h.kind, path: path, line: n}
			return nil
		}
	}
	if path, ok, err := header("*** Move to:"); ok || err != nil {
		switch {
		case err != nil:
			return err
		case p.op == nil || p.op.kind != opUpdate:
			return errors.New("\"*** Move to:\" must follow an \"*** Update File:\" line")
		case p.hunk != nil || len(p.op.hunks) > 0 || p.op.moveTo != "":
			return errors.New("\"*** Move to:\" must come right after its \"*** Update File:\" line")
		}
		p.op.moveTo = path
		return nil
	}
	if strings.TrimSpace(l) == "*** End of File" {
		if p.op == nil || p.op.kind != opUpdate || p.hunk == nil || len(p.hunk.lines) == 0 {
			return errors.New("\"*** End of File\" must end a hunk of an \"*** Update File:\"")
		}
		p.ended = true
		return nil
	}
	if p.op != nil && p.op.kind == opAdd {
		// "*** " content inside an added file is written "+*** ...", so this is a typo'd marker.
		return fmt.Errorf("unknown marker %q", clip(l))
	}
	return fmt.Errorf("unknown marker %q (expected Update File, Add File, Delete File, Move to, End of File or End Patch)", clip(l))
}

// flushHunk closes the current hunk. Trailing blank lines are separators between hunks, not
// context; a hunk with no change is dropped.
func (p *parser) flushHunk() {
	if p.hunk != nil {
		p.hunk.lines = p.hunk.lines[:len(p.hunk.lines)-p.bare]
		p.hunk.eof = p.ended
		if p.hunk.changes() {
			p.op.hunks = append(p.op.hunks, *p.hunk)
		}
	}
	p.hunk, p.bare, p.ended = nil, 0, false
}

func (p *parser) flushOp() {
	if p.op == nil {
		return
	}
	switch p.op.kind {
	case opUpdate:
		p.flushHunk()
	case opAdd:
		p.op.lines = p.op.lines[:len(p.op.lines)-p.bare]
	}
	p.ops = append(p.ops, *p.op)
	p.op, p.hunk, p.bare, p.ended = nil, nil, 0, false
}

// anchorText extracts the anchor of an @@ line: "@@ def f():" and "@@ def f(): @@" give
// "def f():"; a unified-diff header "@@ -3,7 +3,8 @@ func f()" gives the text after it.
func anchorText(l string) string {
	rest := strings.TrimSpace(l[2:])
	if m := unifiedHunkHeader.FindStringSubmatch(rest); m != nil {
		return strings.TrimSpace(m[1])
	}
	return strings.TrimSpace(strings.TrimSuffix(rest, "@@"))
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
