// Package interop locates the third-party clients and servers (installed from npm into
// interop/node by .ci/run) that the test suite drives against the real hermes binary.
//
// Locally a missing install skips those tests with the command that fixes it; in CI
// (HERMES_INTEROP=required) a missing install is a failure, so the suite cannot go green by
// silently not running them.
package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Node describes a usable Node.js installation and the interop package directory.
type Node struct {
	Bin     string // the node executable
	Dir     string // interop/node: package.json, package-lock.json, node_modules
	Modules string // Dir/node_modules
}

// Required reports whether a missing Node install must fail the test instead of skipping it.
func Required() bool { return os.Getenv("HERMES_INTEROP") == "required" }

// Dir returns the absolute path of the repository's interop/node directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "interop", "node")
}

// RequireNode returns the Node installation, or skips (fails when Required) the test when
// node or the npm packages are missing.
func RequireNode(t testing.TB) Node {
	t.Helper()
	dir := Dir()
	n := Node{Dir: dir, Modules: filepath.Join(dir, "node_modules")}
	bin, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not on PATH")
	}
	n.Bin = bin
	if _, err := os.Stat(filepath.Join(n.Modules, ".package-lock.json")); err != nil {
		missing(t, "npm packages are not installed: run `npm ci --prefix interop/node`")
	}
	return n
}

// Package returns the directory of an installed npm package, e.g. "@agentclientprotocol/sdk".
func (n Node) Package(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(n.Modules, filepath.FromSlash(name))
	if _, err := os.Stat(filepath.Join(p, "package.json")); err != nil {
		missing(t, "npm package "+name+" is not installed: run `npm ci --prefix interop/node`")
	}
	return p
}

// BinScript returns the path of an executable installed under node_modules/.bin.
func (n Node) BinScript(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(n.Modules, ".bin", name)
	if _, err := os.Stat(p); err != nil {
		missing(t, "npm executable "+name+" is not installed: run `npm ci --prefix interop/node`")
	}
	return p
}

func missing(t testing.TB, why string) {
	t.Helper()
	if Required() {
		t.Fatal(why)
	}
	t.Skip(why)
}
