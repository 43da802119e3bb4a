package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-go/hermes/engine/tool"
)

func TestEditsReviewedBeforeWriting(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env.Cwd, "a.txt", "one\n")
	writeFile(t, env.Cwd, "gone.txt", "bye\n")
	var seen [][]tool.Edit
	refuse := errors.New("not approved")
	env.ReviewEdits = func(_ context.Context, edits []tool.Edit) error {
		seen = append(seen, edits)
		return refuse
	}
	body := "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n*** Add File: b.txt\n+new\n*** Delete File: gone.txt\n*** End Patch"
	mustFail(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": body}), "not approved", "no file was changed")
	mustFail(t, call(t, Patch{}, env, map[string]any{"mode": "replace", "path": "a.txt", "old_string": "one", "new_string": "uno"}), "not approved", "a.txt was not modified")
	mustFail(t, call(t, WriteFile{}, env, map[string]any{"path": "c.txt", "content": "c"}), "not approved", "c.txt was not modified")
	if got := readFile(t, env.Cwd, "a.txt"); got != "one\n" {
		t.Fatalf("a.txt %q", got)
	}
	for _, p := range []string{"b.txt", "c.txt"} {
		if _, err := os.Stat(filepath.Join(env.Cwd, p)); err == nil {
			t.Fatalf("%s written", p)
		}
	}
	if readFile(t, env.Cwd, "gone.txt") != "bye\n" || len(seen) != 3 || len(seen[0]) != 3 {
		t.Fatalf("reviews %+v", seen)
	}
	want := []tool.Edit{
		{Path: filepath.Join(env.Cwd, "a.txt"), OldText: "one\n", NewText: "two\n"},
		{Path: filepath.Join(env.Cwd, "b.txt"), NewText: "new\n", Created: true},
		{Path: filepath.Join(env.Cwd, "gone.txt"), OldText: "bye\n", Deleted: true},
	}
	for i, e := range seen[0] {
		e.Path, _ = filepath.EvalSymlinks(filepath.Dir(e.Path))
		e.Path = filepath.Join(e.Path, filepath.Base(seen[0][i].Path))
		w := want[i]
		w.Path, _ = filepath.EvalSymlinks(filepath.Dir(w.Path))
		w.Path = filepath.Join(w.Path, filepath.Base(want[i].Path))
		if e != w {
			t.Fatalf("edit %d: %+v, want %+v", i, e, w)
		}
	}
	// Approved: written.
	env.ReviewEdits = func(context.Context, []tool.Edit) error { return nil }
	mustOK(t, call(t, Patch{}, env, map[string]any{"mode": "patch", "patch": body}))
	if readFile(t, env.Cwd, "a.txt") != "two\n" || readFile(t, env.Cwd, "b.txt") != "new\n" {
		t.Fatal("the approved patch was not written")
	}
}
