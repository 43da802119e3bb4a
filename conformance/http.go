package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// httpDriver runs `hermes serve` and speaks plain HTTP to it: the OpenAI-compatible API and
// the runs API.
//
// A client frame is a request, {"method", "path", "headers", "body"} (or "raw_body" for bytes
// that need not be JSON); the driver adds the bearer token unless headers names
// Authorization itself ("" sends none). Each request gets one frame back, {"status",
// "headers", "body"}, with only the headers that are contract pinned: content-type, the
// X-Hermes-* session headers, Idempotency-Replayed and Retry-After. When the response is an
// event stream, every event that follows is a frame of its own, {"event", "id", "data"}, read
// only when a step asks (until), so a request sent meanwhile always has its response first.
// One event stream is read at a time: a newer stream replaces the older on that connection.
type httpDriver struct{}

func (httpDriver) Name() string     { return "http" }
func (httpDriver) Dialect() Dialect { return httpDialect{} }
func (httpDriver) Start(env Env) (Server, error) {
	p, err := startServe(env)
	if err != nil {
		return nil, err
	}
	return &httpServer{proc: p, base: "http://" + p.addr, key: serveKey}, nil
}

// HTTPTarget is a server someone else runs (hermes conformance --target http://…), reached
// with the API key key.
func HTTPTarget(base, key string) Server {
	return &httpServer{base: strings.TrimSuffix(base, "/"), key: key}
}

type httpServer struct {
	proc *serveProc // nil for a server someone else runs
	base string
	key  string
}

func (s *httpServer) Connect() (Conn, error) {
	return &httpConn{base: s.base, key: s.key, client: &http.Client{}}, nil
}

func (s *httpServer) Close() error {
	if s.proc != nil {
		s.proc.stop()
	}
	return nil
}

// httpRequest is a client frame of the http transport.
type httpRequest struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
	RawBody *string           `json:"raw_body,omitempty"`
}

// pinnedHeader reports whether a response header is part of the recorded contract.
func pinnedHeader(name string) bool {
	switch name = strings.ToLower(name); {
	case name == "content-type", name == "idempotency-replayed", name == "retry-after":
		return true
	case strings.HasPrefix(name, "x-hermes-"):
		return true
	}
	return false
}

// ErrStreamEnded means a step waited for an event on a stream the server closed.
var ErrStreamEnded = errors.New("the event stream ended")

// errNothingPending means a step waited for a frame that nothing will send.
var errNothingPending = errors.New("no response is due and no event stream is open")

// requestTimeout bounds one request that is not an event stream.
const requestTimeout = 60 * time.Second

// httpConn is one HTTP client. Send performs the request and queues its response frame;
// Recv hands out queued responses first, then the events of the open stream.
type httpConn struct {
	base, key string
	client    *http.Client

	replies [][]byte
	stream  *sseStream
}

func (c *httpConn) Send(frame []byte) error {
	var r httpRequest
	if err := json.Unmarshal(frame, &r); err != nil {
		return fmt.Errorf("http frame: %w", err)
	}
	if r.Method == "" || !strings.HasPrefix(r.Path, "/") {
		return errors.New(`http frame: needs "method" and a "path" starting with /`)
	}
	var body io.Reader
	switch {
	case r.RawBody != nil:
		body = strings.NewReader(*r.RawBody)
	case len(r.Body) > 0:
		body = bytes.NewReader(r.Body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, r.Method, c.base+r.Path, body)
	if err != nil {
		cancel()
		return fmt.Errorf("http frame: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if _, own := r.Headers["Authorization"]; !own {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for k, v := range r.Headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	timer := time.AfterFunc(requestTimeout, cancel)
	resp, err := c.client.Do(req)
	if err != nil {
		timer.Stop()
		cancel()
		return fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	out := map[string]any{"status": resp.StatusCode}
	headers := map[string]string{}
	for k := range resp.Header {
		if pinnedHeader(k) {
			headers[strings.ToLower(k)] = resp.Header.Get(k)
		}
	}
	if len(headers) > 0 {
		out["headers"] = headers
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		timer.Stop() // a stream lives until the server ends it or the connection closes
		c.closeStream()
		c.stream = openStream(resp.Body, cancel)
	} else {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		timer.Stop()
		cancel()
		if err != nil {
			return fmt.Errorf("%s %s: reading the body: %w", r.Method, r.Path, err)
		}
		if len(b) > 0 {
			out["body"] = jsonOrString(b)
		}
	}
	b, _ := json.Marshal(out)
	c.replies = append(c.replies, b)
	return nil
}

func (c *httpConn) Recv(ctx context.Context) ([]byte, error) {
	if len(c.replies) > 0 {
		f := c.replies[0]
		c.replies = c.replies[1:]
		return f, nil
	}
	if c.stream == nil {
		return nil, errNothingPending
	}
	select {
	case f, ok := <-c.stream.frames:
		if !ok {
			if c.stream.err != nil {
				return nil, fmt.Errorf("%w: %w", ErrStreamEnded, c.stream.err)
			}
			return nil, ErrStreamEnded
		}
		return f, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *httpConn) Close() error {
	c.closeStream()
	c.client.CloseIdleConnections()
	return nil
}

func (c *httpConn) closeStream() {
	if c.stream != nil {
		c.stream.close()
		c.stream = nil
	}
}

// sseStream reads one event stream into frames on its own goroutine.
type sseStream struct {
	frames chan []byte // closed when the stream ends
	err    error       // why it ended, when not cleanly; set before frames closes
	stop   chan struct{}
	cancel context.CancelFunc
	body   io.Closer
	reader sync.WaitGroup
}

func openStream(body io.ReadCloser, cancel context.CancelFunc) *sseStream {
	s := &sseStream{frames: make(chan []byte), stop: make(chan struct{}), cancel: cancel, body: body}
	s.reader.Go(func() {
		defer close(s.frames)
		err := readSSE(body, func(ev sseEvent) bool {
			select {
			case s.frames <- ev.frame():
				return true
			case <-s.stop:
				return false
			}
		})
		select {
		case <-s.stop: // closed by us: not an error
		default:
			s.err = err
		}
	})
	return s
}

// close ends the stream and waits for its reader.
func (s *sseStream) close() {
	close(s.stop)
	s.cancel()
	s.body.Close()
	s.reader.Wait()
}

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	Event string
	ID    string
	Data  string
}

func (e sseEvent) frame() []byte {
	m := map[string]any{"data": jsonOrString([]byte(e.Data))}
	if e.Event != "" {
		m["event"] = e.Event
	}
	if e.ID != "" {
		m["id"] = e.ID
	}
	b, _ := json.Marshal(m)
	return b
}

// readSSE parses the text/event-stream format (comments and retry lines are skipped; data
// lines join with "\n"; a blank line dispatches an event that has data) and calls emit for
// each event until emit returns false or the input ends. A clean end returns nil.
func readSSE(r io.Reader, emit func(sseEvent) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev sseEvent
	var data []string
	hasData := false
	for {
		line, err := br.ReadString('\n')
		if err != nil && (line == "" || err != io.EOF) {
			if err == io.EOF {
				return nil
			}
			return err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if hasData {
				ev.Data = strings.Join(data, "\n")
				if !emit(ev) {
					return nil
				}
			}
			ev, data, hasData = sseEvent{}, nil, false
		} else if !strings.HasPrefix(line, ":") {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.Event = value
			case "data":
				data, hasData = append(data, value), true
			case "id":
				if !strings.Contains(value, "\x00") {
					ev.ID = value
				}
			}
		}
		if err == io.EOF {
			return nil // an event without its blank line is dropped, as the format says
		}
	}
}

// jsonOrString decodes b as JSON when it is, else keeps it as a string.
func jsonOrString(b []byte) any {
	var v any
	if err := json.Unmarshal(b, &v); err == nil {
		return v
	}
	return string(b)
}

// httpDialect reads http frames: a frame with a status is the response to the request just
// sent (a failure from 400 up); events are named by the SSE event field, else by the
// data's "event", "type" or "object" field, else by the data itself (so "[DONE]" names the
// end of a chat stream).
type httpDialect struct{}

func (httpDialect) Reply([]byte) func(map[string]any) (bool, bool) {
	return func(m map[string]any) (bool, bool) {
		st, ok := m["status"].(float64)
		return ok, ok && st >= 400
	}
}

func (httpDialect) ReplyTo(json.RawMessage) func(map[string]any) bool { return nil }

func (d httpDialect) Until(m map[string]any, name string) bool { return d.Event(m) == name }

func (httpDialect) Event(m map[string]any) string {
	if _, ok := m["status"]; ok {
		return ""
	}
	if ev, _ := m["event"].(string); ev != "" {
		return ev
	}
	switch data := m["data"].(type) {
	case map[string]any:
		for _, k := range []string{"event", "type", "object"} {
			if s, _ := data[k].(string); s != "" {
				return s
			}
		}
	case string:
		return data
	}
	return "message"
}

func (httpDialect) ServerRequest(map[string]any) (any, bool) { return nil, false }

func (httpDialect) Answer(any, json.RawMessage) ([]byte, error) { return nil, ErrNoServerRequests }
