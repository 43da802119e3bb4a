package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func decodeAll(t testing.TB, in string) []Event {
	t.Helper()
	d := NewDecoder(strings.NewReader(in))
	var out []Event
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

func TestDecoder(t *testing.T) {
	in := ": keepalive\n\n" +
		"data: {\"a\":1}\n\n" +
		"event: hermes.tool.progress\ndata: {\"tool\":\"x\"}\n\n" +
		"id: 7\r\ndata:no-space\r\n\r\n" + // CRLF, no space after the colon
		"data: one\rdata: two\r\r" + // bare CR, two data lines
		"event: lost-name\n\n" + // no data: not dispatched, the name does not carry over
		"data: [DONE]\n\n" +
		"data: unterminated" // no blank line before EOF: dropped
	got := decodeAll(t, in)
	want := []Event{
		{Data: `{"a":1}`},
		{Name: "hermes.tool.progress", Data: `{"tool":"x"}`},
		{Data: "no-space", ID: "7"},
		{Data: "one\ntwo", ID: "7"},
		{Data: "[DONE]", ID: "7"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	d := NewDecoder(strings.NewReader(": a\n\n: b\n\n"))
	if _, err := d.Next(); !errors.Is(err, io.EOF) || d.Comments() != 2 {
		t.Fatalf("comments: %v %d", err, d.Comments())
	}
}

func TestDecoderCRLFSplitAcrossReads(t *testing.T) {
	// One byte per read: the LF of every CRLF arrives after its CR was buffered alone.
	r := io.MultiReader(strings.NewReader("data: a\r"), strings.NewReader("\n\r"), strings.NewReader("\ndata: b\r\n\r\n"))
	d := NewDecoder(r)
	var got []string
	for {
		ev, err := d.Next()
		if err != nil {
			break
		}
		got = append(got, ev.Data)
	}
	if strings.Join(got, ",") != "a,b" {
		t.Fatalf("got %q", got)
	}
}

func TestDecoderLineTooLong(t *testing.T) {
	d := NewDecoder(strings.NewReader("data: " + strings.Repeat("x", MaxLine+1) + "\n\n"))
	if _, err := d.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("want ErrLineTooLong, got %v", err)
	}
}

// FuzzDecoder: any input decodes without panicking; events encoded by the canonical framing
// (with the line ending picked by the fuzzer) come back unchanged.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("data: x\n\n"), "name", "payload", uint8(0))
	f.Add([]byte("event: e\r\ndata: y\r\n\r\n: c\r\r"), "", "multi\nline", uint8(1))
	f.Add([]byte("\xef\xbb\xbfdata: bom\n\n"), "n", "", uint8(2))
	f.Fuzz(func(t *testing.T, raw []byte, name, data string, eol uint8) {
		d := NewDecoder(strings.NewReader(string(raw)))
		for range 10_000 {
			if _, err := d.Next(); err != nil {
				break
			}
		}
		if strings.ContainsAny(name, "\r\n") || strings.ContainsAny(data, "\r") || data == "" {
			return
		}
		nl := []string{"\n", "\r\n", "\r"}[eol%3]
		var b strings.Builder
		if name != "" {
			b.WriteString("event: " + name + nl)
		}
		for l := range strings.SplitSeq(data, "\n") {
			b.WriteString("data: " + l + nl)
		}
		b.WriteString(nl)
		got := decodeAll(t, b.String())
		// The encoder writes one space after each colon and the decoder strips exactly one, so
		// values that start with a space survive.
		if len(got) != 1 || got[0].Data != data || got[0].Name != name {
			t.Fatalf("round trip of %q %q: %q", name, data, got)
		}
	})
}

// sseServer serves the given body as an event stream on 127.0.0.1.
func sseServer(t *testing.T, status int, body func(i int) string) *Target {
	t.Helper()
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(401)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		n++
		io.WriteString(w, body(n))
	}))
	t.Cleanup(srv.Close)
	return &Target{BaseURL: srv.URL + "/v1", APIKey: "k"}
}

func TestDrainChat(t *testing.T) {
	tg := sseServer(t, 200, func(int) string {
		return `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}` + "\n\n" +
			"event: hermes.tool.progress\ndata: {\"tool\":\"read_file\"}\n\n" +
			": keepalive\n\n" +
			`data: {"choices":[{"delta":{"content":"Hel"}}]}` + "\n\n" +
			`data: {"choices":[{"delta":{"content":"lo"}}]}` + "\n\n" +
			"data: [DONE]\n\n"
	})
	s, err := tg.OpenStream(context.Background(), "/chat/completions", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Drain()
	if err != nil || r.Text != "Hello" || r.Events != 5 || r.Named != 1 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestDrainRun(t *testing.T) {
	tg := sseServer(t, 200, func(int) string {
		return "retry: 3000\n\nid: 1\ndata: {\"event\":\"run.started\"}\n\n: keepalive\n\nid: 2\ndata: {\"event\":\"run.completed\"}\n\n"
	})
	s, err := tg.OpenEvents(context.Background(), "/runs/r/events")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Drain(); err != nil || r.Events != 2 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestDrainFailures(t *testing.T) {
	cases := map[string]string{
		"in-band error": `data: {"choices":[]}` + "\n\n" + `data: {"error":{"message":"boom"}}` + "\n\n",
		"no terminal":   `data: {"choices":[]}` + "\n\n",
		"failed":        `event: response.created` + "\ndata: {\"type\":\"response.created\"}\n\n" + "data: {\"type\":\"response.failed\"}\n\n",
		"not json":      "data: {\"choices\":[]}\n\ndata: nope\n\n",
		"run cancelled": "id: 1\ndata: {\"event\":\"run.started\"}\n\nid: 2\ndata: {\"event\":\"run.cancelled\"}\n\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			tg := sseServer(t, 200, func(int) string { return body })
			s, err := tg.OpenStream(context.Background(), "/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Drain(); !errors.Is(err, ErrStream) {
				t.Fatalf("want ErrStream, got %v", err)
			}
		})
	}
	tg := sseServer(t, 200, func(int) string { return "" })
	tg.APIKey = "wrong"
	if _, err := tg.OpenStream(context.Background(), "/x", nil); !errors.Is(err, ErrStatus) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("want ErrStatus 401, got %v", err)
	}
}

func TestHoldAndDrain(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: {\"type\":\"response.output_text.delta\",\"delta\":\"done\"}\n\ndata: {\"type\":\"response.completed\"}\n\n")
	}))
	defer srv.Close()
	tg := &Target{BaseURL: srv.URL + "/v1", APIKey: "k", Client: NewClient(50)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := Hold(50, func(i int) (*Stream, error) {
		if i%2 == 0 {
			return tg.OpenEvents(ctx, "/runs/x/events")
		}
		return tg.OpenStream(ctx, "/responses", []byte(fmt.Sprint(i)))
	})
	if len(h.Streams) != 50 || len(h.Errors) != 0 {
		t.Fatalf("held %d, errors %v", len(h.Streams), h.Errors)
	}
	close(release) // every stream is held at once: the handlers are all waiting here
	sum := h.Drain()
	if sum.Streams != 50 || sum.Errors != 0 || sum.Events != 150 || sum.Texts["done"] != 50 {
		t.Fatalf("%+v", sum)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p := Percentile(d, 50); p != 50*time.Millisecond {
		t.Fatalf("p50 %v", p)
	}
	if p := Percentile(d, 99); p != 99*time.Millisecond {
		t.Fatalf("p99 %v", p)
	}
	if Percentile(nil, 50) != 0 {
		t.Fatal("empty")
	}
}

func TestReadMem(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	m, err := ReadMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS || m.Anon <= 0 || m.File <= 0 || m.Anon+m.File > m.RSS {
		t.Fatalf("%+v", m)
	}
	if _, err := parseStatus([]byte("Name:\tx\nVmRSS:\t12 MB\nVmHWM:\t1 kB\n")); err == nil {
		t.Fatal("a unit other than kB was accepted")
	}
	if _, err := parseStatus([]byte("Name:\tkthreadd\n")); err == nil {
		t.Fatal("a status without memory lines was accepted")
	}
}
