package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
	"github.com/hermes-go/hermes/transports/acp"
)

func runACP(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	fs.SetOutput(io.err)
	check := fs.Bool("check", false, "report configuration, store and provider readiness, then exit")
	setup := fs.Bool("setup", false, "choose a provider and model and write them to $HERMES_HOME/config.yaml")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil || !noArgs(fs, io) {
		return 2
	}
	if *showVersion {
		fmt.Fprintf(io.out, "hermes acp %s (ACP protocol v1)\n", version)
		return 0
	}
	if *setup {
		return acpSetup(io)
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	if *check {
		return acpCheck(cfg, io)
	}
	// stdout carries protocol frames only; every diagnostic goes to stderr.
	logger := newLogger(io.err, slog.LevelWarn)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The store opens once initialize has been answered, not before: the handshake is what
	// an editor waits on. A store that cannot open fails every session method with its
	// error (and `hermes acp --check` reports it).
	// ServeLazy returns only after open has, so a is settled when it is read below.
	var a *assembled
	open := func() (*engine.Engine, error) {
		var err error
		if a, err = assemble(cfg, logger); err != nil {
			return nil, err
		}
		return a.eng, nil
	}
	err = acp.ServeLazy(ctx, open, io.in, io.out, acp.Options{
		Version:  version,
		Logger:   logger,
		Ready:    func() error { return providerReady(cfg) },
		Models:   acpModels(cfg),
		ImageDir: filepath.Join(cfg.Home, "attachments"),
		// approvals.question_timeout: how long a clarify question waits for the editor.
		QuestionTimeout: time.Duration(cfg.Approvals.QuestionTimeout),
		// The client's MCP stdio servers get the allow-listed environment, as configured ones do.
		MCP: mcptool.Options{Env: toolEnv(cfg)},
	})
	if a != nil {
		if cerr := a.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fail(io, err)
	}
	return 0
}

// providerReady reports whether the default model's provider can plausibly answer: a key is
// set, or it is a keyless endpoint (a local server), or it replays cassettes.
func providerReady(cfg *config.Config) error {
	name, _, ok := strings.Cut(cfg.Model, ":")
	if !ok {
		return fmt.Errorf("%w: model %q is not provider:model", acp.ErrNotReady, cfg.Model)
	}
	p, ok := cfg.Providers[name]
	switch {
	case !ok:
		return fmt.Errorf("%w: provider %q of model %q is not configured", acp.ErrNotReady, name, cfg.Model)
	case p.Type == "replay", p.APIKey != "", p.KeyEnv == "" && p.BaseURL != "":
		return nil
	case p.KeyEnv != "":
		return fmt.Errorf("%w: provider %q needs an API key (set %s)", acp.ErrNotReady, name, p.KeyEnv)
	}
	return fmt.Errorf("%w: provider %q has no API key", acp.ErrNotReady, name)
}

// acpModels lists provider:model names from the configuration, for the model selector.
func acpModels(cfg *config.Config) []string {
	var out []string
	for name, p := range cfg.Providers {
		for _, m := range p.Models {
			out = append(out, name+":"+m)
		}
	}
	slices.Sort(out)
	return out
}

func acpCheck(cfg *config.Config, io stdio) int {
	ok := true
	path := cfg.Path
	if path == "" {
		path = "(none; defaults and environment)"
	}
	fmt.Fprintf(io.out, "home:     %s\nconfig:   %s\nmodel:    %s\n", cfg.Home, path, cfg.Model)
	if err := providerReady(cfg); err != nil {
		ok = false
		fmt.Fprintf(io.out, "provider: FAIL %v (run `hermes acp --setup`)\n", err)
	} else {
		fmt.Fprintf(io.out, "provider: ok\n")
	}
	st, err := openStore(cfg)
	if err != nil {
		ok = false
		fmt.Fprintf(io.out, "store:    FAIL %v\n", err)
	} else {
		st.Close()
		fmt.Fprintf(io.out, "store:    ok (%s)\n", cfg.Store.Dir)
	}
	if !ok {
		return 1
	}
	return 0
}

// acpInteractive reports whether r is an interactive terminal (not a pipe or /dev/null).
func acpInteractive(r any) bool {
	f, ok := r.(*os.File)
	return ok && isTerminal(f)
}

const setupHelp = `hermes acp --setup needs an interactive terminal. Configure a provider instead with
environment variables:

  OPENAI_API_KEY=...            key for the openai provider (or any compatible endpoint)
  OPENAI_BASE_URL=...           optional: another OpenAI-compatible endpoint
  HERMES_MODEL=openai:gpt-4.1   the model as provider:model

or in %s:

  model: openai:gpt-4.1
  providers:
    openai:
      api_key_env: OPENAI_API_KEY

Then check with: hermes acp --check
`

func acpSetup(io stdio) int {
	home := os.Getenv("HERMES_HOME")
	if home == "" {
		home = config.DefaultHome()
	}
	path := filepath.Join(home, "config.yaml")
	if !acpInteractive(io.in) {
		fmt.Fprintf(io.err, setupHelp, path)
		return 1
	}
	in := bufio.NewReader(io.in)
	ask := func(q, def string) string {
		fmt.Fprintf(io.err, "%s [%s]: ", q, def)
		line, _ := in.ReadString('\n')
		if v := strings.TrimSpace(line); v != "" {
			return v
		}
		return def
	}
	name := ask("provider name", "openai")
	baseURL := ask("base URL (empty for the provider's default)", "")
	keyEnv := ask("environment variable holding the API key (empty for none)", "OPENAI_API_KEY")
	modelName := ask("model", "gpt-4.1")
	if err := writeSetup(path, name, baseURL, keyEnv, modelName); err != nil {
		return fail(io, err)
	}
	fmt.Fprintf(io.err, "wrote %s; check with: hermes acp --check\n", path)
	return 0
}

// writeSetup merges a provider and model into the config file, keeping everything else.
func writeSetup(path, name, baseURL, keyEnv, modelName string) error {
	doc := map[string]any{}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("setup: %s: %w", path, err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("setup: %w", err)
	}
	providers, _ := doc["providers"].(map[string]any)
	if providers == nil {
		providers = map[string]any{}
	}
	p := map[string]any{"type": "openai"}
	if baseURL != "" {
		p["base_url"] = baseURL
	}
	if keyEnv != "" {
		p["api_key_env"] = keyEnv
	}
	providers[name] = p
	doc["providers"] = providers
	doc["model"] = name + ":" + modelName
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return os.Rename(tmp, path)
}
