package httpapi

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// writeError writes err as an OpenAI error response.
func writeError(c *fiber.Ctx, err error) error {
	e := wire.Classify(err)
	if e.NoRetry {
		c.Set("x-should-retry", "false")
	}
	if e.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
	}
	return c.Status(e.Status).JSON(wire.Body(e))
}

func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	e := wire.Classify(err)
	switch {
	case e.Status == fiber.StatusInternalServerError:
		s.log.Error("handler failed", "path", c.Path(), "err", err)
	case e.Code == "session_db_unavailable":
		// The client is told only that the store cannot be reached; the cause is the operator's.
		cause := err
		if e.Cause != nil {
			cause = e.Cause
		}
		s.log.Warn("session store unavailable", "path", c.Path(), "err", cause)
	}
	var fe *fiber.Error
	if errors.As(err, &fe) && fe.Code == fiber.StatusNotFound {
		e.Message = "unknown route " + c.Method() + " " + strings.Clone(c.Path())
	}
	// A body over the limit is refused before any middleware ran.
	securityHeaders(c)
	return writeError(c, e)
}
