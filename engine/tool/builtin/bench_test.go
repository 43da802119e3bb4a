package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/tool"
)

// BenchmarkSearchFiles searches a tree of 500 files of 200 lines each.
func BenchmarkSearchFiles(b *testing.B) {
	dir := b.TempDir()
	env := &tool.Env{Cwd: dir}
	var body strings.Builder
	for i := range 200 {
		fmt.Fprintf(&body, "func f%d() { return %d } // some filler text\n", i, i)
	}
	for i := range 500 {
		writeFileB(b, dir, fmt.Sprintf("d%d/f%d.go", i%20, i), body.String())
	}
	args := json.RawMessage(`{"pattern":"return 19[0-9]","limit":20}`)
	b.ResetTimer()
	for b.Loop() {
		res, err := SearchFiles{}.Call(context.Background(), tool.Call{Args: args}, env)
		if err != nil || res.IsError {
			b.Fatal(err, res.Content)
		}
	}
}

// BenchmarkUnifiedDiff diffs a 10,000-line file with 100 scattered changes.
func BenchmarkUnifiedDiff(b *testing.B) {
	var old, new strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&old, "line %d\n", i)
		if i%100 == 50 {
			fmt.Fprintf(&new, "changed %d\n", i)
		} else {
			fmt.Fprintf(&new, "line %d\n", i)
		}
	}
	o, n := old.String(), new.String()
	b.ResetTimer()
	for b.Loop() {
		if unifiedDiff("f", o, n, true, true) == "" {
			b.Fatal("no diff")
		}
	}
}

func writeFileB(b *testing.B, dir, rel, content string) {
	b.Helper()
	// writeAtomic creates the parent directories.
	if err := writeAtomic(filepath.Join(dir, filepath.FromSlash(rel)), []byte(content), newFileMode); err != nil {
		b.Fatal(err)
	}
}
