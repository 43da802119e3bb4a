package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A cwd a caller names is checked on every surface alike: relative (a different folder in
// each process sharing the store), missing, or a file is ErrInvalidCwd and nothing is stored.
// A branch takes its parent's cwd as stored, even once that folder is gone.
func TestCreateChecksCwd(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	e, st := h.eng, h.st
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{"relative/x", filepath.Join(dir, "missing"), file} {
		if _, err := e.Create(ctx, engine.CreateOptions{Cwd: cwd, ID: "bad"}); !errors.Is(err, engine.ErrInvalidCwd) {
			t.Errorf("cwd %q: %v, want ErrInvalidCwd", cwd, err)
		}
	}
	if _, err := st.GetSession(ctx, "bad"); err == nil {
		t.Fatal("a refused session was stored")
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := e.Create(ctx, engine.CreateOptions{Cwd: work})
	if err != nil || s.Record().Cwd != work {
		t.Fatalf("create in %s: %v", work, err)
	}
	h.srv.Enqueue(openaitest.Text("hi"))
	h.run(s, "hello")
	if err := os.Remove(work); err != nil {
		t.Fatal(err)
	}
	b, err := e.Branch(ctx, s.ID(), engine.BranchOptions{})
	if err != nil || b.Record().Cwd != work {
		t.Fatalf("branch of a session whose folder is gone: %v", err)
	}
}
