package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	env := newEnv(t)
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	writeFile(t, env.Cwd, "src/a.txt", b.String())
	rf := ReadFile{}

	res := mustOK(t, call(t, rf, env, map[string]any{"path": "src/a.txt"}))
	if !strings.HasPrefix(res.Content, "    1|line 1\n    2|line 2\n") || !strings.HasSuffix(res.Content, "   30|line 30\n[end of file: 30 lines]") {
		t.Fatalf("whole file: %q", res.Content)
	}
	if res.Meta["total_lines"] != 30 || res.Meta["path"] != "src/a.txt" {
		t.Fatalf("meta %v", res.Meta)
	}

	res = mustOK(t, call(t, rf, env, map[string]any{"path": "src/a.txt", "offset": 12, "limit": 3}))
	want := "   12|line 12\n   13|line 13\n   14|line 14\n[showing lines 12-14 of 30; use offset=15 to read on]"
	if res.Content != want || res.Meta["truncated"] != true {
		t.Fatalf("window: %q", res.Content)
	}

	mustFail(t, call(t, rf, env, map[string]any{"path": "src/a.txt", "offset": 31}), "past the end", "30 lines")
	mustFail(t, call(t, rf, env, map[string]any{"path": "src/nope.txt"}), "file not found: src/nope.txt")
	mustFail(t, call(t, rf, env, map[string]any{"path": "src"}), "is a directory")
	mustFail(t, call(t, rf, env, map[string]any{"path": "../x"}), "outside the working directory")
	mustFail(t, call(t, rf, env, `{"path": 5}`), `invalid arguments for read_file: field "path" must be a string`)

	writeFile(t, env.Cwd, "img.bin", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	mustFail(t, call(t, rf, env, map[string]any{"path": "img.bin"}), "binary file")

	writeFile(t, env.Cwd, "empty.txt", "")
	res = mustOK(t, call(t, rf, env, map[string]any{"path": "empty.txt"}))
	if !strings.Contains(res.Content, "empty") || res.Meta["total_lines"] != 0 {
		t.Fatalf("empty: %q", res.Content)
	}

	// CRLF, a last line without newline, UTF-8, and an over-long line.
	long := strings.Repeat("é", maxLineLen) // two bytes each: cut at a character boundary
	writeFile(t, env.Cwd, "mixed.txt", "crlf\r\nünïcödé\n"+long+"\nlast")
	res = mustOK(t, call(t, rf, env, map[string]any{"path": "mixed.txt"}))
	lines := strings.Split(res.Content, "\n")
	if lines[0] != "    1|crlf" || lines[1] != "    2|ünïcödé" || lines[3] != "    4|last" {
		t.Fatalf("mixed: %q", res.Content)
	}
	if want := "    3|" + strings.Repeat("é", maxLineLen/2) + fmt.Sprintf(" [... line cut: %d more bytes]", maxLineLen); lines[2] != want {
		t.Fatalf("long line: %q", lines[2][:80])
	}
	if res.Meta["lines_cut"] != 1 {
		t.Fatalf("meta %v", res.Meta)
	}
}

func TestReadFileThroughSymlink(t *testing.T) {
	env := newEnv(t)
	outside := newEnv(t).Cwd
	writeFile(t, outside, "secret", "top secret\n")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(env.Cwd, "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	res := mustFail(t, call(t, ReadFile{}, env, map[string]any{"path": "innocent.txt"}), "symbolic link", "outside the working directory")
	if strings.Contains(res.Content, "top secret") {
		t.Fatal("leaked the file")
	}
}

func TestWriteFile(t *testing.T) {
	env := newEnv(t)
	wf := WriteFile{}
	res := mustOK(t, call(t, wf, env, map[string]any{"path": "deep/new/dir/f.txt", "content": "a\nb\n"}))
	if got := readFile(t, env.Cwd, "deep/new/dir/f.txt"); got != "a\nb\n" {
		t.Fatalf("content %q", got)
	}
	if res.Meta["created"] != true || res.Meta["diff"] != "--- /dev/null\n+++ b/deep/new/dir/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n" {
		t.Fatalf("create meta %v", res.Meta)
	}
	if !strings.HasPrefix(res.Content, "Created deep/new/dir/f.txt") {
		t.Fatalf("content %q", res.Content)
	}

	p := filepath.Join(env.Cwd, "deep/new/dir/f.txt")
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	res = mustOK(t, call(t, wf, env, map[string]any{"path": "deep/new/dir/f.txt", "content": "a\nc\n"}))
	if res.Meta["created"] != false || res.Meta["diff"] != "--- a/deep/new/dir/f.txt\n+++ b/deep/new/dir/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n" {
		t.Fatalf("replace meta %v", res.Meta)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode not kept: %v", fi.Mode())
	}
	// No temporary files are left next to the target.
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Fatalf("leftovers: %v", entries)
	}

	mustFail(t, call(t, wf, env, map[string]any{"path": "../escape.txt", "content": "x"}), "outside the working directory")
	if _, err := os.Stat(filepath.Join(filepath.Dir(env.Cwd), "escape.txt")); err == nil {
		t.Fatal("wrote outside")
	}
	mustFail(t, call(t, wf, env, map[string]any{"path": "deep", "content": "x"}), "is a directory")
	mustFail(t, call(t, wf, env, map[string]any{"path": "x.txt"}), `missing required field "content"`)
	mustFail(t, call(t, wf, env, map[string]any{"path": "x.txt", "content": 5}), `field "content" must be a string`)
}

func TestWriteFileSymlinks(t *testing.T) {
	env := newEnv(t)
	outside := newEnv(t).Cwd
	if err := os.Symlink(filepath.Join(outside, "created.txt"), filepath.Join(env.Cwd, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(env.Cwd, "outdir")); err != nil {
		t.Fatal(err)
	}
	mustFail(t, call(t, WriteFile{}, env, map[string]any{"path": "dangling", "content": "x"}), "symbolic link")
	mustFail(t, call(t, WriteFile{}, env, map[string]any{"path": "outdir/a/b.txt", "content": "x"}), "symbolic link")
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("wrote outside: %v", entries)
	}

	// A link to a file inside is written through: the link stays, the target changes.
	writeFile(t, env.Cwd, "real.txt", "old\n")
	if err := os.Symlink("real.txt", filepath.Join(env.Cwd, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	mustOK(t, call(t, WriteFile{}, env, map[string]any{"path": "alias.txt", "content": "new\n"}))
	if got := readFile(t, env.Cwd, "real.txt"); got != "new\n" {
		t.Fatalf("target %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(env.Cwd, "alias.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link replaced: %v %v", fi, err)
	}
}

func TestPatchReplace(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "a.go", "package a\n\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 1\n}\n")
	p := Patch{}
	res := mustOK(t, call(t, p, env, map[string]any{
		"mode": "replace", "path": "a.go", "old_string": "func A() int {\n\treturn 1", "new_string": "func A() int {\n\treturn 2",
	}))
	if got := readFile(t, env.Cwd, "a.go"); !strings.Contains(got, "func A() int {\n\treturn 2\n}\n\nfunc B() int {\n\treturn 1\n}") {
		t.Fatalf("content %q", got)
	}
	wantDiff := "--- a/a.go\n+++ b/a.go\n@@ -1,7 +1,7 @@\n package a\n \n func A() int {\n-\treturn 1\n+\treturn 2\n }\n \n func B() int {\n"
	if res.Meta["diff"] != wantDiff || !strings.Contains(res.Content, wantDiff) || res.Meta["replacements"] != 1 {
		t.Fatalf("diff %q / %q", res.Meta["diff"], res.Content)
	}

	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "return 2\n}\n\nfunc C", "new_string": "x"}),
		"not found", "first line appears at line 4")
	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "func B() int {\n  return 1", "new_string": "x"}),
		"Lines 7-8 match when whitespace is ignored")
	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "    4|\treturn 2", "new_string": "x"}),
		"line-number prefixes")
	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "int {", "new_string": "int64 {"}),
		"occurs 2 times", "lines 3, 7", "replace_all")
	res = mustOK(t, call(t, p, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "int {", "new_string": "int64 {", "replace_all": true}))
	if got := readFile(t, env.Cwd, "a.go"); strings.Count(got, "int64 {") != 2 || res.Meta["replacements"] != 2 {
		t.Fatalf("replace_all: %q", got)
	}
	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "x", "new_string": "x"}), "identical")
	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "", "new_string": "x"}), "empty")
	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "nope.go", "old_string": "a", "new_string": "b"}), "file not found")
	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "a.go", "old_string": "a"}), "needs new_string")
	mustFail(t, call(t, p, env, map[string]any{"mode": "replace", "path": "../a.go", "old_string": "a", "new_string": "b"}), "outside")
	mustFail(t, call(t, p, env, map[string]any{"path": "a.go", "old_string": "a", "new_string": "b"}), `missing required field "mode"`)

	// CRLF files match an LF old_string and keep their line endings.
	writeFile(t, env.Cwd, "w.txt", "one\r\ntwo\r\nthree\r\n")
	mustOK(t, call(t, p, env, map[string]any{"mode": "replace", "path": "w.txt", "old_string": "one\ntwo", "new_string": "one\n2"}))
	if got := readFile(t, env.Cwd, "w.txt"); got != "one\r\n2\r\nthree\r\n" {
		t.Fatalf("crlf: %q", got)
	}
}

func TestPatchV4A(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "app.py", "import os\n\ndef a():\n    return 1\n\ndef b():\n    return 1\n")
	writeFile(t, env.Cwd, "old.txt", "bye\n")
	writeFile(t, env.Cwd, "mv.txt", "keep\nme\n")
	body := `*** Begin Patch
*** Update File: app.py
@@ def b():
-    return 1
+    return 2
*** Add File: pkg/new.py
+x = 1
+
+y = 2
*** Delete File: old.txt
*** Update File: mv.txt
*** Move to: moved/mv.txt
@@
 keep
-me
+you
*** End Patch`
	res := mustOK(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": body}))
	if got := readFile(t, env.Cwd, "app.py"); got != "import os\n\ndef a():\n    return 1\n\ndef b():\n    return 2\n" {
		t.Fatalf("app.py %q", got)
	}
	if got := readFile(t, env.Cwd, "pkg/new.py"); got != "x = 1\n\ny = 2\n" {
		t.Fatalf("new.py %q", got)
	}
	if got := readFile(t, env.Cwd, "moved/mv.txt"); got != "keep\nyou\n" {
		t.Fatalf("moved %q", got)
	}
	for _, gone := range []string{"old.txt", "mv.txt"} {
		if _, err := os.Stat(filepath.Join(env.Cwd, gone)); !os.IsNotExist(err) {
			t.Fatalf("%s still exists", gone)
		}
	}
	diff, _ := res.Meta["diff"].(string)
	for _, w := range []string{"--- a/app.py\n+++ b/app.py\n", "-    return 1\n+    return 2\n", "--- /dev/null\n+++ b/pkg/new.py\n",
		"--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n", "+++ b/moved/mv.txt\n"} {
		if !strings.Contains(diff, w) {
			t.Fatalf("diff lacks %q:\n%s", w, diff)
		}
	}
	if !strings.Contains(res.Content, "updated app.py, added pkg/new.py, deleted old.txt, deleted mv.txt, added moved/mv.txt") {
		t.Fatalf("summary %q", res.Content)
	}
	if paths, _ := res.Meta["paths"].([]string); len(paths) != 5 || res.Meta["path"] != "app.py" {
		t.Fatalf("meta %v", res.Meta)
	}
}

func TestPatchV4AAllOrNothing(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "first.txt", "alpha\nbeta\n")
	writeFile(t, env.Cwd, "second.txt", "gamma\ndelta\n")
	body := `*** Begin Patch
*** Update File: first.txt
 alpha
-beta
+BETA
*** Add File: third.txt
+new
*** Update File: second.txt
 gamma
-epsilon
+EPSILON
*** End Patch`
	res := mustFail(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": body}),
		"no file was changed", "update second.txt: hunk 1", "not found")
	if got := readFile(t, env.Cwd, "first.txt"); got != "alpha\nbeta\n" {
		t.Fatalf("first.txt changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(env.Cwd, "third.txt")); !os.IsNotExist(err) {
		t.Fatal("third.txt created")
	}
	if strings.Contains(res.Content, "first.txt") {
		t.Fatalf("blames the wrong file: %q", res.Content)
	}
	entries, _ := os.ReadDir(env.Cwd)
	if len(entries) != 2 {
		t.Fatalf("leftovers: %v", entries)
	}
}

func TestPatchV4AErrors(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "a.txt", "x\ny\nx\ny\n")
	outside := newEnv(t).Cwd
	if err := os.Symlink(outside, filepath.Join(env.Cwd, "out")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, body string
		want       []string
	}{
		{"no begin", "*** Update File: a.txt\n-x\n+z\n*** End Patch", []string{`"*** Begin Patch"`}},
		{"no end", "*** Begin Patch\n*** Update File: a.txt\n-x\n+z\n", []string{"cut off"}},
		{"ambiguous", "*** Begin Patch\n*** Update File: a.txt\n x\n-y\n+z\n*** End Patch", []string{"match 2 places", "lines 1, 3"}},
		{"add existing", "*** Begin Patch\n*** Add File: a.txt\n+z\n*** End Patch", []string{"already exists"}},
		{"delete missing", "*** Begin Patch\n*** Delete File: b.txt\n*** End Patch", []string{"delete b.txt: no such file"}},
		{"update missing", "*** Begin Patch\n*** Update File: b.txt\n-x\n+y\n*** End Patch", []string{"no such file"}},
		{"escape", "*** Begin Patch\n*** Add File: ../evil.txt\n+z\n*** End Patch", []string{"outside the working directory"}},
		{"symlink escape", "*** Begin Patch\n*** Add File: out/evil.txt\n+z\n*** End Patch", []string{"symbolic link"}},
		{"out of order", "*** Begin Patch\n*** Update File: a.txt\n@@ y\n x\n-y\n+z\n@@\n-x\n+w\n y\n*** End Patch", []string{"before the previous hunk"}},
		{"anchor missing", "*** Begin Patch\n*** Update File: a.txt\n@@ def nope\n-x\n+z\n*** End Patch", []string{`@@ line "def nope" was not found`}},
		{"no ops", "*** Begin Patch\n*** End Patch", []string{"no file operations"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustFail(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": tc.body}), tc.want...)
			if got := readFile(t, env.Cwd, "a.txt"); got != "x\ny\nx\ny\n" {
				t.Fatalf("a.txt changed: %q", got)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("wrote outside: %v", entries)
	}
	mustFail(t, call(t, Patch{}, env, map[string]any{"mode": "patch"}), "needs the `patch` field")
	mustFail(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": "x", "path": "a.txt"}), "takes only the `patch` field")
}

func TestPatchV4AMatching(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "m.go", "func a() {\n\tx := 1\n\treturn\n}\n\nfunc b() {\n\tx := 1\n\treturn\n}\n")
	writeFile(t, env.Cwd, "crlf.txt", "a\r\nb\r\nc\r\n")
	writeFile(t, env.Cwd, "tail.txt", "end\nmid\nend")
	body := `*** Begin Patch
*** Update File: m.go
@@ func b() {
-	x := 1
+	x := 2
*** Update File: crlf.txt
 a
-b
+B
*** Update File: tail.txt
-end
+END
*** End of File
*** End Patch`
	mustOK(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": body}))
	if got := readFile(t, env.Cwd, "m.go"); got != "func a() {\n\tx := 1\n\treturn\n}\n\nfunc b() {\n\tx := 2\n\treturn\n}\n" {
		t.Fatalf("anchored: %q", got)
	}
	if got := readFile(t, env.Cwd, "crlf.txt"); got != "a\r\nB\r\nc\r\n" {
		t.Fatalf("crlf: %q", got)
	}
	if got := readFile(t, env.Cwd, "tail.txt"); got != "end\nmid\nEND" {
		t.Fatalf("eof: %q", got)
	}

	// Whitespace-insensitive matching keeps the file's context lines as they are.
	writeFile(t, env.Cwd, "ws.py", "def f():\n    a = 1\n    b = 2\n")
	body = "*** Begin Patch\n*** Update File: ws.py\n  a = 1\n-  b = 2\n+    b = 3\n*** End Patch"
	mustOK(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": body}))
	if got := readFile(t, env.Cwd, "ws.py"); got != "def f():\n    a = 1\n    b = 3\n" {
		t.Fatalf("fuzzy: %q", got)
	}

	// Pure additions go after the anchor, or at the end without one; the patch may live in
	// a code fence.
	writeFile(t, env.Cwd, "add.txt", "one\ntwo\n")
	body = "```\n*** Begin Patch\n*** Update File: add.txt\n@@ one\n+one-and-a-half\n@@\n+three\n*** End Patch\n```"
	mustOK(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": body}))
	if got := readFile(t, env.Cwd, "add.txt"); got != "one\none-and-a-half\ntwo\nthree\n" {
		t.Fatalf("insertions: %q", got)
	}
}

func TestPatchBinaryFiles(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "blob.bin", "\x00\x01\x02")
	mustFail(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": "*** Begin Patch\n*** Update File: blob.bin\n-a\n+b\n*** End Patch"}), "binary")
	res := mustOK(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": "*** Begin Patch\n*** Delete File: blob.bin\n*** End Patch"}))
	if _, err := os.Stat(filepath.Join(env.Cwd, "blob.bin")); !os.IsNotExist(err) {
		t.Fatal("binary not deleted")
	}
	if res.Meta["diff"] != "Binary files a/blob.bin and /dev/null differ\n" {
		t.Fatalf("diff %q", res.Meta["diff"])
	}
}

func TestFilesRefuseFIFO(t *testing.T) {
	env := newEnv(t)
	if err := mkfifo(filepath.Join(env.Cwd, "pipe")); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	mustFail(t, call(t, ReadFile{}, env, map[string]any{"path": "pipe"}), "not a regular file")
	mustFail(t, call(t, WriteFile{}, env, map[string]any{"path": "pipe", "content": "x"}), "not a regular file")
	res := mustOK(t, call(t, SearchFiles{}, env, map[string]any{"pattern": "x", "path": "pipe"}))
	if !strings.HasPrefix(res.Content, "No matches") {
		t.Fatalf("search: %q", res.Content)
	}
}
