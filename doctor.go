package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/homestore"
)

func init() {
	extraCommands = append(extraCommands, command{"doctor", "check the session store for records it cannot serve (--quarantine moves them aside); show the store process, its clients and leases (--json)", runDoctor})
}

// doctorReport is the --json output.
type doctorReport struct {
	Store        string            `json:"store"`
	StoreProcess *homestore.Status `json:"store_process,omitempty"` // when reached through one
	Problems     []doctorProblem   `json:"problems"`
	Quarantined  int               `json:"quarantined"`
}

type doctorProblem struct {
	Kind    string `json:"kind"`
	Key     string `json:"key"` // Go-quoted: a key may hold any bytes
	Reason  string `json:"reason"`
	MovedTo string `json:"moved_to,omitempty"`
}

// runDoctor scans the store for records it cannot serve (undecodable, or stored under a key
// their content disagrees with). Listings already skip them; doctor names them, and with
// --quarantine moves them under a quarantine prefix (never deleting). Exit status: 0 when the
// store is clean or everything found was quarantined, 1 when problems remain, 2 on usage.
func runDoctor(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(io.err)
	quarantine := fs.Bool("quarantine", false, "move every record found aside (under q/<time>/<key>); nothing is deleted")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(io.err, "usage: hermes doctor [--quarantine] [--json]")
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		fmt.Fprintln(io.err, "hermes:", err)
		return 1
	}
	// A checkup creates nothing: a home without a store has nothing to report.
	if _, err := os.Stat(cfg.Store.Dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(io.out, "store %s: does not exist; nothing to check\n", cfg.Store.Dir)
		return 0
	}
	st, err := openStore(cfg)
	if err != nil {
		fmt.Fprintln(io.err, "hermes:", err)
		return 1
	}
	defer st.Close()
	var s store.Store = st
	doc, ok := s.(store.Doctor)
	if !ok {
		fmt.Fprintln(io.err, "hermes: this store cannot be checked")
		return 1
	}
	found, err := doc.Doctor(ctx, *quarantine)
	rep := doctorReport{Store: cfg.Store.Dir, Problems: []doctorProblem{}}
	if hc, ok := s.(*homestore.Client); ok {
		if status, serr := hc.Status(ctx); serr == nil {
			rep.StoreProcess = status
		} else {
			err = errors.Join(err, serr)
		}
	}
	remaining := 0
	for _, p := range found {
		rep.Problems = append(rep.Problems, doctorProblem{Kind: p.Kind, Key: strconv.Quote(p.Key), Reason: p.Reason, MovedTo: quoteIf(p.MovedTo)})
		if p.MovedTo != "" {
			rep.Quarantined++
		} else {
			remaining++
		}
	}
	if *asJSON {
		enc := json.NewEncoder(io.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		if sp := rep.StoreProcess; sp != nil {
			printStoreProcess(io, cfg.Home, sp)
		}
		for _, p := range rep.Problems {
			fmt.Fprintf(io.out, "%-8s %s: %s\n", p.Kind, p.Key, p.Reason)
			if p.MovedTo != "" {
				fmt.Fprintf(io.out, "         quarantined as %s\n", p.MovedTo)
			}
		}
		switch {
		case len(found) == 0:
			fmt.Fprintf(io.out, "store %s: no problems found\n", rep.Store)
		case remaining == 0:
			fmt.Fprintf(io.out, "store %s: %d problem(s) found, all quarantined\n", rep.Store, rep.Quarantined)
		default:
			fmt.Fprintf(io.out, "store %s: %d problem(s) found; run `hermes doctor --quarantine` to move them aside\n", rep.Store, remaining)
		}
	}
	if err != nil {
		fmt.Fprintln(io.err, "hermes:", err)
		return 1
	}
	if remaining > 0 {
		return 1
	}
	return 0
}

// printStoreProcess shows the home's store process, its clients (this doctor among them) and the
// session leases held.
func printStoreProcess(io stdio, home string, sp *homestore.Status) {
	fmt.Fprintf(io.out, "store process: pid %d, up since %s, socket %s, log %s\n",
		sp.PID, sp.Started.Local().Format(time.DateTime), homestore.SocketPath(home), homestore.LogPath(home))
	fmt.Fprintf(io.out, "clients: %d\n", len(sp.Clients))
	for _, c := range sp.Clients {
		cmd := c.Command
		if cmd == "" {
			cmd = "?"
		}
		fmt.Fprintf(io.out, "  pid %-7d %-10s connected %s, %d calls, %d watches\n",
			c.PID, cmd, c.Connected.Local().Format(time.DateTime), c.Calls, c.Watches)
	}
	fmt.Fprintf(io.out, "leases held: %d\n", len(sp.Leases))
	for _, l := range sp.Leases {
		fmt.Fprintf(io.out, "  session %s: %s, generation %d, until %s\n",
			l.SessionID, l.Owner, l.Generation, l.Expires.Local().Format(time.DateTime))
	}
}

func quoteIf(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}
