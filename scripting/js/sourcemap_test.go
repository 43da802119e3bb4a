package js

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dop251/goja"
)

// A source map named by a path is not read from disk: a script cannot make the parser open a
// file outside its grants. The map here is a FIFO nobody writes to: goja's default loader
// would block reading it forever (as it would on /dev/zero), so this test would not end.
func TestSourceMapFileIsNotRead(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "never.map")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	// goja resolves the map against the script's name, which is relative: the path is taken
	// from the process's working directory.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, fifo)
	if err != nil {
		t.Fatal(err)
	}
	src := "const x = 1;\n//# sourceMappingURL=" + rel
	if _, err := goja.Parse("run.js", src, parseOpts...); err != nil {
		t.Fatal(err)
	}
	// The runtime's own parser (RunString, as modules and the REPL use) is set up the same way.
	if _, err := newVM(t, Options{}).rt.RunString(src); err != nil {
		t.Fatal(err)
	}
}
