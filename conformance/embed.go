package conformance

import (
	"context"
	"embed"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"
)

//go:embed testdata/*.txtar
var fixtureFS embed.FS

// Fixtures returns the fixtures shipped in the binary, sorted by name.
func Fixtures() ([]*Fixture, error) {
	entries, err := fixtureFS.ReadDir("testdata")
	if err != nil {
		return nil, err
	}
	var out []*Fixture
	for _, e := range entries {
		p := path.Join("testdata", e.Name())
		data, err := fixtureFS.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f, err := Parse(p, data)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Report replays every fixture on every transport it names against the hermes binary at
// target and prints a pass/fail table. It returns the number of failures.
func Report(ctx context.Context, w io.Writer, target string, only func(transport string) bool) (int, error) {
	fixtures, err := Fixtures()
	if err != nil {
		return 0, err
	}
	failed := 0
	fmt.Fprintf(w, "%-28s %-15s %-6s %s\n", "FIXTURE", "TRANSPORT", "RESULT", "TIME")
	for _, f := range fixtures {
		for _, tr := range f.Meta.Transports {
			d, ok := Drivers[tr]
			if !ok || (only != nil && !only(tr)) {
				continue
			}
			dir, err := os.MkdirTemp("", "hermes-conformance-")
			if err != nil {
				return failed, err
			}
			start := time.Now()
			err = Check(ctx, f, d, target, dir, false)
			os.RemoveAll(dir)
			res := "pass"
			if err != nil {
				res = "FAIL"
				failed++
			}
			fmt.Fprintf(w, "%-28s %-15s %-6s %s\n", f.Name, tr, res, time.Since(start).Round(time.Millisecond))
			if err != nil {
				fmt.Fprintf(w, "    %v\n", err)
			}
		}
	}
	return failed, nil
}
