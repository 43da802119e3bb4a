package httpapi

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

const (
	corsMethods = "GET, POST, PATCH, DELETE, OPTIONS"
	// The SDKs add X-Stainless-* headers to every request; browsers preflight each of them.
	corsHeaders = "Authorization, Content-Type, Idempotency-Key, X-Hermes-Session-Id, X-Hermes-Session-Key, X-Hermes-Tool-Progress, X-Stainless-Lang, X-Stainless-Package-Version, X-Stainless-OS, X-Stainless-Arch, X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Retry-Count, X-Stainless-Timeout, X-Stainless-Helper-Method, OpenAI-Organization, OpenAI-Project"
	corsExpose  = "X-Request-Id, X-Hermes-Session-Id, X-Hermes-Session-Key, X-Hermes-Completed, X-Hermes-Partial, X-Hermes-Error, X-Hermes-Replayed, Idempotency-Replayed"
)

// securityHeaders are sent on every response: the API serves JSON and event streams only, so
// nothing may be framed, sniffed or leak a referrer.
func securityHeaders(c *fiber.Ctx) {
	h := &c.Response().Header
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	h.Set("Strict-Transport-Security", "max-age=31536000")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-XSS-Protection", "0")
	h.Set("Referrer-Policy", "no-referrer")
}

func requestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// common runs before routing and auth: request id, security headers and CORS. A preflight is
// answered here, without a key: browsers never send credentials on OPTIONS.
func (s *Server) common(c *fiber.Ctx) error {
	c.Set("X-Request-Id", requestID())
	securityHeaders(c)
	extractTrace(c)
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" {
		return c.Next()
	}
	if s.sameOrigin(c, origin) {
		return c.Next()
	}
	if !s.cors["*"] && !s.cors[origin] {
		return writeError(c, &wire.Error{Status: fiber.StatusForbidden, Message: "origin not allowed: " + origin, Type: "invalid_request_error", Code: "origin_not_allowed"})
	}
	c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
	c.Set(fiber.HeaderVary, "Origin")
	c.Set(fiber.HeaderAccessControlExposeHeaders, corsExpose)
	if c.Method() == fiber.MethodOptions {
		c.Set(fiber.HeaderAccessControlAllowMethods, corsMethods)
		c.Set(fiber.HeaderAccessControlAllowHeaders, corsHeaders)
		c.Set(fiber.HeaderAccessControlMaxAge, "600")
		return c.SendStatus(fiber.StatusNoContent)
	}
	return c.Next()
}
