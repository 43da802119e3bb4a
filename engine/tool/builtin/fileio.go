package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/tool"
)

const (
	// maxEditSize bounds the files patch edits in memory and write_file diffs against.
	maxEditSize = 10 << 20
	// sniffSize is how much of a file decides whether it is text.
	sniffSize = 8 << 10
	// newFileMode is the permission of files the tools create; edits keep the old mode.
	newFileMode fs.FileMode = 0o644
)

// errBinary and errTooLarge mark files an edit cannot read as text. readForEdit still
// reports their mode with them, so a whole-file write can replace them.
var (
	errBinary   = errors.New("binary file")
	errTooLarge = errors.New("file too large")
)

// looksBinary reports whether a file starting with b is not text: it holds a NUL byte, or more
// than a tenth of it is control characters or invalid UTF-8. A multi-byte character cut at
// the end of the sample is not held against it.
func looksBinary(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	odd := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c == 0 {
			return true
		}
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v' && c != '\b' && c != 0x1b {
				odd++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			if len(b)-i < utf8.UTFMax && !utf8.FullRune(b[i:]) {
				break
			}
			odd++
		}
		i += size
	}
	return odd*10 > len(b)
}

// existing is what an edit knows about the file it replaces.
type existing struct {
	content string
	mode    fs.FileMode
	exists  bool
}

// readForEdit reads a text file that an edit will replace. A missing file is not an error
// (exists is false); a directory, a binary file or one over maxEditSize is. For the last two
// the error wraps errBinary or errTooLarge and the returned existing has mode and exists set.
// The disk decides what exists and whether it is text; a file system lent by the surface
// (env.FS) supplies the current text, which may be an unsaved buffer.
func readForEdit(ctx context.Context, env *tool.Env, path, shown string) (existing, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return existing{mode: newFileMode}, nil
	}
	if err != nil {
		return existing{}, err
	}
	if fi.IsDir() {
		return existing{}, fmt.Errorf("%s is a directory", shown)
	}
	if !fi.Mode().IsRegular() {
		return existing{}, fmt.Errorf("%s is not a regular file", shown)
	}
	if fi.Size() > maxEditSize {
		return existing{mode: fi.Mode().Perm(), exists: true},
			fmt.Errorf("%w: %s has %d bytes, more than the %d this tool edits; use the terminal", errTooLarge, shown, fi.Size(), maxEditSize)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return existing{}, err
	}
	if looksBinary(b[:min(len(b), sniffSize)]) {
		return existing{mode: fi.Mode().Perm(), exists: true},
			fmt.Errorf("%w: %s does not look like text", errBinary, shown)
	}
	content := string(b)
	if text, lent, err := lentRead(ctx, env, path, shown, fi.Size()); err != nil {
		return existing{}, err
	} else if lent {
		content = text
	}
	return existing{content: content, mode: fi.Mode().Perm(), exists: true}, nil
}

// maxLentRead is the largest file (by its size on disk) read through a lent file system. A
// surface's file system is reached through protocol messages, whose size is bounded; bigger
// files are read from disk, where an editor seldom holds unsaved changes to them anyway.
const maxLentRead = 2 << 20

// lentRead reads path, whose size on disk is size, through the file system the surface lent
// (env.FS). lent is false when there is none, it does not read files or the file is over
// maxLentRead; the caller then reads the disk.
func lentRead(ctx context.Context, env *tool.Env, path, shown string, size int64) (text string, lent bool, err error) {
	if env == nil || env.FS == nil || size > maxLentRead {
		return "", false, nil
	}
	text, err = env.FS.ReadTextFile(ctx, path)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("the editor could not read %s: %w", shown, err)
	}
	return text, true, nil
}

// writeText replaces path with data: through the file system the surface lent (env.FS),
// which writes the editor's buffer and lets the user review the edit, else atomically on
// disk. Missing parent directories are created on disk either way, as the tools promise.
func writeText(ctx context.Context, env *tool.Env, path, shown, data string, mode fs.FileMode) error {
	if env != nil && env.FS != nil {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		err := env.FS.WriteTextFile(ctx, path, data)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("the editor could not write %s: %w", shown, err)
		}
	}
	return writeAtomic(path, []byte(data), mode)
}

// stageFile writes data to a new temporary file next to path (so the later rename stays on one
// file system and is atomic), creating missing parent directories. The caller renames it over
// path, or removes it.
func stageFile(path string, data []byte, mode fs.FileMode) (tmp string, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	if err = f.Chmod(mode); err != nil {
		return "", err
	}
	// Sync before the rename: otherwise a crash can leave the new name pointing at an empty
	// file, which is worse than either version.
	if err = f.Sync(); err != nil {
		return "", err
	}
	if err = f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// writeAtomic replaces path with data in one rename.
func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := stageFile(path, data, mode)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// readPrefix reads up to n bytes from the start of f.
func readPrefix(f *os.File, n int) ([]byte, error) {
	buf := make([]byte, n)
	k, err := io.ReadFull(f, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return buf[:k], err
}
