package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// pipePeer runs a Conn over in-memory pipes and gives the test the other end.
type pipePeer struct {
	in  *io.PipeWriter // test → conn
	out *bufio.Reader  // conn → test
	c   *Conn
	err chan error
}

func newPeer(t *testing.T, h Handler, max int) *pipePeer {
	t.Helper()
	checkGoroutines(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := NewConn(NewLineFramer(inR, outW, multiCloser{inR, outW}, max), h, Options{Logger: slog.New(slog.DiscardHandler)})
	p := &pipePeer{in: inW, out: bufio.NewReader(outR), c: c, err: make(chan error, 1)}
	go func() { p.err <- c.Run(context.Background()) }()
	t.Cleanup(func() { inW.Close(); outR.Close(); <-p.c.done })
	return p
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	for _, c := range m {
		c.Close()
	}
	return nil
}

func (p *pipePeer) send(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(p.in, s+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *pipePeer) recv(t *testing.T) map[string]any {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("bad frame %q: %v", line, err)
	}
	return m
}

// handlerFunc adapts a function to Handler.
type handlerFunc func(ctx context.Context, c *Conn, r *Request) (any, error)

func (f handlerFunc) Handle(ctx context.Context, c *Conn, r *Request) (any, error) {
	return f(ctx, c, r)
}

func errorf(code int, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

var echo = handlerFunc(func(ctx context.Context, c *Conn, r *Request) (any, error) {
	switch r.Method {
	case "echo":
		return json.RawMessage(r.Params), nil
	case "fail":
		return nil, &Error{Code: 4001, Message: "session not found", Data: map[string]any{"x": 1}}
	case "boom":
		panic("boom")
	case "nil":
		return nil, nil
	}
	return nil, errorf(CodeMethodNotFound, "unknown method: %s", r.Method)
})

func code(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0
	}
	return e["code"].(float64)
}

func TestDecodeErrors(t *testing.T) {
	p := newPeer(t, echo, 0)
	cases := []struct {
		in   string
		code float64
		id   any
	}{
		{`{not json`, codeParseError, nil},
		{`[1,2]`, codeInvalidRequest, nil},
		{`"str"`, codeInvalidRequest, nil},
		{`{"jsonrpc":"2.0","id":1}`, codeInvalidRequest, 1.0},
		{`{"jsonrpc":"2.0","id":2,"method":""}`, codeInvalidRequest, 2.0},
		{`{"jsonrpc":"2.0","id":3,"method":5}`, codeInvalidRequest, 3.0},
		{`{"jsonrpc":"1.0","id":4,"method":"echo"}`, codeInvalidRequest, 4.0},
		{`{"jsonrpc":"2.0","id":5,"method":"echo","params":[1]}`, CodeInvalidParams, 5.0},
		{`{"jsonrpc":"2.0","id":6,"method":"nope"}`, CodeMethodNotFound, 6.0},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}`, codeInvalidRequest, nil},
		{`{"jsonrpc":"2.0","id":"s","method":"fail"}`, 4001, "s"},
		{`{"jsonrpc":"2.0","id":8,"method":"boom"}`, codeInternalError, 8.0},
		{`{"jsonrpc":"2.0","id":9,"method":"echo"} {"x":1}`, codeParseError, nil},
	}
	for _, c := range cases {
		p.send(t, c.in)
		m := p.recv(t)
		if code(m) != c.code || m["id"] != c.id || m["jsonrpc"] != "2.0" {
			t.Errorf("%s → %v", c.in, m)
		}
	}
	// The connection is still alive and answers normally, with result always an object.
	p.send(t, `{"jsonrpc":"2.0","id":10,"method":"nil","params":null}`)
	if m := p.recv(t); m["result"] == nil || m["id"] != 10.0 {
		t.Fatalf("after errors: %v", m)
	}
	p.send(t, `{"jsonrpc":"2.0","id":11,"method":"fail"}`)
	if m := p.recv(t); m["error"].(map[string]any)["data"].(map[string]any)["x"] != 1.0 {
		t.Fatalf("error data: %v", m)
	}
}

func TestNotificationsGetNoResponse(t *testing.T) {
	p := newPeer(t, echo, 0)
	p.send(t, `{"jsonrpc":"2.0","method":"echo","params":{"a":1}}`)
	p.send(t, `   `)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"b":2}}`)
	if m := p.recv(t); m["id"] != 1.0 {
		t.Fatalf("a notification was answered: %v", m)
	}
}

func TestOversizedFrameKeepsConnection(t *testing.T) {
	p := newPeer(t, echo, 1024)
	big := `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":"` + strings.Repeat("a", 200_000) + `"}}`
	go io.WriteString(p.in, big+"\n")
	m := p.recv(t)
	if code(m) != codeInvalidRequest || !strings.Contains(m["error"].(map[string]any)["message"].(string), "too large") {
		t.Fatalf("oversized: %v", m)
	}
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"ok":true}}`)
	if m := p.recv(t); m["id"] != 2.0 {
		t.Fatalf("after oversized: %v", m)
	}
}

func TestCallRoundTripAndOrdering(t *testing.T) {
	p := newPeer(t, echo, 0)
	got := make(chan json.RawMessage, 1)
	go func() {
		res, err := p.c.CallWithID(context.Background(), "approval", map[string]any{"command": "rm -r x"}, nil)
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	m := p.recv(t)
	id, _ := m["id"].(string)
	if m["method"] != "approval" || !strings.HasPrefix(id, "srq-") || len(id) != 16 {
		t.Fatalf("server request: %v", m)
	}
	p.send(t, `{"jsonrpc":"2.0","id":"srq-unknown000","result":{}}`) // unknown id: dropped
	p.send(t, `{"jsonrpc":"2.0","id":"`+id+`","result":{"choice":"once"}}`)
	if r := <-got; string(r) != `{"choice":"once"}` {
		t.Fatalf("result %s", r)
	}
	// An error answer (e.g. the client does not implement it) fails the call at once.
	go func() {
		_, err := p.c.CallWithID(context.Background(), "tour", nil, nil)
		got <- json.RawMessage(err.Error())
	}()
	m = p.recv(t)
	p.send(t, `{"jsonrpc":"2.0","id":"`+m["id"].(string)+`","error":{"code":-32601,"message":"unsupported"}}`)
	if r := <-got; !strings.Contains(string(r), "-32601") {
		t.Fatalf("error answer: %s", r)
	}
	// Notifications are written in order.
	go func() { // the pipe is synchronous: write while the test reads
		for i := 0; i < 50; i++ {
			p.c.Notify("event", map[string]int{"seq": i})
		}
	}()
	for i := 0; i < 50; i++ {
		if m := p.recv(t); m["params"].(map[string]any)["seq"] != float64(i) {
			t.Fatalf("order: %v", m)
		}
	}
}

func TestCallFailsWhenConnectionEnds(t *testing.T) {
	p := newPeer(t, echo, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := p.c.CallWithID(context.Background(), "approval", nil, nil)
		errc <- err
	}()
	p.recv(t)
	p.in.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("call succeeded on a dead connection")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("call hung after the peer left")
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"x","params":{}}`, `{`, `[]`, `{"jsonrpc":"2.0","id":"a","result":{}}`, `{"jsonrpc":"2.0","method":"m","params":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, e, id := decode(b)
		if e != nil {
			if id == nil || e.Code == 0 || e.Message == "" {
				t.Fatalf("bad error for %q: %+v %s", b, e, id)
			}
			return
		}
		if d.kind == kindRequest && (d.req.Method == "" || len(d.req.Params) == 0 || d.req.Params[0] != '{') {
			t.Fatalf("accepted a bad request %q: %+v", b, d.req)
		}
	})
}
