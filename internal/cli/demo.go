package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/replay"
	"github.com/hermes-go/hermes/engine/store"
	demofiles "github.com/hermes-go/hermes/scripts/demo"
)

// demoPrompt is the prompt the demo cassette was recorded with.
const demoPrompt = "Set up a scratch project: write notes/todo.md with three tasks, show me the files, then remove the old build directory."

// runDemo runs the main job end to end offline: a fresh badger store, the recorded cassette
// as the model, the real tools in a scratch directory, an approval answered on the terminal.
func runDemo(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.err)
	keep := fs.Bool("keep", false, "keep the scratch directory (store and files) and print where it is")
	verbose := fs.Bool("v", false, "show tool results")
	if err := fs.Parse(args); err != nil || !noArgs(fs, io) {
		return 2
	}
	root, err := os.MkdirTemp("", "hermes-demo-")
	if err != nil {
		return fail(io, err)
	}
	if !*keep {
		defer os.RemoveAll(root)
	}
	env, err := prepareDemo(root)
	if err != nil {
		return fail(io, err)
	}
	cas, err := replay.Parse(demofiles.Cassette, "demo.cassette.json")
	if err != nil {
		return fail(io, err)
	}
	env.provider, env.verbose = replay.New(cas), *verbose
	code, err := demo(ctx, io, env)
	if err != nil {
		return fail(io, err)
	}
	if *keep {
		fmt.Fprintf(io.err, "[scratch kept at %s]\n", root)
	}
	return code
}

type demoEnv struct {
	cfg      *config.Config
	work     string
	provider model.Provider
	verbose  bool
}

// prepareDemo lays out a scratch HERMES_HOME and a working directory with a stale build/.
func prepareDemo(root string) (demoEnv, error) {
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")
	for _, d := range []string{home, filepath.Join(work, "build")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return demoEnv{}, err
		}
	}
	if err := os.WriteFile(filepath.Join(work, "build", "app.o"), []byte("stale object\n"), 0o644); err != nil {
		return demoEnv{}, err
	}
	cfg, err := config.Load(func(k string) string {
		if k == "HERMES_HOME" {
			return home
		}
		return ""
	})
	if err != nil {
		return demoEnv{}, err
	}
	return demoEnv{cfg: cfg, work: work}, nil
}

// demo runs the demo turn with the given model provider (the cassette, or a live provider
// when the cassette is being recorded).
func demo(ctx context.Context, io stdio, d demoEnv) (int, error) {
	cfg := d.cfg
	cfg.Model = "replay:demo"
	st, err := openStore(cfg)
	if err != nil {
		return 0, err
	}
	a, err := build(cfg, st, runtimeOpts{cwd: d.work, logger: slog.New(slog.DiscardHandler),
		providers: map[string]model.Provider{"replay": d.provider}})
	if err != nil {
		st.Close()
		return 0, err
	}
	defer a.Close()
	s, err := a.eng.Create(ctx, engine.CreateOptions{Source: "cli", Title: "demo"})
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(io.err, "hermes demo — offline: badger store in a scratch dir, model replayed from a recorded cassette\n› %s\n", demoPrompt)
	term := newTerminal(stdio{in: strings.NewReader(""), out: io.out, err: io.err}, chatFlags{approve: "once", verbose: d.verbose})
	out, err := term.turn(ctx, s, demoPrompt)
	if err != nil {
		return 0, err
	}
	rows, _ := s.History(ctx, store.RowQuery{})
	fmt.Fprintf(io.err, "[session %s · %s · %d transcript rows · %d tokens]\n", s.ID(), out.ExitReason, len(rows), out.Usage.TotalTokens)
	return exitCode(out), nil
}
