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
	{"engine", "internal/cli", "the commands compose the engine from configuration; the engine is handed what it needs and never reaches back into a command"},
	{"transports", "internal/cli", "a command starts a surface with its options; a surface depending on the commands would close a cycle through the composition root"},
	{"stdlib", "internal/cli", "script modules are also hosted by embedders, without the hermes commands"},
	{"transports/httpapi/runsapi", "transports/httpapi/browserctl", "a run's turn reaches browser control only through the server that mounts the runs (Host.StartTurn), which binds the turn to its owner"},
	{"transports/httpapi/runsapi", "transports/gateway", "the runs drive sessions through the engine, never through another surface"},
	{"transports/httpapi/internal/wire", "transports/httpapi/runsapi", "the wire is the API's shared vocabulary, below every route package"},
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

// forbiddenImports are direct imports the layering forbids in the non-test files under from
// (a directory of the module) of the packages under to. Unlike forbiddenEdges they do not
// follow dependencies: a transport depends on the store through the engine, and that is the
// point — it must reach it only there.
var forbiddenImports = []struct{ from, to, reason string }{
	{"transports", "engine/store", "every write goes through an engine verb, where the turn claim, the deleted mark and (later) a session lease and fencing are enforced; a surface writing the store directly bypasses them"},
	{"transports", "engine/config", "configuration is resolved by the command that builds the engine; a surface is handed its options and never reads the configuration files itself"},
	{"transports/httpapi/runsapi", "engine/store", "the runs reach the store only through the runs ledger (engine/runs), whose compare-and-sets every process on the store agrees on"},
	{"transports/httpapi/runsapi", "engine/config", "the runs are handed their options by the server that mounts them"},
}

// importExceptions are files allowed, for now, one import forbiddenImports refuses. Each names
// its reason; an exception for a file that no longer exists, or no longer needs it, fails the
// test, so none outlives its reason.
var importExceptions = []struct{ file, to, reason string }{}

// TestImportLayering enforces forbiddenImports on every non-test Go file, minus the listed
// exceptions.
func TestImportLayering(t *testing.T) {
	used := map[string]bool{} // exception file+to → it was needed
	for _, e := range importExceptions {
		if e.reason == "" {
			t.Errorf("exception %s → %s: no reason given", e.file, e.to)
		}
		if _, err := os.Stat(e.file); err != nil {
			t.Errorf("exception %s → %s: %s is not a file of the module; remove the exception", e.file, e.to, e.file)
		}
		used[e.file+" "+e.to] = false
	}
	fset := token.NewFileSet()
	for _, rule := range forbiddenImports {
		if rule.reason == "" {
			t.Errorf("%s → %s: no reason given", rule.from, rule.to)
		}
		for _, dir := range []string{rule.from, rule.to} {
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Errorf("%s → %s: %s is not a directory of the module; update the rule", rule.from, rule.to, dir)
			}
		}
		bad := modulePath + "/" + rule.to
		err := filepath.WalkDir(rule.from, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				ip := strings.Trim(imp.Path.Value, `"`)
				if ip != bad && !strings.HasPrefix(ip, bad+"/") {
					continue
				}
				key := filepath.ToSlash(path) + " " + rule.to
				if _, ok := used[key]; ok {
					used[key] = true
					continue
				}
				t.Errorf("%s imports %s: forbidden because %s", path, ip, rule.reason)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for key, needed := range used {
		if !needed {
			t.Errorf("exception %s is no longer needed; remove it", key)
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
		if d.IsDir() && path != "." {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (a copy of a dependency): not ours to document
			}
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
