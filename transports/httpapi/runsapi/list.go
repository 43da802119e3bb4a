package runsapi

import (
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// Bounds of GET /v1/runs.
const (
	runsListDefault = 50
	runsListMax     = 500
)

// List is GET /v1/runs: the caller's runs this process holds (unsettled ones, and settled
// ones for runRetention after they settled), newest first, as GET /v1/runs/{id} shows each,
// plus duration_ms (admission to settlement, or to now while unsettled). ?limit (default 50, at
// most 500) &status (one status or a comma-separated list).
func (rs *Runs) List(c *fiber.Ctx) error {
	limit, err := wire.QueryInt(c, "limit", runsListDefault)
	if err != nil {
		return err
	}
	limit = min(max(limit, 1), runsListMax)
	var want []string
	for _, st := range strings.Split(c.Query("status"), ",") {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		switch st {
		case runQueued, runRunning, runWaiting, runStopping, runUnknown, runCompleted, runFailed, runCancelled, runInterrupted:
			want = append(want, st)
		default:
			return wire.BadRequest("status", "invalid_value", "unknown run status '"+st+"'")
		}
	}
	rs.mu.Lock()
	var mine []*run
	for _, r := range rs.m {
		if rs.sees(c, r.owner) {
			mine = append(mine, r)
		}
	}
	rs.mu.Unlock()
	slices.SortFunc(mine, func(a, b *run) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	data := []fiber.Map{}
	total := 0
	for _, r := range mine {
		m := r.statusObject()
		if len(want) > 0 && !slices.Contains(want, m["status"].(string)) {
			continue
		}
		total++
		if len(data) >= limit {
			continue
		}
		r.mu.Lock()
		end := time.Now()
		if terminal(r.status) {
			end = r.updated
			if !r.rec.SettledAt.IsZero() {
				end = r.rec.SettledAt // a run read back from its record: updated is when it was read
			}
		}
		m["duration_ms"] = max(end.Sub(r.created).Milliseconds(), 0)
		r.mu.Unlock()
		data = append(data, m)
	}
	return c.JSON(fiber.Map{"object": "list", "data": data, "total": total, "has_more": total > len(data)})
}
