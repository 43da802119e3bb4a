package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// editorFS stands in for an editor's buffers: reads return the buffer (which may differ from
// the disk), writes land in the buffer only.
type editorFS struct {
	mu       sync.Mutex
	buffers  map[string]string
	reads    []string
	writes   []string
	noRead   bool // reads are unsupported: the tool must use the disk
	noWrite  bool
	writeErr error
}

func (f *editorFS) ReadTextFile(_ context.Context, path string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noRead {
		return "", errors.ErrUnsupported
	}
	f.reads = append(f.reads, path)
	text, ok := f.buffers[path]
	if !ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		text = string(b)
	}
	return text, nil
}

func (f *editorFS) WriteTextFile(_ context.Context, path, content string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noWrite {
		return errors.ErrUnsupported
	}
	if f.writeErr != nil {
		return f.writeErr
	}
	f.writes = append(f.writes, path)
	if f.buffers == nil {
		f.buffers = map[string]string{}
	}
	f.buffers[path] = content
	return nil
}

func writeDisk(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func diskContent(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadFileUsesLentBuffer(t *testing.T) {
	env := newEnv(t)
	path := filepath.Join(env.Cwd, "a.txt")
	writeDisk(t, path, "on disk\n")
	fs := &editorFS{buffers: map[string]string{path: "unsaved one\nunsaved two\n"}}
	env.FS = fs
	res := mustOK(t, call(t, ReadFile{}, env, map[string]any{"path": "a.txt", "offset": 2}))
	if !strings.Contains(res.Content, "    2|unsaved two") || strings.Contains(res.Content, "on disk") {
		t.Fatalf("read: %s", res.Content)
	}
	if len(fs.reads) != 1 || fs.reads[0] != path {
		t.Fatalf("editor reads: %v (want the absolute path %s)", fs.reads, path)
	}
	// The disk still decides what the file is: a missing file is not asked for.
	mustFail(t, call(t, ReadFile{}, env, map[string]any{"path": "missing.txt"}), "file not found")
	if len(fs.reads) != 1 {
		t.Fatalf("editor asked for a missing file: %v", fs.reads)
	}
	// Confinement is checked before the editor sees the path.
	mustFail(t, call(t, ReadFile{}, env, map[string]any{"path": "/etc/hostname"}), "outside the working directory")
	if len(fs.reads) != 1 {
		t.Fatalf("editor asked for a path outside the working directory: %v", fs.reads)
	}
	// An editor that does not read files leaves the tool on the disk.
	env.FS = &editorFS{noRead: true}
	if res := mustOK(t, call(t, ReadFile{}, env, map[string]any{"path": "a.txt"})); !strings.Contains(res.Content, "on disk") {
		t.Fatalf("fallback read: %s", res.Content)
	}
}

func TestReadFileEditorErrorIsToolError(t *testing.T) {
	env := newEnv(t)
	writeDisk(t, filepath.Join(env.Cwd, "a.txt"), "x\n")
	env.FS = failingFS{}
	mustFail(t, call(t, ReadFile{}, env, map[string]any{"path": "a.txt"}), "cannot read a.txt", "the editor could not read a.txt", "buffer gone")
}

type failingFS struct{}

func (failingFS) ReadTextFile(context.Context, string) (string, error) {
	return "", errors.New("buffer gone")
}
func (failingFS) WriteTextFile(context.Context, string, string) error {
	return errors.New("user rejected the edit")
}

func TestWriteFileGoesToEditorNotDisk(t *testing.T) {
	env := newEnv(t)
	fs := &editorFS{}
	env.FS = fs
	newPath := filepath.Join(env.Cwd, "sub", "new.txt")
	res := mustOK(t, call(t, WriteFile{}, env, map[string]any{"path": "sub/new.txt", "content": "hello\n"}))
	if got := diskContent(t, newPath); got != "<missing>" {
		t.Fatalf("write reached the disk: %q", got)
	}
	if fs.buffers[newPath] != "hello\n" || res.Meta["created"] != true {
		t.Fatalf("buffers %v meta %v", fs.buffers, res.Meta)
	}
	// Replacing diffs against the buffer, not the disk.
	old := filepath.Join(env.Cwd, "old.txt")
	writeDisk(t, old, "disk\n")
	fs.buffers[old] = "buffer\n"
	res = mustOK(t, call(t, WriteFile{}, env, map[string]any{"path": "old.txt", "content": "new\n"}))
	if d, _ := res.Meta["diff"].(string); !strings.Contains(d, "-buffer") || !strings.Contains(d, "+new") {
		t.Fatalf("diff: %q", d)
	}
	if diskContent(t, old) != "disk\n" {
		t.Fatal("the disk copy changed")
	}
	env.FS = failingFS{}
	mustFail(t, call(t, WriteFile{}, env, map[string]any{"path": "x.txt", "content": "y"}), "cannot write x.txt", "user rejected the edit")
	if diskContent(t, filepath.Join(env.Cwd, "x.txt")) != "<missing>" {
		t.Fatal("a rejected write reached the disk")
	}
	// No write support: the disk, atomically as usual.
	env.FS = &editorFS{noWrite: true}
	mustOK(t, call(t, WriteFile{}, env, map[string]any{"path": "x.txt", "content": "y"}))
	if diskContent(t, filepath.Join(env.Cwd, "x.txt")) != "y" {
		t.Fatal("fallback write did not reach the disk")
	}
}

func TestPatchThroughEditor(t *testing.T) {
	env := newEnv(t)
	a, b, gone := filepath.Join(env.Cwd, "a.go"), filepath.Join(env.Cwd, "b.go"), filepath.Join(env.Cwd, "gone.txt")
	writeDisk(t, a, "package a\n")
	writeDisk(t, gone, "bye\n")
	fs := &editorFS{buffers: map[string]string{a: "package a\n\nfunc F() {}\n"}}
	env.FS = fs
	res := mustOK(t, call(t, Patch{}, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "func F() {}", "new_string": "func G() {}"}))
	if fs.buffers[a] != "package a\n\nfunc G() {}\n" || diskContent(t, a) != "package a\n" {
		t.Fatalf("replace: buffer %q disk %q (%s)", fs.buffers[a], diskContent(t, a), res.Content)
	}
	body := "*** Begin Patch\n*** Update File: a.go\n@@\n-func G() {}\n+func H() {}\n*** Add File: b.go\n+package b\n*** Delete File: gone.txt\n*** End Patch"
	res = mustOK(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": body}))
	if fs.buffers[a] != "package a\n\nfunc H() {}\n" || fs.buffers[b] != "package b\n" {
		t.Fatalf("patch buffers: %v (%s)", fs.buffers, res.Content)
	}
	if diskContent(t, b) != "<missing>" || diskContent(t, gone) != "<missing>" {
		t.Fatalf("disk after patch: b=%q gone=%q", diskContent(t, b), diskContent(t, gone))
	}
	// A failing editor write is a tool error naming the file.
	env.FS = &editorFS{buffers: map[string]string{}, writeErr: errors.New("read-only buffer")}
	mustFail(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": "*** Begin Patch\n*** Add File: c.go\n+package c\n*** End Patch"}),
		"c.go", "read-only buffer")
}

func TestLargeFilesAreReadFromDisk(t *testing.T) {
	env := newEnv(t)
	path := filepath.Join(env.Cwd, "big.txt")
	writeDisk(t, path, strings.Repeat("line on disk\n", maxLentRead/13+1))
	fs := &editorFS{buffers: map[string]string{path: "buffer\n"}}
	env.FS = fs
	res := mustOK(t, call(t, ReadFile{}, env, map[string]any{"path": "big.txt", "limit": 1}))
	if !strings.Contains(res.Content, "line on disk") || len(fs.reads) != 0 {
		t.Fatalf("read %q, editor reads %v", res.Content, fs.reads)
	}
}
