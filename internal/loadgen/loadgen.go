// Package loadgen drives an OpenAI-compatible HTTP server with many concurrent clients, for
// the benchmarks of the HTTP API and of the hermes serve process: latency of non-streamed
// requests, event throughput of one stream, many streams held open at once, and the memory
// of the serving process read from /proc.
//
// It speaks plain HTTP and server-sent events itself (no SDK), so what it measures is the
// server, and a stream that breaks the framing is reported as an error rather than guessed
// around.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrStatus is wrapped by errors for a response whose status is not 200.
var ErrStatus = errors.New("loadgen: unexpected HTTP status")

// ErrStream is wrapped by errors for a stream that carried an in-band error or ended without
// its terminal event.
var ErrStream = errors.New("loadgen: stream failed")

// Target is the server under load.
type Target struct {
	BaseURL string // the API base, ending in /v1
	APIKey  string
	// Client is used for every request; nil means NewClient(64).
	Client *http.Client
}

// NewClient returns an HTTP client whose transport keeps up to conns connections to one host
// open and idle, so a load of that many concurrent requests reuses them instead of dialling.
func NewClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true, // measure the bytes the server writes
	}}
}

func (t *Target) client() *http.Client {
	if t.Client == nil {
		t.Client = NewClient(64)
	}
	return t.Client
}

func (t *Target) request(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(t.BaseURL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := t.client().Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		return nil, fmt.Errorf("%w %d: %s", ErrStatus, res.StatusCode, bytes.TrimSpace(b))
	}
	return res, nil
}

// Post sends body to path (e.g. "/chat/completions"), reads the whole response and returns
// how long that took.
func (t *Target) Post(ctx context.Context, path string, body []byte) (time.Duration, error) {
	start := time.Now()
	res, err := t.request(ctx, http.MethodPost, path, body)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Stream is one open event stream.
type Stream struct {
	res   *http.Response
	dec   *Decoder
	first Event
	read  bool // first was returned by Next
}

// OpenStream posts body to path and returns once the first event arrived: from then on the
// server holds the stream (for a chat completion, its turn runs).
func (t *Target) OpenStream(ctx context.Context, path string, body []byte) (*Stream, error) {
	return t.open(ctx, http.MethodPost, path, body)
}

// OpenEvents is OpenStream for a GET event stream such as /runs/{id}/events.
func (t *Target) OpenEvents(ctx context.Context, path string) (*Stream, error) {
	return t.open(ctx, http.MethodGet, path, nil)
}

func (t *Target) open(ctx context.Context, method, path string, body []byte) (*Stream, error) {
	res, err := t.request(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		res.Body.Close()
		return nil, fmt.Errorf("%w: Content-Type %q, want text/event-stream", ErrStream, ct)
	}
	s := &Stream{res: res, dec: NewDecoder(res.Body)}
	if s.first, err = s.dec.Next(); err != nil {
		res.Body.Close()
		return nil, fmt.Errorf("%w: no first event: %v", ErrStream, err)
	}
	return s, nil
}

// Next returns the next event (the first one included), or io.EOF.
func (s *Stream) Next() (Event, error) {
	if !s.read {
		s.read = true
		return s.first, nil
	}
	return s.dec.Next()
}

// Close releases the connection; a stream not read to its end is cut.
func (s *Stream) Close() error { return s.res.Body.Close() }

// Result is what one drained stream carried.
type Result struct {
	Events int    // every dispatched event, the terminal one included
	Text   string // chat: concatenated choices[].delta.content; responses: output_text deltas
	Named  int    // events with an event: name other than a response.* type (e.g. tool progress)
}

// Drain reads the stream to its end and closes it. A chat stream must end with [DONE], a
// Responses stream with response.completed, a run's event stream with run.completed; an
// in-band error, a failed, incomplete or cancelled response or run, or an early end is an
// error wrapping ErrStream.
func (s *Stream) Drain() (Result, error) {
	defer s.Close()
	var r Result
	var text strings.Builder
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			return r, fmt.Errorf("%w: ended after %d events without its terminal event", ErrStream, r.Events)
		}
		if err != nil {
			return r, fmt.Errorf("%w: %v", ErrStream, err)
		}
		r.Events++
		if ev.Data == "[DONE]" {
			r.Text = text.String()
			return r, nil
		}
		var m struct {
			Type    string          `json:"type"`
			Event   string          `json:"event"` // run events name themselves here
			Delta   string          `json:"delta"`
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			return r, fmt.Errorf("%w: event %d is not JSON: %v", ErrStream, r.Events, err)
		}
		switch {
		case len(m.Error) > 0 && string(m.Error) != "null":
			return r, fmt.Errorf("%w: in-band error %s", ErrStream, m.Error)
		case m.Type == "response.output_text.delta":
			text.WriteString(m.Delta)
		case m.Type == "response.completed" || m.Event == "run.completed":
			r.Text = text.String()
			return r, nil
		case m.Type == "response.failed" || m.Type == "response.incomplete" || m.Type == "error":
			return r, fmt.Errorf("%w: %s", ErrStream, m.Type)
		case m.Event == "run.failed" || m.Event == "run.cancelled":
			return r, fmt.Errorf("%w: %s", ErrStream, m.Event)
		case ev.Name != "" && !strings.HasPrefix(ev.Name, "response."):
			r.Named++
		}
		for _, c := range m.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
}

// Held is a set of streams opened at once.
type Held struct {
	Streams []*Stream // the streams that opened, in no particular order
	Errors  []error   // why the others did not
}

// Hold opens n streams concurrently, open(i) opening the i-th (e.g. with Target.OpenStream),
// and returns when every one has its first event or failed.
func Hold(n int, open func(i int) (*Stream, error)) *Held {
	h := &Held{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := open(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				h.Errors = append(h.Errors, err)
				return
			}
			h.Streams = append(h.Streams, s)
		})
	}
	wg.Wait()
	return h
}

// Summary adds up drained streams.
type Summary struct {
	Streams int // drained to their terminal event
	Events  int
	Errors  int
	Err     error // the first error, for the report
	Texts   map[string]int
}

// Drain drains every held stream concurrently; errors of Hold count too.
func (h *Held) Drain() Summary {
	sum := Summary{Errors: len(h.Errors), Texts: map[string]int{}}
	if len(h.Errors) > 0 {
		sum.Err = h.Errors[0]
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range h.Streams {
		wg.Go(func() {
			r, err := s.Drain()
			mu.Lock()
			defer mu.Unlock()
			sum.Events += r.Events
			if err != nil {
				sum.Errors++
				if sum.Err == nil {
					sum.Err = err
				}
				return
			}
			sum.Streams++
			sum.Texts[r.Text]++
		})
	}
	wg.Wait()
	return sum
}

// Percentile returns the p-th percentile (0 < p <= 100) of d, which it sorts.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(float64(len(d))*p/100+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// Mem is the memory of a process as the kernel reports it.
type Mem struct {
	RSS  int64 // VmRSS: resident now, bytes
	HWM  int64 // VmHWM: the peak resident size, bytes
	Anon int64 // RssAnon: the resident heap, stacks and other anonymous memory
	File int64 // RssFile: resident pages of mapped files, mostly the executable itself
}

// ReadMem reads /proc/<pid>/status (Linux only).
func ReadMem(pid int) (Mem, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Mem{}, err
	}
	return parseStatus(b)
}

// parseStatus reads VmRSS, VmHWM, RssAnon and RssFile ("VmRSS:	   29080 kB") from a /proc
// status file; the last two are optional (kernels before 4.5 lack them).
func parseStatus(b []byte) (Mem, error) {
	var m Mem
	var seen int
	for line := range bytes.Lines(b) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		case "RssAnon":
			dst = &m.Anon
		case "RssFile":
			dst = &m.File
		default:
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) != 2 || f[1] != "kB" {
			return Mem{}, fmt.Errorf("loadgen: %s: unexpected value %q", name, bytes.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Mem{}, fmt.Errorf("loadgen: %s: %v", name, err)
		}
		*dst = kb << 10
		if dst == &m.RSS || dst == &m.HWM {
			seen++
		}
	}
	if seen != 2 {
		return Mem{}, errors.New("loadgen: no VmRSS/VmHWM in the status file (not Linux, or a kernel thread)")
	}
	return m, nil
}

// MB formats bytes as mebibytes with one decimal.
func MB(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MB" }
