package cli

import (
	"os"
	"path/filepath"
	"sync"
)

// repoRoot is the module's root directory, the first directory at or above the test's
// working directory (this package's) that holds go.mod.
var repoRoot = sync.OnceValue(func() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("no go.mod at or above the test's working directory")
		}
		dir = parent
	}
})

// repoPath is the absolute path of a file of the repository, named from the module's root
// (scripts/demo/demo.cassette.json, scripts/tests): the tests' fixtures live there.
func repoPath(elem ...string) string {
	return filepath.Join(append([]string{repoRoot()}, elem...)...)
}
