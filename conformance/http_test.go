package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadSSE(t *testing.T) {
	in := "retry: 3000\n\n: keepalive\n\nid: 1\ndata: {\"event\":\"run.started\"}\n\n" +
		"event: hermes.tool.progress\r\ndata: {\"a\":1}\r\n\r\n" +
		"data: line one\ndata: line two\n\n" +
		"event: orphan\n\n" + // no data: not dispatched
		"data: [DONE]\n\n" +
		"data: cut off" // no blank line: dropped
	var got []string
	if err := readSSE(strings.NewReader(in), func(ev sseEvent) bool {
		got = append(got, string(ev.frame()))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"data":{"event":"run.started"},"id":"1"}`,
		`{"data":{"a":1},"event":"hermes.tool.progress"}`,
		`{"data":"line one\nline two"}`,
		`{"data":"[DONE]"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var d httpDialect
	for i, name := range []string{"run.started", "hermes.tool.progress", "line one\nline two", "[DONE]"} {
		var m map[string]any
		json.Unmarshal([]byte(want[i]), &m)
		if !d.Until(m, name) {
			t.Errorf("frame %d is not named %q (Event says %q)", i, name, d.Event(m))
		}
	}
}

func FuzzReadSSE(f *testing.F) {
	f.Add("id: 1\ndata: {}\n\n")
	f.Add("event: x\r\ndata: a\r\ndata: b\r\n\r\n: c\n\n")
	f.Add("data\n\nid: \x00\ndata: y\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		n := 0
		err := readSSE(strings.NewReader(in), func(ev sseEvent) bool {
			n++
			if strings.ContainsAny(ev.Event, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") {
				t.Fatalf("field with a line break or NUL: %+v", ev)
			}
			var m map[string]any
			if err := json.Unmarshal(ev.frame(), &m); err != nil {
				t.Fatalf("frame is not JSON: %v", err)
			}
			return n < 3 // stopping early must end the parse cleanly
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestHTTPConnRepliesFirst: a request sent while an event stream has frames waiting gets its
// response first; the stream's events follow in order, then the stream's end is reported.
func TestHTTPConnRepliesFirst(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Hermes-Session-Id", "s1")
			w.Header().Set("X-Unpinned", "nope")
			for i := 1; i <= 2; i++ {
				fmt.Fprintf(w, "id: %d\ndata: {\"event\":\"e%d\"}\n\n", i, i)
			}
			w.(http.Flusher).Flush()
			<-release
			fmt.Fprint(w, "data: {\"event\":\"e3\"}\n\n")
		case "/ping":
			w.Header().Set("Content-Type", "application/json")
			close(release)
			fmt.Fprint(w, `{"pong":true}`)
		}
	}))
	defer srv.Close()
	c, _ := HTTPTarget(srv.URL, "k").Connect()
	defer c.Close()
	ctx := context.Background()
	recv := func() string {
		t.Helper()
		b, err := c.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := c.Send([]byte(`{"method":"GET","path":"/events"}`)); err != nil {
		t.Fatal(err)
	}
	if got := recv(); got != `{"headers":{"content-type":"text/event-stream","x-hermes-session-id":"s1"},"status":200}` {
		t.Fatalf("stream response: %s", got)
	}
	if err := c.Send([]byte(`{"method":"GET","path":"/ping"}`)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"body":{"pong":true},"headers":{"content-type":"application/json"},"status":200}`,
		`{"data":{"event":"e1"},"id":"1"}`,
		`{"data":{"event":"e2"},"id":"2"}`,
		`{"data":{"event":"e3"}}`,
	}
	for i, w := range want {
		if got := recv(); got != w {
			t.Fatalf("frame %d: got %s, want %s", i+1, got, w)
		}
	}
	if _, err := c.Recv(ctx); err == nil || !strings.Contains(err.Error(), ErrStreamEnded.Error()) {
		t.Fatalf("after the stream: %v", err)
	}
	// an explicit empty Authorization sends none
	if err := c.Send([]byte(`{"method":"GET","path":"/ping","headers":{"Authorization":""}}`)); err != nil {
		t.Fatal(err)
	}
	if got := recv(); got != `{"status":401}` {
		t.Fatalf("without a key: %s", got)
	}
}

func TestWithEnv(t *testing.T) {
	got := withEnv([]string{"A=1", "B=2", "C=3"}, map[string]string{"B": "", "C": "x", "D": "4"})
	s := strings.Join(got, " ")
	if strings.Contains(s, "B=") || !strings.Contains(s, "A=1") || !strings.Contains(s, "C=x") || strings.Contains(s, "C=3") || !strings.Contains(s, "D=4") {
		t.Fatalf("withEnv: %v", got)
	}
}
