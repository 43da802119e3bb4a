package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/engine/store/homestore"
)

// The areas doctor checks, in the order it checks them (--check picks some).
var doctorAreas = []string{"home", "keys", "store", "models", "mcp", "policy"}

// Check statuses: fail makes doctor exit 1; warn is worth a look; ok needs nothing.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "fail"
)

// doctorCheck is one line of the report: what was checked, how it went and what to do.
type doctorCheck struct {
	Area   string   `json:"area"`
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Detail string   `json:"detail"`
	Fix    string   `json:"fix,omitempty"`
	More   []string `json:"more,omitempty"` // further lines: clients, leases, failing examples
}

// doctorReport is the --json output. Store, StoreProcess, Problems and Quarantined are the
// store check's findings, as they were before the other checks joined.
type doctorReport struct {
	OK           bool              `json:"ok"` // no check failed
	Failed       int               `json:"failed"`
	Warnings     int               `json:"warnings"`
	Checks       []doctorCheck     `json:"checks"`
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

// add records a check, every text in it redacted (engine/redact): a detail may quote an
// error that quotes a key or a URL with credentials.
func (r *doctorReport) add(c doctorCheck) {
	c.Name, c.Detail, c.Fix = redact.String(c.Name), oneLine(redact.String(c.Detail)), redact.String(c.Fix)
	for i, m := range c.More {
		c.More[i] = redact.String(m)
	}
	switch c.Status {
	case statusFail:
		r.Failed++
	case statusWarn:
		r.Warnings++
	}
	r.Checks = append(r.Checks, c)
}

// oneLine joins the lines of a multi-line error (a driver's one per address tried) with "; ",
// so each check stays one line.
func oneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	var parts []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, strings.TrimSuffix(l, ":"))
		}
	}
	return strings.Join(parts, "; ")
}

// doctorOptions are the flags every check may need.
type doctorOptions struct {
	quarantine bool
	timeout    time.Duration // of one network request, MCP server start or store open
}

// runDoctor checks everything a command needs — the home, the API keys, the store, the
// configured model endpoints, MCP servers and the policy — and says what to do about each
// problem. Exit status: 0 when no check failed (warnings allowed), 1 when one did, 2 on usage.
func runDoctor(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(io.err)
	quarantine := fs.Bool("quarantine", false, "move every unreadable store record found aside (under q/<time>/<key>); nothing is deleted")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	only := fs.String("check", strings.Join(doctorAreas, ","), "the areas to check, comma-separated")
	timeout := fs.Duration("timeout", 10*time.Second, "how long one endpoint request or MCP server start may take")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *timeout <= 0 {
		fmt.Fprintln(io.err, "usage: hermes doctor [--check home,keys,store,models,mcp,policy] [--timeout 10s] [--quarantine] [--json]")
		return 2
	}
	areas := map[string]bool{}
	for _, a := range strings.Split(*only, ",") {
		a = strings.TrimSpace(a)
		if !slices.Contains(doctorAreas, a) {
			fmt.Fprintf(io.err, "hermes doctor: unknown check %q (want %s)\n", a, strings.Join(doctorAreas, ", "))
			return 2
		}
		areas[a] = true
	}
	o := doctorOptions{quarantine: *quarantine, timeout: *timeout}
	rep := &doctorReport{Checks: []doctorCheck{}, Problems: []doctorProblem{}}
	cfg, err := config.Load(os.Getenv)
	if areas["home"] {
		checkHome(rep, cfg, err)
	} else if err != nil {
		rep.add(configCheck(err))
	}
	if cfg != nil {
		checks := []struct {
			area string
			run  func()
		}{
			{"keys", func() { checkKeys(rep, cfg) }},
			{"store", func() { checkStore(ctx, rep, cfg, o) }},
			{"models", func() { checkModels(ctx, rep, cfg, o) }},
			{"mcp", func() { checkMCP(ctx, rep, cfg, o) }},
			{"policy", func() { checkPolicy(ctx, rep, cfg) }},
		}
		for _, c := range checks {
			if areas[c.area] {
				c.run()
			}
		}
	}
	rep.OK = rep.Failed == 0
	if *asJSON {
		enc := json.NewEncoder(io.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printDoctor(io, rep)
	}
	if !rep.OK {
		return 1
	}
	return 0
}

// printDoctor writes one line per check, its further lines indented under it, and what to do
// under a check that is not ok.
func printDoctor(io stdio, rep *doctorReport) {
	for _, c := range rep.Checks {
		fmt.Fprintf(io.out, "%-4s  %-6s %s: %s\n", c.Status, c.Area, c.Name, c.Detail)
		for _, m := range c.More {
			fmt.Fprintf(io.out, "              %s\n", m)
		}
		if c.Fix != "" {
			fmt.Fprintf(io.out, "              → %s\n", c.Fix)
		}
	}
	switch {
	case rep.Failed > 0:
		fmt.Fprintf(io.out, "%d check(s) failed, %d warning(s)\n", rep.Failed, rep.Warnings)
	case rep.Warnings > 0:
		fmt.Fprintf(io.out, "nothing failed, %d warning(s)\n", rep.Warnings)
	default:
		fmt.Fprintln(io.out, "everything checked is ok")
	}
}
