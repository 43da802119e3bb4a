// Package anthropictest is an in-process fake Anthropic Messages API for tests. It listens on
// 127.0.0.1, plays scripted responses in order, and streams the documented event sequence:
// message_start, ping, then for each content block content_block_start, its deltas
// (thinking_delta and signature_delta, text_delta, input_json_delta) and content_block_stop,
// then message_delta with the stop reason and output usage, and message_stop; every event is
// flushed as it is written. HTTP errors use Anthropic's envelope ({"type":"error","error":
// {"type","message"},"request_id"}), and faults (an in-band error event such as
// overloaded_error, a cut connection, a body that ends early) are injected after a given number
// of events. A Gate holds a stream open so tests can act mid-call without sleeping.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Fault is a failure injected into a streaming response after FaultAt events.
type Fault int

const (
	FaultNone Fault = iota
	// FaultError sends an "event: error" built from Response.Error (overloaded_error by
	// default) and ends the body, as the API does when it fails mid-stream.
	FaultError
	// FaultDisconnect cuts the connection without ending the chunked body.
	FaultDisconnect
	// FaultEOF ends the body cleanly but without message_stop.
	FaultEOF
)

// APIError is the body of an Anthropic error envelope.
type APIError struct {
	Type    string // e.g. rate_limit_error, overloaded_error, invalid_request_error
	Message string
}

// Call is one scripted tool_use block; Args are the input_json_delta fragments.
type Call struct {
	ID   string // "" means a generated toolu_<n>
	Name string
	Args []string
}

// Usage is the usage a response reports: input and cache figures in message_start, output in
// message_delta.
type Usage struct {
	Input, Output, CacheRead, CacheWrite int
}

// Response is one scripted answer.
type Response struct {
	// Status other than 0 and 200 answers with that status and the envelope of Error.
	Status int
	Error  APIError
	Header http.Header

	Thinking  []string // thinking_delta fragments of one thinking block, streamed first
	Signature string   // its signature_delta; "" means a generated one
	// Redacted, when set, adds a redacted_thinking block with this data after the thinking.
	Redacted   string
	Text       []string // text_delta fragments of one text block
	Calls      []Call   // one tool_use block each, after the text
	StopReason string   // default "tool_use" with calls, else "end_turn"
	Usage      *Usage   // nil means DefaultUsage()

	FaultAt int // events written (message_start counts) before Gate and Fault
	Fault   Fault
	Gate    *Gate
}

// Text is a response streaming one text block in the given fragments.
func Text(fragments ...string) Response { return Response{Text: fragments} }

// ToolUse is a response calling the given tools.
func ToolUse(calls ...Call) Response { return Response{Calls: calls} }

// HTTPError is a failed response.
func HTTPError(status int, typ, message string) Response {
	return Response{Status: status, Error: APIError{Type: typ, Message: message}}
}

// DefaultUsage is the usage reported when a Response sets none.
func DefaultUsage() Usage { return Usage{Input: 21, Output: 9} }

// Gate holds a stream at Response.FaultAt until released.
type Gate struct {
	reached, release         chan struct{}
	reachedOnce, releaseOnce sync.Once
}

// NewGate returns a gate that holds streams until Release.
func NewGate() *Gate { return &Gate{reached: make(chan struct{}), release: make(chan struct{})} }

// Reached is closed once a stream arrives at the gate.
func (g *Gate) Reached() <-chan struct{} { return g.reached }

// Release lets the held stream continue; it is safe to call more than once.
func (g *Gate) Release() { g.releaseOnce.Do(func() { close(g.release) }) }

// Request is one request as received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Server is the fake endpoint. It is safe for concurrent use.
type Server struct {
	srv    *httptest.Server
	apiKey string
	models []string
	closed chan struct{}
	once   sync.Once

	mu       sync.Mutex
	queue    []Response
	requests []Request
	served   int
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the server require the key, as "x-api-key: <key>" or as
// "Authorization: Bearer <key>" (what the v2 SDK sends), answering 401 authentication_error
// otherwise.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithModels makes the server list these model ids on GET /v1/models (the Models API's
// shape, one page), behind the same key and anthropic-version checks as messages. Without it
// that path is not found (404).
func WithModels(ids ...string) Option { return func(s *Server) { s.models = ids } }

// New starts a server on 127.0.0.1 and closes it when the test ends.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{closed: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// URL is the base URL to configure a client with (the API paths start with /v1).
func (s *Server) URL() string { return s.srv.URL }

// Enqueue appends scripted responses; each request consumes the next one.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Pending is the number of scripted responses not yet consumed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Close releases held streams and shuts the server down. It is safe to call more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.srv.Close()
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()

	if s.models != nil && r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		s.listModels(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		writeError(w, http.StatusNotFound, nil, APIError{Type: "not_found_error", Message: "Not found"})
		return
	}
	if s.apiKey != "" && r.Header.Get("X-Api-Key") != s.apiKey && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, http.StatusUnauthorized, nil, APIError{Type: "authentication_error", Message: "invalid x-api-key"})
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		writeError(w, http.StatusBadRequest, nil, APIError{Type: "invalid_request_error", Message: "anthropic-version: header is required"})
		return
	}
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, nil, APIError{Type: "invalid_request_error", Message: "invalid JSON body: " + err.Error()})
		return
	}
	if req.MaxTokens <= 0 {
		writeError(w, http.StatusBadRequest, nil, APIError{Type: "invalid_request_error", Message: "max_tokens: Field required"})
		return
	}
	if !req.Stream {
		writeError(w, http.StatusBadRequest, nil, APIError{Type: "invalid_request_error", Message: "anthropictest serves streaming requests only (stream: true)"})
		return
	}
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.mu.Unlock()
		writeError(w, http.StatusInternalServerError, http.Header{"X-Should-Retry": {"false"}}, APIError{Type: "api_error", Message: "anthropictest: no scripted response left"})
		return
	}
	resp := s.queue[0]
	s.queue = s.queue[1:]
	s.served++
	n := s.served
	s.mu.Unlock()

	if resp.Status != 0 && resp.Status != http.StatusOK {
		writeError(w, resp.Status, resp.Header, resp.Error)
		return
	}
	s.stream(w, r, resp, n, req.Model)
}

// listModels answers GET /v1/models.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	if s.apiKey != "" && r.Header.Get("X-Api-Key") != s.apiKey && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, http.StatusUnauthorized, nil, APIError{Type: "authentication_error", Message: "invalid x-api-key"})
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		writeError(w, http.StatusBadRequest, nil, APIError{Type: "invalid_request_error", Message: "anthropic-version: header is required"})
		return
	}
	data := make([]obj, len(s.models))
	for i, id := range s.models {
		data[i] = obj{{"type", "model"}, {"id", id}, {"display_name", id}, {"created_at", "2025-01-01T00:00:00Z"}}
	}
	page := obj{{"data", data}, {"has_more", false}, {"first_id", nil}, {"last_id", nil}}
	if len(s.models) > 0 {
		page = obj{{"data", data}, {"has_more", false}, {"first_id", s.models[0]}, {"last_id", s.models[len(s.models)-1]}}
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(page)
	w.Write(b)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, resp Response, n int, model string) {
	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Request-Id", fmt.Sprintf("req_%04d", n))
	copyHeader(h, resp.Header)
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	events := script(resp, n, model)
	at := min(max(resp.FaultAt, 0), len(events))
	if resp.Fault == FaultNone && resp.Gate == nil {
		at = len(events) + 1 // never
	}
	for i := 0; i <= len(events); i++ {
		if i == at {
			if g := resp.Gate; g != nil {
				g.reachedOnce.Do(func() { close(g.reached) })
				select {
				case <-g.release:
				case <-r.Context().Done():
					return
				case <-s.closed:
					return
				}
			}
			switch resp.Fault {
			case FaultError:
				e := resp.Error
				if e.Type == "" {
					e = APIError{Type: "overloaded_error", Message: "Overloaded"}
				}
				writeEvent(w, event{"error", obj{{"type", "error"}, {"error", obj{{"type", e.Type}, {"message", e.Message}}}}})
				flush()
				return
			case FaultDisconnect:
				flush()
				panic(http.ErrAbortHandler)
			case FaultEOF:
				return
			}
		}
		if i < len(events) {
			writeEvent(w, events[i])
			flush()
		}
	}
}

type event struct {
	name string
	data obj
}

// script builds the event sequence of one response.
func script(resp Response, n int, model string) []event {
	u := DefaultUsage()
	if resp.Usage != nil {
		u = *resp.Usage
	}
	msg := obj{
		{"id", fmt.Sprintf("msg_%04d", n)}, {"type", "message"}, {"role", "assistant"}, {"model", model},
		{"content", []any{}}, {"stop_reason", nil}, {"stop_sequence", nil},
		{"usage", obj{{"input_tokens", u.Input}, {"cache_creation_input_tokens", u.CacheWrite}, {"cache_read_input_tokens", u.CacheRead}, {"output_tokens", 1}}},
	}
	evs := []event{{"message_start", obj{{"type", "message_start"}, {"message", msg}}}, {"ping", obj{{"type", "ping"}}}}
	index := 0
	block := func(start obj, deltas []obj) {
		evs = append(evs, event{"content_block_start", obj{{"type", "content_block_start"}, {"index", index}, {"content_block", start}}})
		for _, d := range deltas {
			evs = append(evs, event{"content_block_delta", obj{{"type", "content_block_delta"}, {"index", index}, {"delta", d}}})
		}
		evs = append(evs, event{"content_block_stop", obj{{"type", "content_block_stop"}, {"index", index}}})
		index++
	}
	if len(resp.Thinking) > 0 {
		var ds []obj
		for _, f := range resp.Thinking {
			ds = append(ds, obj{{"type", "thinking_delta"}, {"thinking", f}})
		}
		sig := resp.Signature
		if sig == "" {
			sig = fmt.Sprintf("sig-%04d", n)
		}
		ds = append(ds, obj{{"type", "signature_delta"}, {"signature", sig}})
		block(obj{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, ds)
	}
	if resp.Redacted != "" {
		block(obj{{"type", "redacted_thinking"}, {"data", resp.Redacted}}, nil)
	}
	if len(resp.Text) > 0 {
		var ds []obj
		for _, f := range resp.Text {
			ds = append(ds, obj{{"type", "text_delta"}, {"text", f}})
		}
		block(obj{{"type", "text"}, {"text", ""}}, ds)
	}
	for i, c := range resp.Calls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("toolu_%04d_%d", n, i+1)
		}
		ds := []obj{{{"type", "input_json_delta"}, {"partial_json", ""}}}
		for _, a := range c.Args {
			ds = append(ds, obj{{"type", "input_json_delta"}, {"partial_json", a}})
		}
		block(obj{{"type", "tool_use"}, {"id", id}, {"name", c.Name}, {"input", obj{}}}, ds)
	}
	stop := resp.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(resp.Calls) > 0 {
			stop = "tool_use"
		}
	}
	evs = append(evs,
		event{"message_delta", obj{{"type", "message_delta"}, {"delta", obj{{"stop_reason", stop}, {"stop_sequence", nil}}}, {"usage", obj{{"output_tokens", u.Output}}}}},
		event{"message_stop", obj{{"type", "message_stop"}}},
	)
	return evs
}

func writeError(w http.ResponseWriter, status int, extra http.Header, e APIError) {
	copyHeader(w.Header(), extra)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_error")
	w.WriteHeader(status)
	b, _ := json.Marshal(obj{{"type", "error"}, {"error", obj{{"type", e.Type}, {"message", e.Message}}}, {"request_id", "req_error"}})
	_, _ = w.Write(b)
}

func writeEvent(w io.Writer, e event) {
	b, err := json.Marshal(e.data)
	if err != nil {
		panic(fmt.Sprintf("anthropictest: encoding event: %v", err)) // only our own literals get here
	}
	_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, b)
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
}

// obj is a JSON object that keeps its key order, so the wire reads like the API's.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(f.k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}
