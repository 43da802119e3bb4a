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

// TestLayering enforces the one-way flow: transports → engine ← policy (scripting). The engine
// imports nothing outside engine/; transports never import scripting.
func TestLayering(t *testing.T) {
	forbidden := map[string][]string{
		"./engine/...":     {"/transports", "/scripting", "/stdlib", "/conformance"},
		"./transports/...": {"/scripting", "/conformance"},
		"./stdlib/...":     {"/transports", "/conformance"},
	}
	for pkgs, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", pkgs).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "matched no packages") {
				continue
			}
			t.Fatalf("go list %s: %v\n%s", pkgs, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range bad {
				if strings.HasPrefix(dep, modulePath+b) {
					t.Errorf("%s depends on %s", pkgs, dep)
				}
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
