package cli

import (
	"os"
	"testing"
)

// TestShippedTypings: the typings and the reference page in scripts/ are what hermes api
// generates from the API's definition (regenerate with hermes api --format ts|lua|md).
func TestShippedTypings(t *testing.T) {
	for format, file := range map[string]string{"ts": "scripts/types/hermes.d.ts", "lua": "scripts/types/hermes.lua", "md": "scripts/API.md"} {
		r := hermes(t, ".", []string{"HERMES_HOME=" + t.TempDir()}, "api", "--format", format)
		want, err := os.ReadFile(repoPath(file))
		if err != nil {
			t.Fatal(err)
		}
		if r.code != 0 || r.stdout != string(want) {
			t.Errorf("%s differs from hermes api --format %s (exit %d); regenerate it", file, format, r.code)
		}
	}
	if r := hermes(t, ".", nil, "api", "--format", "xml"); r.code != 2 {
		t.Errorf("unknown format: exit %d", r.code)
	}
}
