package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSearchContent(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "main.go", "package main\n\nfunc main() {\n\tTODO()\n}\n")
	writeFile(t, env.Cwd, "lib/util.go", "package lib\n\n// TODO: one\n// TODO: two\nfunc X() {}\n")
	writeFile(t, env.Cwd, "lib/util_test.go", "package lib\n// TODO test\n")
	writeFile(t, env.Cwd, "web/app.tsx", "// TODO tsx\n")
	writeFile(t, env.Cwd, "web/app.ts", "// nothing\n")
	writeFile(t, env.Cwd, ".git/config", "TODO in git\n")
	writeFile(t, env.Cwd, "node_modules/x/index.js", "TODO in deps\n")
	writeFile(t, env.Cwd, "bin.dat", "TODO\x00binary\n")
	writeFile(t, env.Cwd, "big.txt", "TODO\n"+strings.Repeat("x", maxSearchFileSize))
	sf := SearchFiles{}

	res := mustOK(t, call(t, sf, env, map[string]any{"pattern": "TODO"}))
	want := "lib/util.go:3:// TODO: one\nlib/util.go:4:// TODO: two\nlib/util_test.go:2:// TODO test\nmain.go:4:\tTODO()\nweb/app.tsx:1:// TODO tsx\n[5 matches in 4 files]"
	if res.Content != want {
		t.Fatalf("content search:\n%s", res.Content)
	}
	if res.Meta["total"] != 5 {
		t.Fatalf("meta %v", res.Meta)
	}

	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "TODO", "limit": 2, "offset": 1}))
	want = "lib/util.go:4:// TODO: two\nlib/util_test.go:2:// TODO test\n[matches 2-3 of 5; use offset=3 for more]"
	if res.Content != want || res.Meta["truncated"] != true {
		t.Fatalf("paged:\n%s", res.Content)
	}

	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "todo", "path": "lib", "file_glob": "*_test.go"}))
	if !strings.Contains(res.Content, "No matches") {
		t.Fatalf("case-sensitive: %s", res.Content)
	}
	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "(?i)todo", "path": "lib", "file_glob": "*_test.go"}))
	if res.Content != "lib/util_test.go:2:// TODO test\n[1 match in 1 file]" {
		t.Fatalf("glob filter: %s", res.Content)
	}

	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "TODO", "output_mode": "count"}))
	if res.Content != "lib/util.go:2\nlib/util_test.go:1\nmain.go:1\nweb/app.tsx:1\n[4 files]" {
		t.Fatalf("count: %s", res.Content)
	}
	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "TODO", "output_mode": "files_only", "file_glob": "*.{go,tsx}"}))
	if res.Content != "lib/util.go\nlib/util_test.go\nmain.go\nweb/app.tsx\n[4 files]" {
		t.Fatalf("files_only: %s", res.Content)
	}

	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "TODO: one", "context": 1}))
	if res.Content != "lib/util.go-2-\nlib/util.go:3:// TODO: one\nlib/util.go-4-// TODO: two\n[1 match in 1 file]" {
		t.Fatalf("context: %q", res.Content)
	}
	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "^package", "context": 1, "path": "lib"}))
	if res.Content != "lib/util.go:1:package lib\nlib/util.go-2-\n--\nlib/util_test.go:1:package lib\nlib/util_test.go-2-// TODO test\n[2 matches in 2 files]" {
		t.Fatalf("context groups: %q", res.Content)
	}

	// A single file as path.
	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "func", "path": "main.go"}))
	if res.Content != "main.go:3:func main() {\n[1 match in 1 file]" {
		t.Fatalf("single file: %q", res.Content)
	}

	mustFail(t, call(t, sf, env, map[string]any{"pattern": "("}), "invalid regular expression")
	mustFail(t, call(t, sf, env, map[string]any{"pattern": "x", "path": ".."}), "outside the working directory")
	mustFail(t, call(t, sf, env, map[string]any{"pattern": "x", "path": "nope"}), "not found")
	mustFail(t, call(t, sf, env, map[string]any{"pattern": "x", "output_mode": "lines"}), `field "output_mode" must be one of`)
	mustFail(t, call(t, sf, env, map[string]any{"pattern": 1}), `field "pattern" must be a string`)
}

func TestSearchFiles(t *testing.T) {
	env := newEnv(t)
	for _, p := range []string{"a.go", "a_test.go", "sub/b.go", "sub/deep/c.ts", "sub/deep/d.tsx", ".git/x.go", "node_modules/m/e.go"} {
		writeFile(t, env.Cwd, p, "x")
	}
	sf := SearchFiles{}
	res := mustOK(t, call(t, sf, env, map[string]any{"pattern": "*.go", "target": "files"}))
	if res.Content != "a.go\na_test.go\nsub/b.go\n[3 files]" {
		t.Fatalf("files: %q", res.Content)
	}
	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "sub/**/*.{ts,tsx}", "target": "files"}))
	if res.Content != "sub/deep/c.ts\nsub/deep/d.tsx\n[2 files]" {
		t.Fatalf("path glob: %q", res.Content)
	}
	res = mustOK(t, call(t, sf, env, map[string]any{"pattern": "*.go", "target": "files", "path": "sub", "limit": 1}))
	if res.Content != "sub/b.go\n[1 file]" {
		t.Fatalf("under path: %q", res.Content)
	}
	mustFail(t, call(t, sf, env, map[string]any{"pattern": "[a", "target": "files"}), "invalid glob")
	mustFail(t, call(t, sf, env, map[string]any{"pattern": "*.go", "target": "files", "output_mode": "count"}), "target \"content\" only")
}

func TestSearchSymlinks(t *testing.T) {
	env := newEnv(t)
	outside := newEnv(t).Cwd
	writeFile(t, outside, "secret.txt", "needle outside\n")
	writeFile(t, env.Cwd, "in.txt", "needle inside\n")
	for name, target := range map[string]string{
		"out-file": filepath.Join(outside, "secret.txt"),
		"out-dir":  outside,
		"in-link":  "in.txt",
		"loop-dir": ".",
	} {
		if err := os.Symlink(target, filepath.Join(env.Cwd, name)); err != nil {
			t.Fatal(err)
		}
	}
	res := mustOK(t, call(t, SearchFiles{}, env, map[string]any{"pattern": "needle"}))
	if res.Content != "in-link:1:needle inside\nin.txt:1:needle inside\n[2 matches in 2 files]" {
		t.Fatalf("symlinks: %q", res.Content)
	}
}

func TestSearchCapStopsWalk(t *testing.T) {
	env := newEnv(t)
	var b strings.Builder
	for i := 0; i < maxSearchCount/2+1; i++ {
		fmt.Fprintf(&b, "hit %d\n", i)
	}
	writeFile(t, env.Cwd, "a.txt", b.String())
	writeFile(t, env.Cwd, "b.txt", b.String())
	writeFile(t, env.Cwd, "c.txt", b.String())
	res := mustOK(t, call(t, SearchFiles{}, env, map[string]any{"pattern": "hit", "limit": 1}))
	if !strings.Contains(res.Content, "of at least") || res.Meta["capped"] != true {
		t.Fatalf("cap: %q", res.Content[len(res.Content)-200:])
	}
}
