package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hermes-go/hermes/conformance"
)

func runConformance(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(io.err)
	target := fs.String("target", "", "the hermes binary to test (default: this one), or the URL of a running server: http(s)://HOST:PORT for the HTTP API, ws(s)://HOST:PORT/api/ws for the gateway")
	transport := fs.String("transport", "", "only this transport (gateway-stdio, gateway-ws, acp-stdio, http, cli)")
	key := fs.String("key", os.Getenv("HERMES_API_KEY"), "the API key of the server at a URL target (default: HERMES_API_KEY)")
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: hermes conformance [--target BINARY|URL] [--transport NAME] [--key KEY]\n\nReplays the recorded wire fixtures and prints a pass/fail table per fixture and transport.\nA binary is started afresh for every fixture with the fixture's model, policy and config; a\nURL is a server someone else runs, so only the fixtures that need nothing of their own run\nthere (the rest are listed as skip). Exit 0 when all pass, 1 when any fails.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	var t conformance.Target
	switch {
	case strings.Contains(*target, "://"):
		t = conformance.Target{URL: *target, Key: *key}
	case *target != "":
		if _, err := os.Stat(*target); err != nil {
			return fail(io, fmt.Errorf("target %s: %w", *target, err))
		}
		t.Binary = *target
	default:
		exe, err := os.Executable()
		if err != nil {
			return fail(io, err)
		}
		t.Binary = exe
	}
	var only func(string) bool
	if *transport != "" {
		if _, ok := conformance.Drivers[*transport]; !ok {
			fmt.Fprintf(io.err, "hermes conformance: unknown transport %q\n", *transport)
			return 2
		}
		only = func(tr string) bool { return tr == *transport }
	}
	failed, err := conformance.Report(ctx, io.out, t, only)
	if err != nil {
		return fail(io, err)
	}
	if failed > 0 {
		fmt.Fprintf(io.err, "%d failed\n", failed)
		return 1
	}
	return 0
}
