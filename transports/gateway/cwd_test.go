package gateway_test

import (
	"os"
	"path/filepath"
	"testing"
)

// session.create refuses a cwd the session's tools could not run in (relative, missing, a
// file) with -32602, and stores the one it accepts.
func TestGatewayCreateChecksCwd(t *testing.T) {
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, false)
		dir := t.TempDir()
		file := filepath.Join(dir, "f.txt")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, cwd := range []string{"relative/x", filepath.Join(dir, "missing"), file} {
			if code, err := callErr(t, c, "session.create", map[string]any{"cwd": cwd}); code != -32602 {
				t.Errorf("cwd %q: %d %v, want -32602", cwd, code, err)
			}
		}
		res := call(t, c, "session.create", map[string]any{"cwd": dir})
		if info, _ := res["info"].(map[string]any); info["cwd"] != dir {
			t.Fatalf("created with cwd %q: %v", dir, res)
		}
	})
}
