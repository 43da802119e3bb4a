package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/homestore"
)

// checkStore opens the configured store (badger through the home's store process, or
// PostgreSQL), shows the store process with its clients and leases, and scans for records the
// store cannot serve (undecodable, or stored under a key their content disagrees with).
// Listings already skip them; doctor names them, and with --quarantine moves them under a
// quarantine prefix (never deleting).
func checkStore(ctx context.Context, rep *doctorReport, cfg *config.Config, o doctorOptions) {
	kind, where := "badger", cfg.Store.Dir
	if cfg.Store.URL != "" {
		kind, where = "postgres", redact.String(cfg.Store.URL)
	}
	rep.Store = where
	// A checkup creates nothing: a home without a store has nothing to report.
	if cfg.Store.URL == "" {
		if _, err := os.Stat(cfg.Store.Dir); errors.Is(err, os.ErrNotExist) {
			rep.add(doctorCheck{Area: "store", Name: "store " + where, Status: statusOK, Detail: "does not exist; nothing to check (it is created on first use)"})
			return
		}
	}
	st, err := openStore(cfg)
	if err != nil {
		fix := "see the store log, or run hermes again: the store process is restarted on demand"
		if kind == "postgres" {
			fix = "check that the database answers at the URL in HERMES_STORE (or store.url) and that its user may connect"
		}
		rep.add(doctorCheck{Area: "store", Name: kind + " " + where, Status: statusFail, Detail: "does not open: " + err.Error(), Fix: fix})
		return
	}
	defer st.Close()
	rep.add(doctorCheck{Area: "store", Name: kind + " " + where, Status: statusOK, Detail: "opens"})
	var s store.Store = st
	if hc, ok := s.(*homestore.Client); ok {
		sp, err := hc.Status(ctx)
		if err != nil {
			rep.add(doctorCheck{Area: "store", Name: "store process", Status: statusFail, Detail: err.Error(),
				Fix: "see " + homestore.LogPath(cfg.Home)})
		} else {
			rep.StoreProcess = sp
			rep.add(storeProcessCheck(cfg.Home, sp))
		}
	}
	doc, ok := s.(store.Doctor)
	if !ok {
		rep.add(doctorCheck{Area: "store", Name: "records", Status: statusOK, Detail: "this store has no record scan (" + kind + ")"})
		return
	}
	found, err := doc.Doctor(ctx, o.quarantine)
	if err != nil {
		rep.add(doctorCheck{Area: "store", Name: "records", Status: statusFail, Detail: "scan: " + err.Error(), Fix: "run hermes doctor again; if it persists, see the store log"})
	}
	remaining := 0
	for _, p := range found {
		dp := doctorProblem{Kind: p.Kind, Key: strconv.Quote(p.Key), Reason: p.Reason, MovedTo: quoteIf(p.MovedTo)}
		rep.Problems = append(rep.Problems, dp)
		c := doctorCheck{Area: "store", Name: dp.Kind + " " + dp.Key, Status: statusFail, Detail: dp.Reason,
			Fix: "run `hermes doctor --quarantine` to move it aside"}
		if p.MovedTo != "" {
			rep.Quarantined++
			c.Status, c.Fix, c.More = statusOK, "", []string{"quarantined as " + dp.MovedTo}
		} else {
			remaining++
		}
		rep.add(c)
	}
	if err != nil {
		return
	}
	switch {
	case len(found) == 0:
		rep.add(doctorCheck{Area: "store", Name: "records", Status: statusOK, Detail: "no problems found"})
	case remaining == 0:
		rep.add(doctorCheck{Area: "store", Name: "records", Status: statusOK, Detail: fmt.Sprintf("%d problem(s) found, all quarantined", rep.Quarantined)})
	}
}

// storeProcessCheck shows the home's store process, its clients (this doctor among them) and
// the session leases held.
func storeProcessCheck(home string, sp *homestore.Status) doctorCheck {
	c := doctorCheck{Area: "store", Name: "store process", Status: statusOK,
		Detail: fmt.Sprintf("pid %d, up since %s, socket %s, log %s; %d client(s), %d lease(s) held",
			sp.PID, sp.Started.Local().Format(time.DateTime), homestore.SocketPath(home), homestore.LogPath(home), len(sp.Clients), len(sp.Leases))}
	for _, cl := range sp.Clients {
		cmd := cl.Command
		if cmd == "" {
			cmd = "?"
		}
		c.More = append(c.More, fmt.Sprintf("client pid %-7d %-10s connected %s, %d calls, %d watches",
			cl.PID, cmd, cl.Connected.Local().Format(time.DateTime), cl.Calls, cl.Watches))
	}
	for _, l := range sp.Leases {
		c.More = append(c.More, fmt.Sprintf("lease session %s: %s, generation %d, until %s",
			l.SessionID, l.Owner, l.Generation, l.Expires.Local().Format(time.DateTime)))
	}
	return c
}

func quoteIf(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}
