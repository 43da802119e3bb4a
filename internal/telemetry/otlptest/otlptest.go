// Package otlptest is an in-process OTLP/HTTP trace receiver for tests: it listens on
// 127.0.0.1, decodes each POST /v1/traces body as an ExportTraceServiceRequest protobuf (gzip
// or not), answers as a collector does, and keeps the spans for the test to inspect.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	TraceID, SpanID, ParentSpanID string // hex; ParentSpanID "" for a root
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Attrs                         map[string]any // string, bool, int64, float64 or []any
	StatusCode                    tracepb.Status_StatusCode
	StatusMessage                 string
	Resource                      map[string]any
	Scope                         string
	Start, End                    time.Time
}

// Receiver is the fake collector.
type Receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []Span
	headers []http.Header // of each export request
	changed chan struct{} // closed and replaced on every export
}

// New starts a receiver; it stops when the test ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// Endpoint is the base URL to give OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends
// /v1/traces).
func (r *Receiver) Endpoint() string { return r.srv.URL }

// Spans returns the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers returns the HTTP headers of every export request received so far.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// WaitFor waits until done(spans) holds for the spans received so far and returns them; it
// fails the test after timeout.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, what string, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, ch := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("otlptest: no %s within %v; received %d spans: %s", what, timeout, len(spans), Names(spans))
			return nil
		}
	}
}

// Names lists the spans' names, for failure messages.
func Names(spans []Span) string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Named returns the spans called name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "only POST /v1/traces is served", http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("unsupported content type %q (want application/x-protobuf)", ct), http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, "bad gzip body: "+err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					TraceID:       hex.EncodeToString(s.GetTraceId()),
					SpanID:        hex.EncodeToString(s.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
					Name:          s.GetName(),
					Kind:          s.GetKind(),
					Attrs:         attrs(s.GetAttributes()),
					StatusCode:    s.GetStatus().GetCode(),
					StatusMessage: s.GetStatus().GetMessage(),
					Resource:      res,
					Scope:         ss.GetScope().GetName(),
					Start:         time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:           time.Unix(0, int64(s.GetEndTimeUnixNano())),
				})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.headers = append(r.headers, req.Header.Clone())
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}
