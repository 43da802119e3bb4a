package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/hermes-go/hermes/conformance"
)

func init() {
	extraCommands = append(extraCommands, command{"conformance", "replay the recorded wire fixtures against a hermes build (--target BINARY)", runConformance})
}

func runConformance(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(io.err)
	target := fs.String("target", "", "the hermes binary to test (default: this one)")
	transport := fs.String("transport", "", "only this transport (gateway-stdio, gateway-ws)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bin := *target
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fail(io, err)
		}
		bin = exe
	}
	if _, err := os.Stat(bin); err != nil {
		return fail(io, fmt.Errorf("target %s: %w", bin, err))
	}
	var only func(string) bool
	if *transport != "" {
		only = func(t string) bool { return t == *transport }
	}
	failed, err := conformance.Report(ctx, io.out, bin, only)
	if err != nil {
		return fail(io, err)
	}
	if failed > 0 {
		fmt.Fprintf(io.err, "%d failed\n", failed)
		return 1
	}
	return 0
}
