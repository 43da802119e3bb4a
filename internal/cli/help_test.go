package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// Every command answers --help (and -h) with its usage on stdout and exit 0, doing nothing
// else: no home is touched, no store started, no configuration shown. So do the subcommands
// of config, mcp and policy; a script's own --help is the script's.
func TestEveryCommandAnswersHelp(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HERMES_HOME", home)
	var cases [][]string
	for _, c := range commands {
		cases = append(cases, []string{c.name, "--help"}, []string{c.name, "-h"})
	}
	cases = append(cases, []string{"config", "show", "--help"}, []string{"mcp", "status", "--help"}, []string{"mcp", "serve", "--help"},
		[]string{"policy", "show", "--help"}, []string{"policy", "test", "-h"}, []string{"policy", "replay", "--help"})
	for _, args := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, stdio{strings.NewReader(""), &out, &errb})
		if code != 0 || out.Len() == 0 || errb.Len() != 0 || !strings.Contains(strings.ToLower(out.String()), "usage") {
			t.Errorf("hermes %s: exit %d\nstdout %q\nstderr %q", strings.Join(args, " "), code, out.String(), errb.String())
		}
		// One form for every command: a usage line naming it, never the flag package's own.
		head := strings.Join(strings.Fields(out.String()), " ") // "usage:\n  hermes policy …" too
		if !strings.HasPrefix(head, "usage: hermes "+args[0]) || strings.Contains(out.String(), "Usage of ") {
			t.Errorf("hermes %s: usage starts %q", strings.Join(args, " "), strings.SplitN(out.String(), "\n", 2)[0])
		}
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("asking for help wrote to the home: %v", entries)
	}
	if !helpRequested("run", []string{"--help"}) || helpRequested("run", []string{"check.js", "--help"}) || helpRequested("test", []string{"dir", "-h"}) {
		t.Error("a script's own --help must reach the script")
	}
}
