package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/model"
)

// Sentinel errors for failures that are not a provider error envelope. Callers branch on them
// with errors.Is; provider envelopes (HTTP errors and in-band stream errors) are *model.Error.
var (
	// ErrUnreachable wraps a transport failure: the endpoint could not be reached or the
	// connection broke before a response arrived.
	ErrUnreachable = model.ErrUnreachable
	// ErrIncompleteStream means the event stream ended (EOF, reset, truncated body) before the
	// terminating "data: [DONE]" event, so the answer may be cut short.
	ErrIncompleteStream = errors.New("stream ended before [DONE]")
	// ErrMalformedStream means the stream carried something that is not a Chat Completions
	// chunk: invalid JSON, or a line or event beyond MaxEventBytes.
	ErrMalformedStream = errors.New("malformed chat completions stream")
)

// DefaultMaxRetries is the number of retries after the first attempt when Config.MaxRetries is
// zero. It matches the official SDKs, so an endpoint sees the retry pattern it expects.
const DefaultMaxRetries = 2

// maxErrorSnippet bounds how much of a raw body or bad chunk ends up in an error message.
const maxErrorSnippet = 512

// ShouldRetry reports whether a failed HTTP response is worth retrying: 408, 409, 429 and 5xx
// are, unless the server's x-should-retry header says otherwise (it overrides both ways).
func ShouldRetry(status int, header http.Header) bool {
	switch strings.ToLower(strings.TrimSpace(header.Get("X-Should-Retry"))) {
	case "true":
		return true
	case "false":
		return false
	}
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// ErrorFromResponse turns a non-2xx response into the provider error the client reports. It reads
// the OpenAI envelope {"error":{"message","type","param","code"}} and the looser shapes other
// compatible servers send ({"error":"text"}, {"message":"text"}); any other body becomes the
// message as raw text, truncated. Retryable is ShouldRetry(status, header). The replay provider
// uses it too, so a recorded failure replays as exactly the error the live client produced.
func ErrorFromResponse(status int, header http.Header, body []byte) *model.Error {
	e := &model.Error{Status: status, Retryable: ShouldRetry(status, header)}
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &env) == nil {
		if fillFromEnvelope(e, env.Error) {
			return e
		}
		if env.Message != "" {
			e.Message = env.Message
			return e
		}
	}
	e.Message = snippet(bytes.TrimSpace(body))
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// fillFromEnvelope copies the value of an "error" key into e. It reports false when raw holds
// no error (absent or null), so chunks that carry "error": null are not mistaken for failures.
func fillFromEnvelope(e *model.Error, raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	var body struct {
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	switch {
	case raw[0] == '{' && json.Unmarshal(raw, &body) == nil:
		e.Message = scalarText(body.Message)
		e.Type = scalarText(body.Type)
		e.Code = scalarText(body.Code)
	case raw[0] == '"':
		e.Message = scalarText(raw)
	default:
		e.Message = snippet(raw)
	}
	if e.Message == "" {
		e.Message = "unspecified error"
	}
	return true
}

// scalarText renders a JSON scalar as text. Providers disagree on types here (OpenRouter sends
// numeric codes), and the error is still worth reporting whatever the type.
func scalarText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return snippet(raw)
}

// snippet truncates b for an error message without splitting a UTF-8 sequence.
func snippet(b []byte) string {
	if len(b) <= maxErrorSnippet {
		return string(b)
	}
	cut := maxErrorSnippet
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…(truncated)"
}

// maxRetryAfter caps a server-requested delay: a rate-limit reset an hour away should fail the
// call after a bounded wait rather than stall the agent.
const maxRetryAfter = 30 * time.Second

// retryAfter reads the delay a server asked for, from retry-after-ms or Retry-After (seconds or
// an HTTP date). ok is false when neither header holds a usable value.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return capDelay(time.Duration(ms * float64(time.Millisecond))), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return capDelay(time.Duration(s * float64(time.Second))), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return capDelay(max(t.Sub(now), 0)), true
	}
	return 0, false
}

func capDelay(d time.Duration) time.Duration {
	// A float overflow converts to a negative or huge duration; both mean "long".
	if d < 0 || d > maxRetryAfter {
		return maxRetryAfter
	}
	return d
}
