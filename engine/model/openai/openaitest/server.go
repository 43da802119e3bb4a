// Package openaitest is an in-process fake OpenAI Chat Completions server for tests. It listens on
// 127.0.0.1, plays scripted responses in order, and emits exactly the canonical streaming sequence
// (role only in the first delta, usage chunk with "choices":[] when include_usage is set, then
// "data: [DONE]"), flushing after every chunk. Faults (HTTP errors, malformed chunks, cut
// connections, in-band errors) and the quirks of other compatible servers (tool calls without
// index, whole calls in one delta) are scriptable, and a Gate holds a stream open so tests can
// cancel mid-call without sleeping.
package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
)

// Style selects how tool-call deltas are shaped on the wire.
type Style int

const (
	// StyleIndexed is OpenAI's shape: the first delta of a call carries index, id, type and
	// name; later deltas only index and an arguments fragment. Calls follow one another.
	StyleIndexed Style = iota
	// StyleInterleaved is StyleIndexed with the deltas of parallel calls taken in turn.
	StyleInterleaved
	// StyleNoIndex omits "index" from every tool-call delta, as Gemini's endpoint and older
	// Ollama do. Calls follow one another, which is the only way such a stream is readable.
	StyleNoIndex
	// StyleOneShot sends each call whole (id, name and all arguments) in one delta without
	// an index, as Ollama does.
	StyleOneShot
)

// Fault is a failure injected into a streaming response after FaultAt chunks.
type Fault int

const (
	FaultNone Fault = iota
	// FaultMalformed sends an event whose data is cut-off JSON, then the rest of the stream.
	FaultMalformed
	// FaultDisconnect cuts the connection: no terminating chunk, no [DONE].
	FaultDisconnect
	// FaultEOF ends the body cleanly but without [DONE].
	FaultEOF
	// FaultInBandError sends data: {"error":{…}} built from Response.Error and ends the body.
	FaultInBandError
)

// APIError is the body of an OpenAI error envelope.
type APIError struct {
	Message string
	Type    string
	Code    string // "" is sent as null
	Param   string // "" is sent as null
}

// Call is one scripted tool call. Args are the argument fragments as streamed.
type Call struct {
	ID   string // "" means a generated call_<n>
	Name string
	Args []string
}

// Response is one scripted answer to one request.
type Response struct {
	// Status other than 0 and 200 answers with that status and an error body instead of a
	// stream: RawBody when set, else the envelope of Error.
	Status  int
	Error   APIError
	RawBody string
	// Header is added to the response, e.g. Retry-After or x-should-retry.
	Header http.Header

	Reasoning []string // streamed first, one delta per fragment
	// ReasoningKey names the delta field carrying reasoning: reasoning_content (default),
	// reasoning or thinking.
	ReasoningKey string
	Text         []string // content fragments, one delta each
	Calls        []Call
	Style        Style
	// FinishReason defaults to "tool_calls" when Calls is set, else "stop".
	FinishReason string
	// Usage is sent when the request asked for include_usage; nil means DefaultUsage().
	Usage *model.Usage

	// FaultAt is the number of chunks (data events, the first role chunk included) written
	// before Gate is waited on and Fault is injected. Past the end means just before [DONE].
	FaultAt int
	Fault   Fault
	Gate    *Gate
}

// Text is a response streaming the given content fragments.
func Text(fragments ...string) Response { return Response{Text: fragments} }

// ToolCalls is a response calling the given tools, in StyleIndexed.
func ToolCalls(calls ...Call) Response { return Response{Calls: calls} }

// HTTPError is a failed response with the given status and envelope.
func HTTPError(status int, e APIError) Response { return Response{Status: status, Error: e} }

// DefaultUsage is the usage reported when a Response sets none.
func DefaultUsage() model.Usage {
	return model.Usage{PromptTokens: 12, CompletionTokens: 7, TotalTokens: 19}
}

// Gate holds a stream at Response.FaultAt until released, so a test can act while the client
// is blocked reading without guessing how long to sleep.
type Gate struct {
	reached, release         chan struct{}
	reachedOnce, releaseOnce sync.Once
}

// NewGate returns a gate that holds streams until Release.
func NewGate() *Gate {
	return &Gate{reached: make(chan struct{}), release: make(chan struct{})}
}

// Reached is closed once a stream arrives at the gate (its earlier chunks are flushed).
func (g *Gate) Reached() <-chan struct{} { return g.reached }

// Release lets the held stream continue. It is safe to call more than once.
func (g *Gate) Release() { g.releaseOnce.Do(func() { close(g.release) }) }

// Request is one request as received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the server require "Authorization: Bearer <key>", answering 401 with the
// invalid_api_key envelope otherwise, as OpenAI does.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithModels makes the server list these model ids on GET /v1/models (OpenAI's list shape),
// behind the same key check as completions. Without it that path is unknown (404), as on
// servers that do not list their models.
func WithModels(ids ...string) Option { return func(s *Server) { s.models = ids } }

// WithContextWindow makes the server a model with a context window of tokens: it counts a
// request's prompt as RequestTokens of its body, refuses one over the window with OpenAI's
// context_length_exceeded error (HTTP 400, the envelope and message OpenAI sends), and reports
// that count as the prompt tokens of a response that sets no Usage.
func WithContextWindow(tokens int) Option { return func(s *Server) { s.window = tokens } }

// WithResponder answers requests with f once the scripted queue is empty, so a test can run a
// session of any length (f sees the request as received).
func WithResponder(f func(Request) Response) Option { return func(s *Server) { s.responder = f } }

// RequestTokens is the fake's tokenizer: a quarter of the request body's bytes, rounded up.
func RequestTokens(body []byte) int { return (len(body) + 3) / 4 }

// Server is the fake endpoint. It is safe for concurrent use.
type Server struct {
	srv       *httptest.Server
	apiKey    string
	models    []string
	window    int
	responder func(Request) Response
	closed    chan struct{}
	once      sync.Once

	mu       sync.Mutex
	queue    []Response
	requests []Request
	served   int
}

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

// URL is the API base URL, ending in /v1, to put in a client's configuration.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Enqueue appends scripted responses; each request consumes the next one.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// Requests returns every request received so far, including rejected ones, in arrival order.
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
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return
	}
	received := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests = append(s.requests, received)
	s.mu.Unlock()

	if s.models != nil && r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		s.listModels(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, nil, APIError{
			Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path),
			Type:    "invalid_request_error", Code: "unknown_url",
		})
		return
	}
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, http.StatusUnauthorized, nil, APIError{
			Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key",
		})
		return
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, nil, APIError{
			Message: "We could not parse the JSON body of your request: " + err.Error(), Type: "invalid_request_error",
		})
		return
	}
	if !req.Stream {
		writeError(w, http.StatusBadRequest, nil, APIError{
			Message: "openaitest serves streaming requests only (stream: true)", Type: "invalid_request_error", Param: "stream",
		})
		return
	}

	prompt := RequestTokens(body)
	if s.window > 0 && prompt > s.window {
		writeError(w, http.StatusBadRequest, nil, APIError{
			Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", s.window, prompt),
			Type:    "invalid_request_error", Param: "messages", Code: "context_length_exceeded",
		})
		return
	}
	s.mu.Lock()
	if len(s.queue) == 0 && s.responder != nil {
		s.served++
		n := s.served
		s.mu.Unlock()
		s.answer(w, r, s.responder(received), n, req.Model, req.StreamOptions.IncludeUsage, prompt)
		return
	}
	if len(s.queue) == 0 {
		s.mu.Unlock()
		// x-should-retry: false so a client does not hammer an exhausted script.
		writeError(w, http.StatusInternalServerError, http.Header{"X-Should-Retry": {"false"}}, APIError{
			Message: "openaitest: no scripted response left", Type: "server_error",
		})
		return
	}
	resp := s.queue[0]
	s.queue = s.queue[1:]
	s.served++
	n := s.served
	s.mu.Unlock()
	s.answer(w, r, resp, n, req.Model, req.StreamOptions.IncludeUsage, prompt)
}

// listModels answers GET /v1/models.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, http.StatusUnauthorized, nil, APIError{
			Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key",
		})
		return
	}
	data := make([]obj, len(s.models))
	for i, id := range s.models {
		data[i] = obj{{"id", id}, {"object", "model"}, {"created", 1700000000}, {"owned_by", "openaitest"}}
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(obj{{"object", "list"}, {"data", data}})
	w.Write(b)
}

// answer sends resp as the n-th served response to a request of prompt tokens.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, resp Response, n int, modelName string, includeUsage bool, prompt int) {
	if resp.Status != 0 && resp.Status != http.StatusOK {
		if resp.RawBody != "" {
			copyHeader(w.Header(), resp.Header)
			if w.Header().Get("Content-Type") == "" {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			}
			w.WriteHeader(resp.Status)
			_, _ = io.WriteString(w, resp.RawBody)
			return
		}
		writeError(w, resp.Status, resp.Header, resp.Error)
		return
	}
	if resp.Usage == nil && s.window > 0 {
		u := DefaultUsage()
		u.PromptTokens, u.TotalTokens = prompt, prompt+u.CompletionTokens
		resp.Usage = &u
	}
	s.stream(w, r, resp, script{id: fmt.Sprintf("chatcmpl-%d", n), created: 1700000000 + int64(n), model: modelName, includeUsage: includeUsage})
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, resp Response, sc script) {
	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	copyHeader(h, resp.Header)
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()

	events := sc.events(resp)
	at := min(max(resp.FaultAt, 0), len(events))
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
			case FaultMalformed:
				fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut\n\n", sc.id)
				flush()
			case FaultDisconnect:
				flush()
				// The server closes the connection without ending the chunked body, which
				// the client sees as an unexpected EOF; net/http does not log this panic.
				panic(http.ErrAbortHandler)
			case FaultEOF:
				return
			case FaultInBandError:
				e := resp.Error
				if e.Message == "" {
					e = APIError{Message: "The server had an error while processing your request.", Type: "server_error"}
				}
				writeEvent(w, obj{{"error", e.envelope()}})
				flush()
				return
			}
		}
		if i < len(events) {
			writeEvent(w, events[i])
			flush()
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	flush()
}

// script builds the chunk sequence for one response.
type script struct {
	id           string
	created      int64
	model        string
	includeUsage bool
}

func (sc script) chunk(delta obj, finish string) obj {
	c := obj{{"id", sc.id}, {"object", "chat.completion.chunk"}, {"created", sc.created}, {"model", sc.model}}
	if sc.includeUsage {
		c = append(c, kv{"usage", nil})
	}
	var fr any
	if finish != "" {
		fr = finish
	}
	if delta == nil {
		delta = obj{}
	}
	return append(c, kv{"choices", []obj{{{"index", 0}, {"delta", delta}, {"logprobs", nil}, {"finish_reason", fr}}}})
}

func (sc script) events(resp Response) []obj {
	var deltas []obj
	key := resp.ReasoningKey
	if key == "" {
		key = "reasoning_content"
	}
	for _, f := range resp.Reasoning {
		deltas = append(deltas, obj{{key, f}})
	}
	for _, f := range resp.Text {
		deltas = append(deltas, obj{{"content", f}})
	}
	calls := toolCallDeltas(resp.Calls, resp.Style)
	// Role goes in the first delta only: a standalone one before text, or merged into the
	// first tool-call delta when the answer is only calls (the canonical sequence).
	if len(deltas) == 0 && len(calls) > 0 {
		calls[0] = append(obj{{"role", "assistant"}, {"content", nil}}, calls[0]...)
	} else {
		deltas = append([]obj{{{"role", "assistant"}, {"content", ""}}}, deltas...)
	}
	deltas = append(deltas, calls...)

	events := make([]obj, 0, len(deltas)+2)
	for _, d := range deltas {
		events = append(events, sc.chunk(d, ""))
	}
	finish := resp.FinishReason
	if finish == "" {
		finish = "stop"
		if len(resp.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	events = append(events, sc.chunk(obj{}, finish))
	if sc.includeUsage {
		u := DefaultUsage()
		if resp.Usage != nil {
			u = *resp.Usage
		}
		wu := obj{{"prompt_tokens", u.PromptTokens}, {"completion_tokens", u.CompletionTokens}, {"total_tokens", u.TotalTokens}}
		if u.CachedTokens != 0 {
			wu = append(wu, kv{"prompt_tokens_details", obj{{"cached_tokens", u.CachedTokens}}})
		}
		if u.ReasoningTokens != 0 {
			wu = append(wu, kv{"completion_tokens_details", obj{{"reasoning_tokens", u.ReasoningTokens}}})
		}
		events = append(events, obj{{"id", sc.id}, {"object", "chat.completion.chunk"}, {"created", sc.created}, {"model", sc.model}, {"choices", []obj{}}, {"usage", wu}})
	}
	return events
}

// toolCallDeltas returns one delta per wire chunk for the calls in the given style.
func toolCallDeltas(calls []Call, style Style) []obj {
	perCall := make([][]obj, len(calls))
	for i, c := range calls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i+1)
		}
		withIndex := func(o obj) obj {
			if style == StyleNoIndex || style == StyleOneShot {
				return o
			}
			return append(obj{{"index", i}}, o...)
		}
		if style == StyleOneShot {
			item := withIndex(obj{{"id", id}, {"type", "function"}, {"function", obj{{"name", c.Name}, {"arguments", strings.Join(c.Args, "")}}}})
			perCall[i] = []obj{{{"tool_calls", []obj{item}}}}
			continue
		}
		first := withIndex(obj{{"id", id}, {"type", "function"}, {"function", obj{{"name", c.Name}, {"arguments", ""}}}})
		ds := []obj{{{"tool_calls", []obj{first}}}}
		for _, a := range c.Args {
			ds = append(ds, obj{{"tool_calls", []obj{withIndex(obj{{"function", obj{{"arguments", a}}}})}}})
		}
		perCall[i] = ds
	}
	var out []obj
	if style != StyleInterleaved {
		for _, ds := range perCall {
			out = append(out, ds...)
		}
		return out
	}
	for round := 0; ; round++ {
		more := false
		for _, ds := range perCall {
			if round < len(ds) {
				out = append(out, ds[round])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

func (e APIError) envelope() obj {
	var code, param any
	if e.Code != "" {
		code = e.Code
	}
	if e.Param != "" {
		param = e.Param
	}
	return obj{{"message", e.Message}, {"type", e.Type}, {"param", param}, {"code", code}}
}

func writeError(w http.ResponseWriter, status int, extra http.Header, e APIError) {
	copyHeader(w.Header(), extra)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(obj{{"error", e.envelope()}})
	_, _ = w.Write(append(b, '\n'))
}

func writeEvent(w io.Writer, o obj) {
	b, err := json.Marshal(o)
	if err != nil {
		panic(fmt.Sprintf("openaitest: encoding chunk: %v", err)) // only our own literals get here
	}
	_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
}

// obj is a JSON object that keeps its key order, so the wire reads like OpenAI's and recorded
// cassettes diff cleanly.
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
