// Command hermes runs the Hermes agent: an LLM tool-calling loop over durable sessions, driven
// from the terminal (chat, demo), and by other programs over the surfaces added to it. The
// commands live in internal/cli; this is only their entry.
package main

import (
	"context"
	"os"

	"github.com/hermes-go/hermes/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(cli.Main(context.Background(), version, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
