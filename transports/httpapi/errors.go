package httpapi

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
)

// apiError is an OpenAI error object with its HTTP status. Handlers return it (or any error)
// and the error handler writes the envelope, so every route fails the same way.
type apiError struct {
	Status  int
	Message string
	Type    string
	Param   string
	Code    string
	// NoRetry adds "x-should-retry: false": the SDKs retry 409/429/5xx, which would repeat
	// work the agent may already have done.
	NoRetry bool
	// RetryAfter (seconds) is sent as Retry-After (a 429, or a 503 while the store is out).
	RetryAfter int
	// ResponseID names the stored response a failed /v1/responses turn left (a GET reads it);
	// sent as the error object's "response_id", a field OpenAI's clients ignore.
	ResponseID string
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, code, msg string) *apiError {
	return &apiError{Status: fiber.StatusBadRequest, Message: msg, Type: "invalid_request_error", Param: param, Code: code}
}

// withParam names the offending field of a 400 raised by a shared validator.
func withParam(err error, param string) error {
	var ae *apiError
	if errors.As(err, &ae) {
		cp := *ae
		cp.Param = param
		return &cp
	}
	return err
}

// errorBody is the four-key envelope; param and code are null when empty.
func errorBody(e *apiError) fiber.Map {
	var param, code any
	if e.Param != "" {
		param = e.Param
	}
	if e.Code != "" {
		code = e.Code
	}
	obj := fiber.Map{"message": e.Message, "type": e.Type, "param": param, "code": code}
	if e.ResponseID != "" {
		obj["response_id"] = e.ResponseID
	}
	return fiber.Map{"error": obj}
}

// classify maps an error from the engine (or a handler) to the status and envelope a client
// sees. It is the only place that decides this.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusRequestEntityTooLarge:
			return &apiError{Status: fe.Code, Message: "request body too large (limit 10 MB)", Type: "invalid_request_error", Code: "body_too_large"}
		case fiber.StatusNotFound:
			return &apiError{Status: fe.Code, Message: fe.Message, Type: "invalid_request_error", Code: "not_found"}
		case fiber.StatusMethodNotAllowed:
			return &apiError{Status: fe.Code, Message: fe.Message, Type: "invalid_request_error", Code: "method_not_allowed"}
		}
		typ := "invalid_request_error"
		if fe.Code >= 500 {
			typ = "server_error"
		}
		// The HTTP parser's messages quote the raw request, credentials included: keep only
		// what went wrong.
		if msg, _, cut := strings.Cut(fe.Message, ": buffer size="); cut {
			return &apiError{Status: fe.Code, Message: msg, Type: typ, Code: "malformed_request"}
		}
		return &apiError{Status: fe.Code, Message: fe.Message, Type: typ}
	}
	msg := err.Error()
	switch {
	case errors.Is(err, engine.ErrSessionNotFound), errors.Is(err, engine.ErrNotFound):
		return &apiError{Status: fiber.StatusNotFound, Message: msg, Type: "invalid_request_error", Code: "session_not_found"}
	case errors.Is(err, engine.ErrInvalidModel), errors.Is(err, model.ErrUnknownProvider):
		return &apiError{Status: fiber.StatusNotFound, Message: msg, Type: "invalid_request_error", Param: "model", Code: "model_not_found"}
	case errors.Is(err, engine.ErrEmptyPrompt):
		return badRequest("messages", "empty_prompt", msg)
	case errors.Is(err, engine.ErrBusy), errors.Is(err, engine.ErrSessionExists):
		return &apiError{Status: fiber.StatusConflict, Message: msg, Type: "invalid_request_error", Code: "session_busy", NoRetry: true}
	case errors.Is(err, engine.ErrSessionClosed):
		return &apiError{Status: fiber.StatusConflict, Message: msg, Type: "invalid_request_error", Code: "session_closed", NoRetry: true}
	case errors.Is(err, engine.ErrEngineClosed), errors.Is(err, context.Canceled):
		return &apiError{Status: fiber.StatusServiceUnavailable, Message: "server shutting down", Type: "server_error", Code: "unavailable"}
	case errors.Is(err, engine.ErrStoreUnavailable):
		return storeUnavailable(err)
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{Status: fiber.StatusGatewayTimeout, Message: msg, Type: "server_error", Code: "timeout", NoRetry: true}
	}
	return &apiError{Status: fiber.StatusInternalServerError, Message: "internal error", Type: "server_error", NoRetry: true}
}

// storeRetryAfter is the Retry-After (seconds) of a 503 for a store that cannot be reached: a
// database restart or a store process's restart takes about that long.
const storeRetryAfter = 2

// storeUnavailable is the 503 of a request the store could not serve for now; the client may
// send it again after Retry-After.
func storeUnavailable(err error) *apiError {
	return &apiError{Status: fiber.StatusServiceUnavailable, Message: "session store unavailable: " + err.Error(),
		Type: "server_error", Code: "session_db_unavailable", RetryAfter: storeRetryAfter}
}

// storeOutage reports whether a turn failed because the store could not be reached (its
// database restarting): what it wrote is kept, and the client may ask again after
// Retry-After, so it is answered 503 like a request the store refused, never 502.
func storeOutage(o engine.Outcome) bool {
	return o.Status == engine.StatusFailed && o.ExitReason == exitStore && strings.Contains(o.Error, engine.ErrStoreUnavailable.Error())
}

// exitStore is the engine's exit reason of a turn a store write ended.
const exitStore = "store_error"

// writeError writes err as an OpenAI error response.
func writeError(c *fiber.Ctx, err error) error {
	e := classify(err)
	if e.NoRetry {
		c.Set("x-should-retry", "false")
	}
	if e.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
	}
	return c.Status(e.Status).JSON(errorBody(e))
}

func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	e := classify(err)
	if e.Status == fiber.StatusInternalServerError {
		s.log.Error("handler failed", "path", c.Path(), "err", err)
	}
	var fe *fiber.Error
	if errors.As(err, &fe) && fe.Code == fiber.StatusNotFound {
		e.Message = "unknown route " + c.Method() + " " + strings.Clone(c.Path())
	}
	// A body over the limit is refused before any middleware ran.
	securityHeaders(c)
	return writeError(c, e)
}
