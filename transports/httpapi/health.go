package httpapi

import (
	"context"
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// platform is the name health and capabilities report.
const platform = "hermes-agent"

// health answers liveness probes without a key: it touches nothing but the process.
func (s *Server) health(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok", "platform": platform, "version": s.opts.Version})
}

// healthProbeKey is read (never written) to prove the store answers.
const healthProbeKey = "health/probe"

// healthDetailed reports the process, the store, the sessions and turns in flight, browser
// control, and whatever Options.Status adds (MCP servers). A store that does not answer makes
// the whole report "degraded" with 503, so a load balancer stops sending turns here.
//
// Those figures are server-wide (every principal's sessions and turns, browser controllers,
// MCP servers): they are the operator's. An extra key gets the plain /health report, so it
// learns nothing about the other principals' activity.
func (s *Server) healthDetailed(c *fiber.Ctx) error {
	if w := who(c); w.ID != engine.LocalOwner.ID && !w.Admin {
		return s.health(c)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	status, code := "ok", fiber.StatusOK
	st := fiber.Map{"status": "ok"}
	if _, err := s.eng.Setting(ctx, healthProbeKey); err != nil && !errors.Is(err, engine.ErrNotFound) {
		// A store error may quote its DSN (postgres://user:password@…).
		st = fiber.Map{"status": "error", "error": redact.String(err.Error())}
		status, code = "degraded", fiber.StatusServiceUnavailable
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(wire.StoreRetryAfter))
	}
	live := s.eng.LiveSessions()
	busy := 0
	for _, sess := range live {
		if st := sess.Status(); st == engine.StatusWorking || st == engine.StatusWaiting {
			busy++
		}
	}
	active := 0
	if s.slots != nil {
		active = len(s.slots)
	}
	state := "running"
	if s.ctx.Err() != nil {
		state, status = "draining", "draining"
	}
	body := fiber.Map{
		"status":            status,
		"platform":          platform,
		"version":           s.opts.Version,
		"gateway_state":     state,
		"platforms":         fiber.Map{"api_server": fiber.Map{"state": state}},
		"active_agents":     active,
		"gateway_busy":      active > 0 || busy > 0,
		"gateway_drainable": true,
		"exit_reason":       nil,
		"updated_at":        time.Now().UTC().Format(time.RFC3339),
		"pid":               os.Getpid(),
		"uptime_s":          int(time.Since(s.start).Seconds()),
		"store":             st,
		"sessions":          fiber.Map{"live": len(live), "busy": busy},
		"turns":             fiber.Map{"active": active, "max": max(s.opts.MaxConcurrent, 0)},
		"browser_control":   s.browserStatus(),
	}
	if s.opts.Status != nil {
		for k, v := range s.opts.Status(ctx) {
			if _, taken := body[k]; !taken {
				body[k] = v
			}
		}
	}
	return c.Status(code).JSON(body)
}

func (s *Server) browserStatus() map[string]any {
	if s.browser == nil {
		return map[string]any{"enabled": false}
	}
	return s.browser.b.Status()
}
