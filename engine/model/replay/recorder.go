package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
)

// recordedHeaders are the response headers a cassette keeps: the ones that change what the
// client does. Everything else may identify an account and is dropped.
var recordedHeaders = []string{"Content-Type", "Retry-After", "Retry-After-Ms", "X-Should-Retry"}

// Recorder is an http.RoundTripper that forwards requests and records each exchange: the request
// body, and the response body in the pieces the client read it in. Plug it into the client as
// &http.Client{Transport: rec}. Request headers are never recorded, so API keys stay out of
// cassettes. It is safe for concurrent use; interactions are kept in the order responses
// arrived.
type Recorder struct {
	inner http.RoundTripper
	// Provider is the wire dialect the cassette is labelled with: "openai" (the default) or
	// "anthropic". Set it before recording.
	Provider string

	mu           sync.Mutex
	interactions []*Interaction
}

var _ http.RoundTripper = (*Recorder)(nil)

// NewRecorder returns a recorder forwarding to inner; nil means http.DefaultTransport.
func NewRecorder(inner http.RoundTripper) *Recorder {
	if inner == nil {
		inner = http.DefaultTransport
	}
	return &Recorder{inner: inner}
}

// RoundTrip implements http.RoundTripper.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("recorder: reading request body: %w", err)
		}
	}
	out := req.Clone(req.Context())
	if req.Body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.ContentLength = int64(len(body))
	}
	resp, err := r.inner.RoundTrip(out)
	if err != nil {
		return nil, err // no response, nothing a replay could play back
	}
	rec := &Response{Status: resp.StatusCode, Body: []Piece{}}
	for _, k := range recordedHeaders {
		if v := resp.Header.Get(k); v != "" {
			if rec.Headers == nil {
				rec.Headers = map[string]string{}
			}
			rec.Headers[strings.ToLower(k)] = v
		}
	}
	it := &Interaction{Request: requestJSON(body), Response: rec}
	r.mu.Lock()
	r.interactions = append(r.interactions, it)
	r.mu.Unlock()
	resp.Body = &tap{rc: resp.Body, rec: r, resp: rec}
	return resp, nil
}

// requestJSON keeps a JSON body as is and any other body as a JSON string.
func requestJSON(body []byte) json.RawMessage {
	if len(body) == 0 {
		return nil
	}
	if json.Valid(body) {
		return append(json.RawMessage(nil), body...)
	}
	s, _ := json.Marshal(string(body))
	return s
}

// Cassette returns a snapshot of what has been recorded. Call it once the streams have been
// consumed; a body still being read is included up to the last piece read.
func (r *Recorder) Cassette() *Cassette {
	r.mu.Lock()
	defer r.mu.Unlock()
	dialect := r.Provider
	if dialect == "" {
		dialect = "openai"
	}
	c := &Cassette{Version: Version, Provider: dialect, Interactions: make([]Interaction, len(r.interactions))}
	for i, it := range r.interactions {
		resp := *it.Response
		resp.Body = append([]Piece(nil), resp.Body...)
		resp.Headers = make(map[string]string, len(it.Response.Headers))
		for k, v := range it.Response.Headers {
			resp.Headers[k] = v
		}
		c.Interactions[i] = Interaction{Match: it.Match, Request: it.Request, Response: &resp}
	}
	return c
}

// Save writes the recorded cassette to path atomically.
func (r *Recorder) Save(path string) error { return r.Cassette().Save(path) }

// tap copies every Read of a response body into the recording.
type tap struct {
	rc   io.ReadCloser
	rec  *Recorder
	resp *Response
	// pending holds the start of a UTF-8 sequence cut by a read boundary. It is carried into
	// the next piece so pieces stay readable strings; the bytes are unchanged.
	pending []byte
	ended   bool
}

func (t *tap) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	if n > 0 && !t.ended {
		data := append(t.pending, p[:n]...)
		cut := completeUTF8(data)
		if cut > 0 {
			t.resp.Body = append(t.resp.Body, Piece(bytes.Clone(data[:cut])))
		}
		t.pending = bytes.Clone(data[cut:])
	}
	if err != nil && !t.ended {
		t.end(err)
	}
	return n, err
}

func (t *tap) Close() error {
	err := t.rc.Close()
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	if !t.ended {
		t.end(nil)
	}
	return err
}

// end flushes pending bytes and notes a transport error; called with rec.mu held.
func (t *tap) end(err error) {
	t.ended = true
	if len(t.pending) > 0 {
		t.resp.Body = append(t.resp.Body, Piece(t.pending))
		t.pending = nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		t.resp.Error = err.Error()
	}
}

// completeUTF8 is the length of the longest prefix of b not ending inside a UTF-8 sequence.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// RecordFrom sends each request to a live OpenAI-compatible endpoint, one interaction per
// request (plus any retries the client made), and returns the cassette. It stops at the first
// request whose stream fails and returns the cassette recorded so far with that error, since a
// failure is usually not what a demo cassette should contain.
func RecordFrom(ctx context.Context, baseURL, apiKey string, reqs []model.Request) (*Cassette, error) {
	rec := NewRecorder(nil)
	client := openai.New(openai.Config{BaseURL: baseURL, APIKey: apiKey, HTTPClient: &http.Client{Transport: rec}})
	for i, r := range reqs {
		for _, err := range client.Stream(ctx, r) {
			if err != nil {
				return rec.Cassette(), fmt.Errorf("recording request %d: %w", i, err)
			}
		}
	}
	return rec.Cassette(), nil
}
