package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// maxResultDiff is how much of a diff the model sees in a patch result; Meta has all of it.
const maxResultDiff = 8 << 10

// Patch is the `patch` tool. Mode "replace" swaps one exact string in one file; mode "patch"
// applies a V4A multi-file patch all-or-nothing: every operation is checked against the files
// (and against the earlier operations of the same patch) before anything is written, and the
// writes are staged next to their targets and renamed into place together.
type Patch struct{}

var patchSchema = object([]string{"mode"}, map[string]*schema{
	"mode": {Type: "string", Enum: []string{"replace", "patch"}, Description: "replace: swap " +
		"old_string for new_string in path. patch: apply the V4A patch in `patch` (several files and hunks at once)."},
	"path":        {Type: "string", Description: "replace mode: the file to edit, relative to the working directory."},
	"old_string":  {Type: "string", Description: "replace mode: exact text to replace, including whitespace and indentation, without read_file line-number prefixes. It must occur exactly once unless replace_all is true; include surrounding lines to make it unique."},
	"new_string":  {Type: "string", Description: "replace mode: the replacement text (may be empty to delete)."},
	"replace_all": {Type: "boolean", Default: false, Description: "replace mode: replace every occurrence instead of requiring exactly one."},
	"patch": {Type: "string", Description: "patch mode: the patch body:\n*** Begin Patch\n*** Update File: path\n" +
		"@@ optional line naming the enclosing function or class\n context line (leading space)\n-removed line\n" +
		"+added line\n*** Add File: path\n+content line\n*** Delete File: path\n*** End Patch\n" +
		"Give about 3 context lines around each change; hunks of one file in file order. " +
		"\"*** Move to: new/path\" right after an Update File line renames the file."},
})

type patchArgs struct {
	Mode       string  `json:"mode"`
	Path       string  `json:"path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
	Patch      string  `json:"patch"`
}

// Spec describes the tool to the model.
func (Patch) Spec() model.ToolSpec {
	return toolSpec("patch",
		"Edit files. mode \"replace\" (path, old_string, new_string) replaces an exact, unique piece of text — "+
			"the usual way to change part of a file. mode \"patch\" applies a V4A patch that can update, add, "+
			"delete and rename several files at once; it is applied all-or-nothing. Returns a unified diff of "+
			"the change.",
		patchSchema)
}

// Call applies the edit.
func (Patch) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a patchArgs
	if err := decodeArgs("patch", patchSchema, c.Args, &a); err != nil {
		return argsResult(err), nil
	}
	if a.Mode == "patch" {
		if a.Path != "" || a.OldString != nil || a.NewString != nil || a.ReplaceAll {
			return tool.Errorf("mode \"patch\" takes only the `patch` field; the file paths go inside the patch body"), nil
		}
		if strings.TrimSpace(a.Patch) == "" {
			return tool.Errorf("mode \"patch\" needs the `patch` field (a body from \"*** Begin Patch\" to \"*** End Patch\")"), nil
		}
		return applyPatch(ctx, env, a.Patch), nil
	}
	var missing []string
	if a.Path == "" {
		missing = append(missing, "path")
	}
	if a.OldString == nil {
		missing = append(missing, "old_string")
	}
	if a.NewString == nil {
		missing = append(missing, "new_string")
	}
	if len(missing) > 0 {
		return tool.Errorf("mode \"replace\" needs %s", strings.Join(missing, ", ")), nil
	}
	if a.Patch != "" {
		return tool.Errorf("the `patch` field is only used with mode \"patch\""), nil
	}
	return replace(ctx, env, a.Path, *a.OldString, *a.NewString, a.ReplaceAll), nil
}

func replace(ctx context.Context, env *tool.Env, p, old, new string, all bool) tool.Result {
	path, realCwd, err := resolve(env, p)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	shown := displayPath(realCwd, path)
	if old == "" {
		return tool.Errorf("old_string is empty; to create or overwrite a whole file use write_file")
	}
	if old == new {
		return tool.Errorf("old_string and new_string are identical; nothing to change")
	}
	cur, err := readForEdit(ctx, env, path, shown)
	switch {
	case err != nil:
		return tool.Errorf("cannot patch %s: %v", shown, err)
	case !cur.exists:
		return tool.Errorf("file not found: %s (use write_file to create it)", shown)
	}
	n := strings.Count(cur.content, old)
	if n == 0 && strings.Contains(cur.content, "\r\n") && !strings.Contains(old, "\r\n") && strings.Contains(old, "\n") {
		// The model sees CRLF files through read_file without their "\r".
		old, new = strings.ReplaceAll(old, "\n", "\r\n"), strings.ReplaceAll(new, "\n", "\r\n")
		n = strings.Count(cur.content, old)
	}
	switch {
	case n == 0:
		return tool.Errorf("old_string was not found in %s. %s", shown, replaceHint(cur.content, old))
	case n > 1 && !all:
		return tool.Errorf("old_string occurs %d times in %s (at lines %s); include more surrounding lines so it "+
			"matches exactly once, or set replace_all to change every occurrence", n, shown, matchLines(cur.content, old, 10))
	}
	updated := strings.Replace(cur.content, old, new, 1)
	if all {
		updated = strings.ReplaceAll(cur.content, old, new)
	}
	if env != nil && env.ReviewEdits != nil {
		if err := env.ReviewEdits(ctx, []tool.Edit{{Path: path, OldText: cur.content, NewText: updated}}); err != nil {
			return tool.Errorf("%v; %s was not modified", err, shown)
		}
	}
	if err := writeText(ctx, env, path, shown, updated, cur.mode); err != nil {
		return tool.Errorf("cannot write %s: %v", shown, err)
	}
	d, omitted := metaDiff(shown, cur.content, updated, true, true)
	meta := map[string]any{"mode": "replace", "path": shown, "diff": d, "replacements": n}
	if omitted {
		meta["diff_omitted"] = true
	}
	plural := "occurrence"
	if n > 1 {
		plural = "occurrences"
	}
	return tool.Result{Content: fmt.Sprintf("Replaced %d %s in %s.\n%s", n, plural, shown, clipDiff(d)), Meta: meta}
}

var lineNumberPrefix = regexp.MustCompile(`(?m)^\s*\d+\|`)

// replaceHint explains the likeliest reason old_string did not match.
func replaceHint(content, old string) string {
	if lineNumberPrefix.MatchString(old) {
		return "It seems to contain read_file line-number prefixes (\"   12|\"); leave those out."
	}
	fileLines := strings.Split(content, "\n")
	oldLines := strings.Split(strings.Trim(old, "\n"), "\n")
	if i := seekLines(fileLines, 0, oldLines, strings.TrimSpace); i >= 0 {
		return fmt.Sprintf("Lines %d-%d match when whitespace is ignored: copy the exact indentation and spacing from read_file.", i+1, i+len(oldLines))
	}
	for _, l := range oldLines {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		for i, fl := range fileLines {
			if strings.TrimSpace(fl) == t {
				return fmt.Sprintf("Its first line appears at line %d but the lines after it differ; read the file again and copy the current text.", i+1)
			}
		}
		break
	}
	return "Read the file again (read_file) and copy the current text exactly."
}

// matchLines lists the 1-based line numbers where the first max occurrences of s start.
func matchLines(content, s string, max int) string {
	var nums []string
	for off := 0; len(nums) < max; {
		i := strings.Index(content[off:], s)
		if i < 0 {
			break
		}
		nums = append(nums, fmt.Sprint(strings.Count(content[:off+i], "\n")+1))
		off += i + len(s)
	}
	return strings.Join(nums, ", ")
}

// seekLines finds want in lines at or after from, comparing lines through norm; -1 if absent.
func seekLines(lines []string, from int, want []string, norm func(string) string) int {
	for i := from; i+len(want) <= len(lines); i++ {
		ok := true
		for j, w := range want {
			if norm(lines[i+j]) != norm(w) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

func clipDiff(d string) string {
	if len(d) <= maxResultDiff {
		return d
	}
	return d[:maxResultDiff] + "\n[... diff cut; the full diff is in the result metadata]\n"
}

// fileState is one file as a patch leaves it, next to what was on disk.
type fileState struct {
	abs, shown string
	orig       existing
	content    string
	exists     bool
	mode       fs.FileMode
	// opaque is set while the file holds what was on disk and that is not editable text
	// (binary, too large): it can be deleted, not updated. origOpaque remembers it for the diff.
	opaque     error
	origOpaque bool
}

// workspace is the in-memory view of the files a patch touches. Operations run against it,
// so a later operation sees the effect of earlier ones, and nothing reaches the disk until
// every operation has succeeded.
type workspace struct {
	ctx   context.Context
	env   *tool.Env
	files map[string]*fileState
	order []*fileState
}

func (w *workspace) get(p string) (*fileState, error) {
	abs, realCwd, err := resolve(w.env, p)
	if err != nil {
		return nil, err
	}
	if st, ok := w.files[abs]; ok {
		return st, nil
	}
	shown := displayPath(realCwd, abs)
	orig, err := readForEdit(w.ctx, w.env, abs, shown)
	var opaque error
	if errors.Is(err, errBinary) || errors.Is(err, errTooLarge) {
		opaque, err = err, nil
	}
	if err != nil {
		return nil, err
	}
	st := &fileState{abs: abs, shown: shown, orig: orig, content: orig.content, exists: orig.exists, mode: orig.mode, opaque: opaque, origOpaque: opaque != nil}
	w.files[abs] = st
	w.order = append(w.order, st)
	return st, nil
}

func applyPatch(ctx context.Context, env *tool.Env, body string) tool.Result {
	ops, err := parsePatch(body)
	if err != nil {
		return tool.Errorf("%v; no file was changed", err)
	}
	w := &workspace{ctx: ctx, env: env, files: map[string]*fileState{}}
	var problems []string
	for _, op := range ops {
		if err := w.apply(op); err != nil {
			problems = append(problems, fmt.Sprintf("- %s %s: %v", op.kind, op.path, err))
		}
	}
	if len(problems) > 0 {
		return tool.Errorf("patch not applied, no file was changed:\n%s", strings.Join(problems, "\n"))
	}
	if env != nil && env.ReviewEdits != nil {
		var edits []tool.Edit
		for _, st := range w.order {
			if st.exists == st.orig.exists && st.content == st.orig.content {
				continue
			}
			edits = append(edits, tool.Edit{Path: st.abs, OldText: st.orig.content, NewText: st.content, Created: !st.orig.exists, Deleted: !st.exists})
		}
		if len(edits) > 0 {
			if err := env.ReviewEdits(ctx, edits); err != nil {
				return tool.Errorf("%v; no file was changed", err)
			}
		}
	}
	return w.commit()
}

func (w *workspace) apply(op patchOp) error {
	st, err := w.get(op.path)
	if err != nil {
		return err
	}
	switch op.kind {
	case opAdd:
		if st.exists {
			return errors.New("the file already exists; use \"*** Update File:\" to change it")
		}
		st.content, st.exists, st.mode, st.opaque = joinLines(op.lines, true), true, newFileMode, nil
	case opDelete:
		if !st.exists {
			return errors.New("no such file")
		}
		st.content, st.exists, st.opaque = "", false, nil
	case opUpdate:
		if !st.exists {
			return errors.New("no such file (use \"*** Add File:\" to create it)")
		}
		if st.opaque != nil {
			return st.opaque
		}
		updated, err := applyHunks(st.content, op.hunks)
		if err != nil {
			return err
		}
		st.content = updated
		if op.moveTo == "" {
			return nil
		}
		dst, err := w.get(op.moveTo)
		if err != nil {
			return fmt.Errorf("move to %s: %w", op.moveTo, err)
		}
		if dst == st {
			return nil
		}
		if dst.exists {
			return fmt.Errorf("cannot move to %s: it already exists", dst.shown)
		}
		dst.content, dst.exists, dst.mode = st.content, true, st.mode
		st.content, st.exists = "", false
	}
	return nil
}

// commit writes the workspace: every new content is staged first (a failure there leaves all
// files as they were), then renamed into place, then removed files are deleted. With a file
// system lent by the surface the new contents go through it instead (see writeLent).
func (w *workspace) commit() tool.Result {
	done, failed, lent := w.writeLent()
	if !lent {
		var res *tool.Result
		if done, failed, res = w.writeDisk(); res != nil {
			return *res
		}
	}
	return w.report(done, failed)
}

// writeLent writes the new contents through env.FS, one file at a time: an editor's buffers
// cannot be swapped in one step, so a failure part way is reported as a partial patch.
// Deletions still happen on disk (the protocol has no delete). lent is false, with nothing
// written, when there is no lent file system or it does not write files.
func (w *workspace) writeLent() (done, failed []string, lent bool) {
	if w.env == nil || w.env.FS == nil {
		return nil, nil, false
	}
	for _, st := range w.order {
		if !st.exists || (st.orig.exists && st.content == st.orig.content) {
			continue
		}
		err := os.MkdirAll(filepath.Dir(st.abs), 0o755)
		if err == nil {
			err = w.env.FS.WriteTextFile(w.ctx, st.abs, st.content)
		}
		if errors.Is(err, errors.ErrUnsupported) && len(done) == 0 {
			return nil, nil, false
		}
		if err != nil {
			return done, append(failed, fmt.Sprintf("%s: the editor could not write it: %v", st.shown, err)), true
		}
		done = append(done, st.shown)
	}
	done, failed = w.remove(done)
	return done, failed, true
}

// remove deletes the files the patch removed; it runs after every write succeeded.
func (w *workspace) remove(done []string) (_, failed []string) {
	for _, st := range w.order {
		if st.exists || !st.orig.exists {
			continue
		}
		if err := os.Remove(st.abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
			failed = append(failed, fmt.Sprintf("%s: %v", st.shown, err))
			continue
		}
		done = append(done, st.shown)
	}
	return done, failed
}

// writeDisk stages every new content, renames it into place, then deletes removed files.
// res is set when staging failed and nothing was changed.
func (w *workspace) writeDisk() (done, failed []string, res *tool.Result) {
	type staged struct {
		st  *fileState
		tmp string
	}
	var writes []staged
	cleanup := func() {
		for _, s := range writes {
			os.Remove(s.tmp)
		}
	}
	for _, st := range w.order {
		if st.exists && (!st.orig.exists || st.content != st.orig.content || st.mode != st.orig.mode) {
			tmp, err := stageFile(st.abs, []byte(st.content), st.mode)
			if err != nil {
				cleanup()
				r := tool.Errorf("patch not applied, no file was changed: cannot write %s: %v", st.shown, err)
				return nil, nil, &r
			}
			writes = append(writes, staged{st, tmp})
		}
	}
	for i, s := range writes {
		if err := os.Rename(s.tmp, s.st.abs); err != nil {
			for _, rest := range writes[i:] {
				os.Remove(rest.tmp)
			}
			failed = append(failed, fmt.Sprintf("%s: %v", s.st.shown, err))
			break
		}
		done = append(done, s.st.shown)
	}
	if len(failed) == 0 {
		done, failed = w.remove(done)
	}
	return done, failed, nil
}

// report describes the committed workspace to the model, with the diff in Meta.
func (w *workspace) report(done, failed []string) tool.Result {
	var diffs strings.Builder
	var summary, paths []string
	for _, st := range w.order {
		var verb string
		switch {
		case !st.orig.exists && st.exists:
			verb = "added"
		case st.orig.exists && !st.exists:
			verb = "deleted"
		case st.content != st.orig.content:
			verb = "updated"
		default:
			continue
		}
		summary = append(summary, verb+" "+st.shown)
		paths = append(paths, st.shown)
		if st.origOpaque {
			to := "b/" + st.shown
			if !st.exists {
				to = "/dev/null"
			}
			fmt.Fprintf(&diffs, "Binary files a/%s and %s differ\n", st.shown, to)
			continue
		}
		diffs.WriteString(unifiedDiff(st.shown, st.orig.content, st.content, st.orig.exists, st.exists))
	}
	d := diffs.String()
	meta := map[string]any{"mode": "patch", "paths": paths}
	if len(paths) > 0 {
		meta["path"] = paths[0]
	}
	if len(d) > maxDiffBytes {
		meta["diff_omitted"] = true
	} else {
		meta["diff"] = d
	}
	if len(failed) > 0 {
		return tool.Result{IsError: true, Meta: meta, Content: fmt.Sprintf(
			"patch PARTIALLY applied: writing failed (%s) after %s were changed; check the files before retrying",
			strings.Join(failed, "; "), strings.Join(done, ", "))}
	}
	return tool.Result{Content: fmt.Sprintf("Applied patch: %s.\n%s", strings.Join(summary, ", "), clipDiff(d)), Meta: meta}
}

// applyHunks applies the hunks of one file in order. Each hunk must match the file at exactly
// one place after the previous hunk (after its @@ anchors, if any): exactly, then ignoring
// trailing whitespace, then ignoring surrounding whitespace. Context lines keep the file's
// text, so a loose match never rewrites lines the hunk did not mean to change.
func applyHunks(content string, hunks []hunk) (string, error) {
	var raw []string // lines without "\n", possibly ending in "\r"
	if content != "" {
		raw = strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	}
	finalNL := content == "" || strings.HasSuffix(content, "\n")
	crlf := strings.Count(content, "\r\n")*2 > strings.Count(content, "\n")
	added := func(s string) string {
		if crlf {
			return s + "\r"
		}
		return s
	}
	cursor := 0
	for hi, h := range hunks {
		where := fmt.Sprintf("hunk %d", hi+1)
		for _, anchor := range h.anchors {
			i := findAnchor(raw, cursor, anchor)
			if i < 0 {
				return "", fmt.Errorf("%s: its @@ line %q was not found%s", where, anchor, afterLine(cursor))
			}
			cursor = i + 1
		}
		old, _ := h.split()
		if len(old) == 0 { // pure insertion: after the anchor, else at the end
			pos := len(raw)
			if len(h.anchors) > 0 && !h.eof {
				pos = cursor
			}
			ins := make([]string, 0, len(h.lines))
			for _, l := range h.lines {
				ins = append(ins, added(l.text))
			}
			raw = append(raw[:pos], append(ins, raw[pos:]...)...)
			cursor = pos + len(ins)
			continue
		}
		pos, err := seekHunk(raw, cursor, old, h.eof)
		if err != nil {
			return "", fmt.Errorf("%s: %v", where, err)
		}
		repl := make([]string, 0, len(h.lines))
		j := pos
		for _, l := range h.lines {
			switch l.kind {
			case ' ':
				repl = append(repl, raw[j])
				j++
			case '-':
				j++
			case '+':
				repl = append(repl, added(l.text))
			}
		}
		raw = append(raw[:pos], append(repl, raw[pos+len(old):]...)...)
		cursor = pos + len(repl)
	}
	if len(raw) == 0 {
		return "", nil
	}
	return joinLines(raw, finalNL), nil
}

// joinLines joins lines with "\n", ending with one when finalNL.
func joinLines(lines []string, finalNL bool) string {
	if len(lines) == 0 {
		return ""
	}
	s := strings.Join(lines, "\n")
	if finalNL {
		s += "\n"
	}
	return s
}

var matchLevels = []struct {
	name string
	norm func(string) string
}{
	{"exactly", func(s string) string { return strings.TrimSuffix(s, "\r") }},
	{"ignoring trailing whitespace", func(s string) string { return strings.TrimRight(s, " \t\r") }},
	{"ignoring surrounding whitespace", strings.TrimSpace},
}

// seekHunk finds the one place at or after from where old matches (at the end of the file
// when eof), trying each match level in turn.
func seekHunk(raw []string, from int, old []string, eof bool) (int, error) {
	for _, lvl := range matchLevels {
		if eof {
			if i := len(raw) - len(old); i >= from && seekLines(raw, i, old, lvl.norm) == i {
				return i, nil
			}
			continue
		}
		first := seekLines(raw, from, old, lvl.norm)
		if first < 0 {
			continue
		}
		at := []string{fmt.Sprint(first + 1)}
		for i := seekLines(raw, first+1, old, lvl.norm); i >= 0; i = seekLines(raw, i+1, old, lvl.norm) {
			at = append(at, fmt.Sprint(i+1))
		}
		if len(at) > 1 {
			return 0, fmt.Errorf("its context and removed lines match %d places%s (lines %s, %s); add context lines or an "+
				"@@ line naming the enclosing function so it matches one", len(at), afterLine(from), strings.Join(at, ", "), lvl.name)
		}
		return first, nil
	}
	return 0, hunkMismatch(raw, from, old, eof)
}

func hunkMismatch(raw []string, from int, old []string, eof bool) error {
	where := "the file"
	if eof {
		where = "the end of the file"
	}
	preview := old
	if len(preview) > 4 {
		preview = preview[:4]
	}
	msg := fmt.Sprintf("its context and removed lines were not found in %s%s; expected lines starting with %q", where, afterLine(from), preview)
	if from > 0 {
		if i := seekLines(raw, 0, old, strings.TrimSpace); i >= 0 && i < from {
			return fmt.Errorf("%s. They match at line %d, before the previous hunk: hunks of one file must be in file order", msg, i+1)
		}
	}
	for _, l := range old {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		for i := from; i < len(raw); i++ {
			if strings.TrimSpace(raw[i]) == t {
				return fmt.Errorf("%s. The first of them occurs at line %d but the lines after it differ; read the file again and copy the current text", msg, i+1)
			}
		}
		break
	}
	return fmt.Errorf("%s. Read the file again and copy the current text", msg)
}

// findAnchor finds the line an @@ anchor names at or after from: equal, equal ignoring
// surrounding whitespace, or containing it.
func findAnchor(raw []string, from int, anchor string) int {
	t := strings.TrimSpace(anchor)
	for _, match := range []func(string) bool{
		func(l string) bool { return strings.TrimSuffix(l, "\r") == anchor },
		func(l string) bool { return strings.TrimSpace(l) == t },
		func(l string) bool { return strings.Contains(l, t) },
	} {
		for i := from; i < len(raw); i++ {
			if match(raw[i]) {
				return i
			}
		}
	}
	return -1
}

func afterLine(cursor int) string {
	if cursor == 0 {
		return ""
	}
	return fmt.Sprintf(" after line %d", cursor)
}
