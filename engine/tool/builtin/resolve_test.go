package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/tool"
)

func TestResolve(t *testing.T) {
	env := newEnv(t)
	outside := newEnv(t).Cwd
	writeFile(t, outside, "secret.txt", "s")
	writeFile(t, env.Cwd, "sub/in.txt", "i")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(env.Cwd, "out")))
	must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(env.Cwd, "secret-link")))
	must(os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(env.Cwd, "dangling")))
	must(os.Symlink("sub", filepath.Join(env.Cwd, "sublink")))
	must(os.Symlink("loop", filepath.Join(env.Cwd, "loop")))

	ok := []struct{ in, want string }{
		{"sub/in.txt", "sub/in.txt"},
		{"./sub/../sub/in.txt", "sub/in.txt"},
		{filepath.Join(env.Cwd, "sub"), "sub"},
		{".", "."},
		{"sublink/in.txt", "sub/in.txt"},         // a link inside stays inside
		{"new/dir/file.txt", "new/dir/file.txt"}, // need not exist
		{"sub/in.txt/../in.txt", "sub/in.txt"},   // cleaned lexically first
		{"sublink/../sub/in.txt", "sub/in.txt"},
	}
	for _, tc := range ok {
		got, err := Resolve(env, tc.in)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", tc.in, err)
		}
		if want := filepath.Join(env.Cwd, tc.want); got != want {
			t.Fatalf("Resolve(%q) = %q, want %q", tc.in, got, want)
		}
	}

	refused := []struct{ in, want string }{
		{"../x", "resolves to"},
		{"sub/../../x", "resolves to"},
		{filepath.Join(outside, "secret.txt"), "resolves to"},
		{"out/secret.txt", "symbolic link"},
		{"secret-link", "symbolic link"},
		{"dangling", "symbolic link"}, // writing through it would create a file outside
		{"out", "symbolic link"},
		{"~/x", "outside"},
	}
	for _, tc := range refused {
		_, err := Resolve(env, tc.in)
		if !errors.Is(err, ErrOutsideCwd) {
			t.Fatalf("Resolve(%q) = %v, want ErrOutsideCwd", tc.in, err)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "outside the working directory") {
			t.Fatalf("Resolve(%q) error %q lacks %q", tc.in, err, tc.want)
		}
	}

	if _, err := Resolve(env, "loop/x"); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Fatalf("link loop: %v", err)
	}
	if _, err := Resolve(env, " "); err == nil {
		t.Fatal("empty path accepted")
	}

	free := *env
	free.AllowOutside = true
	got, err := Resolve(&free, "out/secret.txt")
	if err != nil || got != filepath.Join(outside, "secret.txt") {
		t.Fatalf("AllowOutside: %q, %v", got, err)
	}
}

func TestResolveCwdIsSymlink(t *testing.T) {
	base := newEnv(t)
	writeFile(t, base.Cwd, "real/a.txt", "a")
	link := filepath.Join(base.Cwd, "link")
	if err := os.Symlink(filepath.Join(base.Cwd, "real"), link); err != nil {
		t.Fatal(err)
	}
	env := &tool.Env{Cwd: link}
	got, err := Resolve(env, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base.Cwd, "real", "a.txt"); got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	// Cwd and its resolved form both count: "link/../real/a.txt" is inside the real directory.
	if _, err := Resolve(env, "../real/a.txt"); err != nil {
		t.Fatalf("../real/a.txt from a linked cwd: %v", err)
	}
	if _, err := Resolve(env, "../link2"); !errors.Is(err, ErrOutsideCwd) {
		t.Fatalf("../link2 from a linked cwd: %v", err)
	}
}
