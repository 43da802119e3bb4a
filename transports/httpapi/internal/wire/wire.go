// Package wire is the OpenAI-compatible API's wire: its error object and the classification of
// engine errors into it, request decoding that names the offending field, and the identifier,
// header and cursor rules of every route. The HTTP server and its route packages (runsapi)
// share it, so every route fails the same way.
package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/ids"
	"github.com/hermes-go/hermes/engine/model"
)

// Error is an OpenAI error object with its HTTP status. Handlers return it (or any error)
// and the error handler writes the envelope, so every route fails the same way.
type Error struct {
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
	// Cause is what the client is not told (a store outage's own error): the error handler
	// logs it for the operator. Never sent.
	Cause error
}

func (e *Error) Error() string { return e.Message }

func BadRequest(param, code, msg string) *Error {
	return &Error{Status: fiber.StatusBadRequest, Message: msg, Type: "invalid_request_error", Param: param, Code: code}
}

// WithParam names the offending field of a 400 raised by a shared validator.
func WithParam(err error, param string) error {
	var ae *Error
	if errors.As(err, &ae) {
		cp := *ae
		cp.Param = param
		return &cp
	}
	return err
}

// Body is the four-key envelope; param and code are null when empty.
func Body(e *Error) fiber.Map {
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

// Classify maps an error from the engine (or a handler) to the status and envelope a client
// sees. It is the only place that decides this.
func Classify(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusRequestEntityTooLarge:
			return &Error{Status: fe.Code, Message: "request body too large (limit 10 MB)", Type: "invalid_request_error", Code: "body_too_large"}
		case fiber.StatusNotFound:
			return &Error{Status: fe.Code, Message: fe.Message, Type: "invalid_request_error", Code: "not_found"}
		case fiber.StatusMethodNotAllowed:
			return &Error{Status: fe.Code, Message: fe.Message, Type: "invalid_request_error", Code: "method_not_allowed"}
		}
		typ := "invalid_request_error"
		if fe.Code >= 500 {
			typ = "server_error"
		}
		// The HTTP parser's messages quote the raw request, credentials included: keep only
		// what went wrong.
		if msg, _, cut := strings.Cut(fe.Message, ": buffer size="); cut {
			return &Error{Status: fe.Code, Message: msg, Type: typ, Code: "malformed_request"}
		}
		return &Error{Status: fe.Code, Message: fe.Message, Type: typ}
	}
	msg := err.Error()
	switch {
	case errors.Is(err, engine.ErrSessionNotFound), errors.Is(err, engine.ErrNotFound):
		return &Error{Status: fiber.StatusNotFound, Message: msg, Type: "invalid_request_error", Code: "session_not_found"}
	case errors.Is(err, engine.ErrInvalidModel), errors.Is(err, model.ErrUnknownProvider):
		return &Error{Status: fiber.StatusNotFound, Message: msg, Type: "invalid_request_error", Param: "model", Code: "model_not_found"}
	case errors.Is(err, engine.ErrEmptyPrompt):
		return BadRequest("messages", "empty_prompt", msg)
	case errors.Is(err, engine.ErrBusy), errors.Is(err, engine.ErrSessionExists):
		return &Error{Status: fiber.StatusConflict, Message: msg, Type: "invalid_request_error", Code: "session_busy", NoRetry: true}
	case errors.Is(err, engine.ErrSessionClosed):
		return &Error{Status: fiber.StatusConflict, Message: msg, Type: "invalid_request_error", Code: "session_closed", NoRetry: true}
	case errors.Is(err, engine.ErrEngineClosed), errors.Is(err, context.Canceled):
		return &Error{Status: fiber.StatusServiceUnavailable, Message: "server shutting down", Type: "server_error", Code: "unavailable"}
	case errors.Is(err, engine.ErrStoreUnavailable):
		return StoreUnavailable(err)
	case errors.Is(err, engine.ErrSessionMoved), errors.Is(err, engine.ErrSessionLeaseLost):
		// Another process took the session over while this one served the request: sent
		// again, the request reaches it.
		return &Error{Status: fiber.StatusServiceUnavailable, Message: "the session moved to another process while this request was served; retry: " + msg,
			Type: "server_error", Code: "session_moved", RetryAfter: 1}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: fiber.StatusGatewayTimeout, Message: msg, Type: "server_error", Code: "timeout", NoRetry: true}
	}
	return &Error{Status: fiber.StatusInternalServerError, Message: "internal error", Type: "server_error", NoRetry: true}
}

// StoreRetryAfter is the Retry-After (seconds) of a 503 for a store that cannot be reached: a
// database restart or a store process's restart takes about that long.
const StoreRetryAfter = 2

// StoreUnavailable is the 503 of a request the store could not serve for now; the client may
// send it again after Retry-After. The message names no more than that: the store's own error
// (the database's address, its user and database names, a socket path) is for the operator
// (`/health/detailed` with the API key, `hermes doctor`, the node's log), not for every client.
func StoreUnavailable(cause error) *Error {
	return &Error{Cause: cause, Status: fiber.StatusServiceUnavailable, Message: "session store unavailable, retry: the session store cannot be reached for now",
		Type: "server_error", Code: "session_db_unavailable", RetryAfter: StoreRetryAfter}
}

// StoreOutage reports whether a turn failed because the store could not be reached (its
// database restarting): what it wrote is kept, and the client may ask again after
// Retry-After, so it is answered 503 like a request the store refused, never 502.
func StoreOutage(o engine.Outcome) bool {
	return o.Status == engine.StatusFailed && o.ExitReason == exitStore && strings.Contains(o.Error, engine.ErrStoreUnavailable.Error())
}

// exitStore is the engine's exit reason of a turn a store write ended; exitLease, of one its
// process stopped because another took the session's lease.
const (
	exitStore = "store_error"
	exitLease = "lease_lost"
)

// OutcomeError is the error object of a turn that did not complete.
func OutcomeError(o engine.Outcome) *Error {
	msg := o.Error
	code := "agent_error"
	if o.Status == engine.StatusCancelled || o.Interrupted {
		code = "interrupted"
		if msg == "" {
			msg = "the turn was interrupted (" + o.ExitReason + ")"
		}
	}
	if msg == "" {
		msg = "the agent did not complete the turn (" + o.ExitReason + ")"
	}
	if StoreOutage(o) {
		return StoreUnavailable(errors.New(msg))
	}
	if o.Status == engine.StatusFailed && o.ExitReason == exitLease {
		// Another process took the session over mid-turn: sent again, the request reaches it.
		return Classify(fmt.Errorf("%w: %s", engine.ErrSessionLeaseLost, msg))
	}
	return &Error{Status: 502, Message: msg, Type: "server_error", Code: code, NoRetry: true}
}

// Session header rules (values are also echoed, so they must be safe in a header and a key).
const MaxHeaderID = 256

func ValidSessionID(id string) error {
	if len(id) > MaxHeaderID {
		return BadRequest("X-Hermes-Session-Id", "invalid_session_id", "session id too long (max 256)")
	}
	if id == "." || strings.Contains(id, "..") || strings.ContainsAny(id, "/\\") || HasControl(id) {
		return BadRequest("X-Hermes-Session-Id", "invalid_session_id", "invalid session id")
	}
	return CheckID("X-Hermes-Session-Id", "invalid_session_id", "session id", id)
}

func ValidSessionKey(k string) error {
	if len(k) > MaxHeaderID {
		return BadRequest("X-Hermes-Session-Key", "invalid_session_key", "Session key too long")
	}
	if HasControl(k) || !utf8.ValidString(k) {
		return BadRequest("X-Hermes-Session-Key", "invalid_session_key", "Invalid session key")
	}
	return nil
}

func HasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// FlexBool accepts a JSON boolean and the strings "true"/"false"/"1"/"0"; anything else is a
// 400, never a guess.
type FlexBool bool

func (b *FlexBool) UnmarshalJSON(p []byte) error {
	switch string(p) {
	case "true", `"true"`, `"1"`:
		*b = true
	case "false", `"false"`, `"0"`, "null":
		*b = false
	default:
		// A type error: the decoder names the field, and DecodeJSON reports it like any other.
		return &json.UnmarshalTypeError{Value: jsonKind(p), Type: reflect.TypeFor[bool]()}
	}
	return nil
}

// jsonKind names the JSON type of the value p, as a client knows it.
func jsonKind(p []byte) string {
	p = bytes.TrimSpace(p)
	if len(p) == 0 {
		return "nothing"
	}
	switch p[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// jsonTypeName is the JSON type a Go type decodes from: what a client must send.
func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string" // []byte is base64 text
		}
		return "array"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "JSON value"
}

// DecodeJSON unmarshals the body, turning decoder errors into 400s that name the field.
func DecodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("", "invalid_json", "Invalid JSON in request body: empty body")
	}
	// JSON text on the wire is UTF-8 (RFC 8259 §8.1). The decoder would quietly turn a stray
	// byte into U+FFFD, so an id in a body would be stored as something other than what was sent.
	if !utf8.Valid(body) {
		return BadRequest("", "invalid_json", "Invalid JSON in request body: not valid UTF-8")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			got := te.Value
			if kind, _, _ := strings.Cut(got, " "); kind == "bool" { // "number -1" names the number
				got = "boolean"
			} else {
				got = kind
			}
			if te.Field == "" {
				return BadRequest("", "invalid_type", "Invalid request body: expected "+jsonTypeName(te.Type)+", got "+got)
			}
			return BadRequest(te.Field, "invalid_type", "Invalid type for '"+te.Field+"': expected "+jsonTypeName(te.Type)+", got "+got)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return BadRequest("", "invalid_json", "Invalid JSON in request body: "+err.Error())
		}
		return BadRequest("", "invalid_request", "Invalid request body: "+err.Error())
	}
	return nil
}

// CheckID applies the identifier rule of every edge (ids.Check) to a header or path value: a
// 400 naming the parameter, before anything is looked up or stored.
func CheckID(param, code, what, v string) error {
	if err := ids.Check(v); err != nil {
		reason := err.Error()
		var ie *ids.Error
		if errors.As(err, &ie) {
			reason = ie.Reason
		}
		return BadRequest(param, code, "invalid "+what+": "+reason)
	}
	return nil
}

// LastEventID reads the SSE resume cursor (Last-Event-ID, or ?last_event_id=). A value that is
// not an event number is a 400: read as "from the start" it would replay the whole stream to
// a client that asked for its tail.
func LastEventID(header, query string) (int, error) {
	v, param := header, "Last-Event-ID"
	if v == "" {
		v, param = query, "last_event_id"
	}
	if v == "" {
		return 0, nil
	}
	n, err := ids.CheckCursor(v)
	if err != nil {
		return 0, BadRequest(param, "invalid_last_event_id", "Last-Event-ID must be the decimal id of an event of this stream")
	}
	return n, nil
}

// QueryInt reads a non-negative integer query parameter.
func QueryInt(c *fiber.Ctx, name string, def int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, BadRequest(name, "invalid_value", "'"+name+"' must be a non-negative integer")
	}
	return n, nil
}

func NewHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// contextFields are a session's context use under the reference's names: the tokens of the
// last model call's context (its prompt plus answer, or the estimate of the next request when
// none was reported), the model's window, and the one as a percentage of the other.
func contextFields(ci engine.ContextInfo) map[string]any {
	return map[string]any{"context_used": ci.Used, "context_max": ci.Max, "context_percent": ci.Percent}
}

// AddContext puts the session's context use into a run result's usage.
func AddContext(res map[string]any, ci engine.ContextInfo) {
	if u, ok := res["usage"].(map[string]any); ok {
		maps.Copy(u, contextFields(ci))
	}
}

// CompactionEvent maps a turn's compaction status to the event the runs stream carries:
// run.compacting with the status text and the context that crossed the threshold, then
// run.compacted with the text (how many rows were summarised; the context left shows in the
// run's result); ok is false for any other event.
func CompactionEvent(ev engine.Event, sess *engine.Session) (name string, fields map[string]any, ok bool) {
	si, isStatus := ev.Data.(engine.StatusInfo)
	if !isStatus || ev.Type != engine.EvStatus || (si.Kind != "compacting" && si.Kind != "compacted") {
		return "", nil, false
	}
	fields = map[string]any{}
	if si.Kind == "compacting" {
		ci := sess.Context()
		if si.Context != nil { // the figures of that moment: the turn has moved on since
			ci = *si.Context
		}
		fields = contextFields(ci)
	}
	fields["text"] = si.Text
	return "run." + si.Kind, fields, true
}

// SSEHeaders prepares an event-stream response: no caching, no proxy buffering, no length.
func SSEHeaders(c *fiber.Ctx) {
	c.Set(fiber.HeaderContentType, "text/event-stream; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
}

// Frames buffers the writes of an event stream. After a failed write nothing more is written,
// and Flush reports the failure: the client left.
type Frames struct {
	W   *bufio.Writer
	err error
}

// Put writes parts in order.
func (f *Frames) Put(parts ...[]byte) {
	for _, p := range parts {
		if f.err == nil {
			_, f.err = f.W.Write(p)
		}
	}
}

// Flush sends what is buffered, or reports the first failure.
func (f *Frames) Flush() error {
	if f.err == nil {
		f.err = f.W.Flush()
	}
	return f.err
}

// NoClient is the reason requests opened by a turn of these routes are withdrawn with.
const NoClient = "no interactive client on the OpenAI-compatible API"

// Session headers: a request names its session (Id) or a key the session is found by (Key).
const (
	HeaderSessionID  = "X-Hermes-Session-Id"
	HeaderSessionKey = "X-Hermes-Session-Key"
)

// ValidIdempotencyKey checks an Idempotency-Key header: 1-255 visible ASCII characters.
func ValidIdempotencyKey(k string) error {
	if len(k) > 255 {
		return BadRequest("Idempotency-Key", "invalid_idempotency_key", "Idempotency-Key must be 1-255 visible ASCII characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= 0x20 || k[i] >= 0x7f {
			return BadRequest("Idempotency-Key", "invalid_idempotency_key", "Idempotency-Key must be 1-255 visible ASCII characters")
		}
	}
	return nil
}
