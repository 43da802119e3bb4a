package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const modulePath = "github.com/hermes-go/hermes"

// forbiddenEdges are the imports the layering forbids: no package under from may depend,
// directly or through others, on a package under to. Both are directories of this module.
var forbiddenEdges = []struct{ from, to, reason string }{
	{"engine", "transports", "the engine is the core every surface drives; a wire protocol must not leak into it"},
	{"engine", "scripting", "policy reaches the engine through engine/policy interfaces; the engine does not know which runtime implements them"},
	{"engine", "stdlib", "stdlib is the scripts' API over the engine, so it depends on the engine and not the reverse"},
	{"engine", "conformance", "the conformance runner tests the engine from outside"},
	{"transports", "scripting", "a surface reaches policy only through the engine, so no transport can run a hook the engine does not see"},
	{"transports", "conformance", "the conformance runner drives the transports, not the reverse"},
	{"stdlib", "transports", "script modules call the engine in process; reaching a surface would bypass its admission and limits"},
	{"stdlib", "conformance", "the conformance runner tests the script API from outside"},
}

// TestLayering enforces the one-way flow: transports → engine ← policy (scripting). Each
// forbidden edge names its reason; an edge whose directory no longer exists fails the test, so
// a move cannot silently turn a rule off.
func TestLayering(t *testing.T) {
	deps := map[string][]string{} // from → its packages' dependencies
	for _, e := range forbiddenEdges {
		if e.reason == "" {
			t.Errorf("%s → %s: no reason given", e.from, e.to)
		}
		missing := false
		for _, dir := range []string{e.from, e.to} {
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Errorf("%s → %s: %s is not a directory of the module; update the edge", e.from, e.to, dir)
				missing = true
			}
		}
		if missing {
			continue
		}
		if _, ok := deps[e.from]; !ok {
			out, err := exec.Command("go", "list", "-deps", "./"+e.from+"/...").CombinedOutput()
			if err != nil {
				t.Fatalf("go list %s: %v\n%s", e.from, err, out)
			}
			deps[e.from] = strings.Fields(string(out))
		}
		bad := modulePath + "/" + e.to
		for _, dep := range deps[e.from] {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("%s depends on %s: forbidden because %s", e.from, dep, e.reason)
			}
		}
	}
}

// TestPackageDocs requires exactly one package doc comment per package.
func TestPackageDocs(t *testing.T) {
	docs := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if _, ok := docs[dir]; !ok {
			docs[dir] = 0
		}
		if f.Doc != nil {
			docs[dir]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, n := range docs {
		if n != 1 {
			t.Errorf("package %s has %d package doc comments, want 1", dir, n)
		}
	}
}
