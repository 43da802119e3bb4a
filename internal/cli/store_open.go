package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/homestore"
)

// One home, many processes. The badger directory of a home belongs to one store process
// (`hermes store-server`), started on demand by the first command that needs it and reached by
// every command over the socket in the home (engine/store/homestore), so any number of hermes
// processes share a home. HERMES_STORE_PROCESS=off opens badger in the command's own process
// instead (tests, embedding, a single process); that process then holds the directory alone.
const (
	envStoreProcess = "HERMES_STORE_PROCESS" // "off": badger in this process
	envStoreIdle    = "HERMES_STORE_IDLE"    // how long the store process outlives its last client
	defaultIdle     = 30 * time.Second
)

// openHomeStore opens cfg's badger store through the home's store process, or in this process
// when HERMES_STORE_PROCESS=off.
func openHomeStore(cfg *config.Config) (store.Store, error) {
	o := badgerstore.DefaultOptions()
	if cfg.Store.SyncWrites != nil {
		o.SyncWrites = *cfg.Store.SyncWrites
	}
	if os.Getenv(envStoreProcess) == "off" {
		st, err := badgerstore.Open(cfg.Store.Dir, o)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	home, err := filepath.Abs(cfg.Home)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Store.Dir)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the hermes binary to start the store process: %w", err)
	}
	args := []string{"store-server", "--home", home, "--dir", dir, "--sync=" + strconv.FormatBool(o.SyncWrites)}
	cmd := ""
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	c, err := homestore.Dial(context.Background(), homestore.ClientOptions{
		Home:  home,
		Start: func() error { return homestore.Spawn(home, nil, exe, args...) },
		Info:  homestore.ClientInfo{Command: cmd},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// runStoreServer is the store process of a home. It exits after HERMES_STORE_IDLE (default 30 s)
// without clients, on SIGTERM or SIGINT, or at once when another store process serves the home.
func runStoreServer(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("store-server", flag.ContinueOnError)
	fs.SetOutput(io.err)
	home := fs.String("home", "", "the home to serve (default $HERMES_HOME)")
	dir := fs.String("dir", "", "the badger directory (default the configured store.dir)")
	sync := fs.Bool("sync", true, "fsync every commit before acknowledging it")
	idle := fs.Duration("idle", 0, "exit after this long without clients (default $HERMES_STORE_IDLE or 30s)")
	if err := fs.Parse(args); err != nil || !noArgs(fs, io) {
		return 2
	}
	if *home == "" || *dir == "" {
		cfg, err := config.Load(os.Getenv)
		if err != nil {
			return fail(io, err)
		}
		if *home == "" {
			*home = cfg.Home
		}
		if *dir == "" {
			*dir = cfg.Store.Dir
		}
	}
	if *idle == 0 {
		*idle = defaultIdle
		if v := os.Getenv(envStoreIdle); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fail(io, fmt.Errorf("%s: %w", envStoreIdle, err))
			}
			*idle = d
		}
	}
	log := slog.New(slog.NewTextHandler(io.err, nil))
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	o := badgerstore.DefaultOptions()
	o.SyncWrites = *sync
	o.Logger = log
	err := homestore.Serve(ctx, homestore.ServerOptions{
		Home:   *home,
		Idle:   *idle,
		Logger: log,
		Open:   func() (store.Store, error) { return badgerstore.Open(*dir, o) },
	})
	if errors.Is(err, homestore.ErrRunning) {
		log.Info("not starting", "reason", err)
		return 0
	}
	if err != nil {
		log.Error("store process failed", "err", err)
		return 1
	}
	return 0
}
