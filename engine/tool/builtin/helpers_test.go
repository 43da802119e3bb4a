package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/tool"
)

// newEnv returns an Env whose Cwd is a fresh temporary directory (with symlinks resolved, so
// expected paths compare equal on systems where the temp dir is itself a link).
func newEnv(t *testing.T) *tool.Env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &tool.Env{SessionID: "s1", Cwd: dir, Processes: &tool.Processes{}}
}

// call invokes tl with args (marshalled unless already a string) and fails the test on a Go
// error, which the built-in tools reserve for infrastructure failures.
func call(t *testing.T, tl tool.Tool, env *tool.Env, args any) tool.Result {
	t.Helper()
	return callCtx(t, context.Background(), tl, env, args)
}

func callCtx(t *testing.T, ctx context.Context, tl tool.Tool, env *tool.Env, args any) tool.Result {
	t.Helper()
	var raw json.RawMessage
	switch a := args.(type) {
	case string:
		raw = json.RawMessage(a)
	default:
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		raw = b
	}
	res, err := tl.Call(ctx, tool.Call{ID: "c1", Name: tl.Spec().Name, Args: raw}, env)
	if err != nil {
		t.Fatalf("%s: unexpected Go error: %v", tl.Spec().Name, err)
	}
	return res
}

func mustOK(t *testing.T, res tool.Result) tool.Result {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected error result: %s", res.Content)
	}
	return res
}

func mustFail(t *testing.T, res tool.Result, wants ...string) tool.Result {
	t.Helper()
	if !res.IsError {
		t.Fatalf("expected an error result, got: %s", res.Content)
	}
	for _, w := range wants {
		if !strings.Contains(res.Content, w) {
			t.Fatalf("error %q does not mention %q", res.Content, w)
		}
	}
	return res
}

func writeFile(t *testing.T, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
