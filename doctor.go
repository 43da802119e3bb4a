package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/store"
)

func init() {
	extraCommands = append(extraCommands, command{"doctor", "check the session store for records it cannot serve; --quarantine moves them aside (--json)", runDoctor})
}

// doctorReport is the --json output.
type doctorReport struct {
	Store       string          `json:"store"`
	Problems    []doctorProblem `json:"problems"`
	Quarantined int             `json:"quarantined"`
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

func quoteIf(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}
