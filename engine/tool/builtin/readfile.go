package builtin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

const (
	defaultReadLimit = 2000
	maxReadLimit     = 10_000
	maxLineLen       = 2000 // characters of one line shown; the rest is summarised
)

// ReadFile is the `read_file` tool: a window of a text file with line numbers.
type ReadFile struct{}

var readFileSchema = func() *schema {
	olo, ohi := intRange(1, 1<<31-1)
	llo, lhi := intRange(1, maxReadLimit)
	return object([]string{"path"}, map[string]*schema{
		"path":   {Type: "string", Description: "File to read, relative to the working directory (or absolute inside it)."},
		"offset": {Type: "integer", Minimum: olo, Maximum: ohi, Default: 1, Description: "First line to show, 1-based."},
		"limit":  {Type: "integer", Minimum: llo, Maximum: lhi, Default: defaultReadLimit, Description: "Maximum number of lines to show."},
	})
}()

type readFileArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

// Spec describes the tool to the model.
func (ReadFile) Spec() model.ToolSpec {
	return toolSpec("read_file",
		fmt.Sprintf("Read a text file. Lines are shown as `   12|text` (the line number and '|' are not part of "+
			"the file: leave them out of old_string when patching). Shows up to %d lines from offset; a footer "+
			"gives the total line count and how to read on. Lines longer than %d characters are cut. Binary "+
			"files are refused.", defaultReadLimit, maxLineLen),
		readFileSchema)
}

// Call reads the file.
func (ReadFile) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a readFileArgs
	if err := decodeArgs("read_file", readFileSchema, c.Args, &a); err != nil {
		return argsResult(err), nil
	}
	offset, limit := orDefault(a.Offset, 1), orDefault(a.Limit, defaultReadLimit)
	path, realCwd, err := resolve(env, a.Path)
	if err != nil {
		return tool.Errorf("%v", err), nil
	}
	shown := displayPath(realCwd, path)
	// Stat before opening: opening a FIFO would block until something writes to it.
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return openError(shown, err), nil
	case fi.IsDir():
		return tool.Errorf("%s is a directory, not a file; use search_files with target \"files\" to list it", shown), nil
	case !fi.Mode().IsRegular():
		return tool.Errorf("%s is not a regular file (%v)", shown, fi.Mode().Type()), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return openError(shown, err), nil
	}
	defer f.Close()
	head, err := readPrefix(f, sniffSize)
	if err != nil {
		return tool.Errorf("cannot read %s: %v", shown, err), nil
	}
	if looksBinary(head) {
		return tool.Errorf("%s looks like a binary file; read_file only shows text (inspect it with the terminal, e.g. `file` or `xxd | head`)", shown), nil
	}

	var src io.Reader = io.MultiReader(strings.NewReader(string(head)), f)
	// The disk said what the file is; an editor's lent file system says what it holds now,
	// unsaved changes included.
	if text, lent, err := lentRead(ctx, env, path, shown, fi.Size()); err != nil {
		return tool.Errorf("cannot read %s: %v", shown, err), nil
	} else if lent {
		src = strings.NewReader(text)
	}
	r := bufio.NewReaderSize(src, 64<<10)
	var b strings.Builder
	total, shownLines, cut := 0, 0, 0
	for {
		line, full, err := readLine(r, maxLineLen)
		if err == io.EOF {
			break
		}
		if err != nil {
			return tool.Errorf("cannot read %s: %v", shown, err), nil
		}
		total++
		if total%4096 == 0 && ctx.Err() != nil {
			return tool.Errorf("interrupted while reading %s", shown), nil
		}
		if total < offset || shownLines >= limit {
			continue
		}
		shownLines++
		line = strings.ToValidUTF8(line, "\uFFFD")
		if full > len(line) {
			cut++
			line += fmt.Sprintf(" [... line cut: %d more bytes]", full-len(line))
		}
		fmt.Fprintf(&b, "%5d|%s\n", total, line)
	}

	meta := map[string]any{"path": shown, "total_lines": total, "offset": offset}
	switch {
	case total == 0:
		return tool.Result{Content: fmt.Sprintf("(%s is empty)", shown), Meta: meta}, nil
	case offset > total:
		return tool.Errorf("offset %d is past the end of %s, which has %d lines", offset, shown, total), nil
	}
	last := offset + shownLines - 1
	if last < total {
		fmt.Fprintf(&b, "[showing lines %d-%d of %d; use offset=%d to read on]", offset, last, total, last+1)
		meta["truncated"] = true
	} else {
		fmt.Fprintf(&b, "[end of file: %d lines]", total)
	}
	if cut > 0 {
		meta["lines_cut"] = cut
	}
	return tool.Result{Content: b.String(), Meta: meta}, nil
}

// readLine returns the next line without its "\n" or "\r\n", keeping at most max bytes of it (cut at a
// character boundary), and the full length of the line. It returns io.EOF only when no line
// is left.
func readLine(r *bufio.Reader, max int) (line string, full int, err error) {
	var kept []byte
	var last byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(chunk) > 0 {
			body := chunk
			if body[len(body)-1] == '\n' {
				body = body[:len(body)-1]
			}
			if len(body) > 0 {
				last = body[len(body)-1]
			}
			full += len(body)
			if room := max - len(kept); room > 0 {
				kept = append(kept, body[:min(room, len(body))]...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil, err == io.EOF && (len(chunk) > 0 || full > 0):
			if last == '\r' { // a CRLF line ending is not content
				full--
				if len(kept) > full {
					kept = kept[:full]
				}
			}
			if full > len(kept) {
				return trimRune(kept), full, nil
			}
			return string(kept), full, nil
		default:
			return "", 0, err
		}
	}
}

// trimRune drops a multi-byte character cut in half at the end of b.
func trimRune(b []byte) string {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return string(b)
}

func openError(shown string, err error) tool.Result {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf("file not found: %s", shown)
	case errors.Is(err, fs.ErrPermission):
		return tool.Errorf("permission denied: %s", shown)
	}
	return tool.Errorf("cannot open %s: %v", shown, err)
}
