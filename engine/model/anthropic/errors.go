package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/redact"
)

// retryableTypes are the error types worth another attempt whatever the status: the API's
// overload and rate-limit signals and its internal errors.
var retryableTypes = map[string]bool{"overloaded_error": true, "rate_limit_error": true, "api_error": true, "timeout_error": true}

// ShouldRetry reports whether a failure is worth retrying: 408, 409, 429 and 5xx (529
// overloaded included), or a retryable error type; the x-should-retry header overrides both
// ways, as the SDKs honour it.
func ShouldRetry(status int, typ string, header http.Header) bool {
	switch strings.ToLower(strings.TrimSpace(header.Get("X-Should-Retry"))) {
	case "true":
		return true
	case "false":
		return false
	}
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500 || retryableTypes[typ]
}

// mapError turns what the SDK reported into the engine's error vocabulary: an API envelope
// (an HTTP error or an error event in the stream) becomes *model.Error, a failure to connect
// ErrUnreachable, and a stream cut short ErrIncompleteStream. resp is the response the request
// got, nil when none arrived.
func mapError(err error, resp *http.Response) error {
	var ae *sdk.Error
	if errors.As(err, &ae) {
		status := ae.StatusCode
		var h http.Header
		if ae.Response != nil {
			h = ae.Response.Header
		}
		if status >= 200 && status < 300 {
			status, h = 0, nil // an error event inside a 200 stream
		}
		e := &model.Error{Status: status, Type: string(ae.Type()), Message: redact.String(ae.Message)}
		if e.Message == "" {
			e.Message = redact.String(strings.TrimSpace(ae.RawJSON()))
		}
		if e.Message == "" {
			e.Message = http.StatusText(ae.StatusCode)
		}
		e.Code = e.Type
		e.Retryable = ShouldRetry(status, e.Type, h)
		e.RetryAfter = retryAfter(h, time.Now())
		return e
	}
	if raw, ok := strings.CutPrefix(err.Error(), "received error while streaming: "); ok {
		return eventError([]byte(raw))
	}
	if resp == nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = redact.String(ue.URL)
		}
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return fmt.Errorf("%w: %w", ErrIncompleteStream, err)
}

// eventError reads the data of an "event: error" the SDK could not attach to a response.
func eventError(data []byte) *model.Error {
	var env struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e := &model.Error{Message: redact.String(strings.TrimSpace(string(data)))}
	if json.Unmarshal(data, &env) == nil && env.Error.Type != "" {
		e.Type, e.Code, e.Message = env.Error.Type, env.Error.Type, redact.String(env.Error.Message)
	}
	e.Retryable = retryableTypes[e.Type]
	return e
}
