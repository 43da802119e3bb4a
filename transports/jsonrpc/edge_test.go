package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"
)

// rawID reads the id member of a frame exactly as written.
func rawID(t *testing.T, frame []byte) string {
	t.Helper()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(frame, &m); err != nil {
		t.Fatalf("frame %q: %v", frame, err)
	}
	return string(m.ID)
}

func (p *pipePeer) recvRaw(t *testing.T) []byte {
	t.Helper()
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(line, []byte("\n"))
}

// TestEveryRequestWithAnIDIsAnswered: whatever method holds (empty, null, a number, an
// object) a message with an id gets a response under that id.
func TestEveryRequestWithAnIDIsAnswered(t *testing.T) {
	p := newPeer(t, echo, 0)
	for _, id := range []string{`7`, `"x"`, `"a<b>&c"`} {
		for _, method := range []string{`""`, `null`, `5`, `true`, `{}`, `[]`, `"nope"`} {
			p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":`+method+`}`)
			frame := p.recvRaw(t)
			if got := rawID(t, frame); got != id {
				t.Errorf("method %s id %s: answered with id %s: %s", method, id, got, frame)
			}
			if !bytes.Contains(frame, []byte(`"error"`)) {
				t.Errorf("method %s: %s is not an error", method, frame)
			}
		}
	}
}

// TestIDsEchoedByteForByte: a response carries the request's id exactly as the peer wrote it.
func TestIDsEchoedByteForByte(t *testing.T) {
	p := newPeer(t, echo, 0)
	for _, id := range []string{`"a<b>&c"`, `"\u003c"`, "\"\u2028\"", `"é"`, `1.50`, `1E2`, `-0`, `"\/"`} {
		for _, method := range []string{"echo", "fail", "nope"} {
			p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`"}`)
			frame := p.recvRaw(t)
			if got := rawID(t, frame); got != id {
				t.Errorf("%s id %s echoed as %s", method, id, got)
			}
		}
	}
}

// TestBadRPCIDRefused: an id that is not valid UTF-8 or is over-long is refused and the
// handler never sees the request. An over-long id is echoed as sent; one that is not valid
// UTF-8 cannot be (the response would not be JSON) and is answered with id null.
func TestBadRPCIDRefused(t *testing.T) {
	var calls atomic.Int32
	h := handlerFunc(func(ctx context.Context, c *Conn, r *Request) (any, error) {
		calls.Add(1)
		return "ok", nil
	})
	p := newPeer(t, h, 0)
	long := `"` + strings.Repeat("x", 2000) + `"`
	for _, tc := range []struct{ id, echoed string }{
		{"\"\xff\"", "null"},
		{"\"a\xffb\"", "null"},
		{"\"\xc3\"", "null"}, // a truncated sequence
		{long, long},
	} {
		p.send(t, `{"jsonrpc":"2.0","id":`+tc.id+`,"method":"echo"}`)
		frame := p.recvRaw(t)
		if !utf8.Valid(frame) || !json.Valid(frame) {
			t.Errorf("bad id %.20q: the answer is not valid JSON: %q", tc.id, frame)
			continue
		}
		if got := rawID(t, frame); got != tc.echoed {
			t.Errorf("bad id %.20q answered with id %.20q, want %.20q", tc.id, got, tc.echoed)
		}
		var m map[string]any
		_ = json.Unmarshal(frame, &m)
		if code(m) != codeInvalidRequest {
			t.Errorf("bad id %.20q: %s", tc.id, frame)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("handler ran %d times for refused ids", calls.Load())
	}
}

// gated is an async handler whose "slow" method blocks until release is closed.
type gated struct {
	release chan struct{}
	running atomic.Int32
}

func (g *gated) Async(method string) bool { return method == "slow" }

func (g *gated) Handle(ctx context.Context, c *Conn, r *Request) (any, error) {
	if r.Method == "slow" {
		g.running.Add(1)
		<-g.release
		return "done", nil
	}
	return "inline", nil
}

func newCappedPeer(t *testing.T, h Handler, maxInFlight int) *pipePeer {
	t.Helper()
	checkGoroutines(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := NewConn(NewLineFramer(inR, outW, multiCloser{inR, outW}, 0), h, Options{MaxInFlight: maxInFlight})
	p := &pipePeer{in: inW, out: bufio.NewReaderSize(outR, 1<<16), c: c, err: make(chan error, 1)}
	go func() { p.err <- c.Run(context.Background()) }()
	t.Cleanup(func() { inW.Close(); outR.Close(); <-p.c.done })
	return p
}

// TestInFlightCap: past MaxInFlight running async requests, a request is answered at once
// with the overload error (retry_after_ms in data); inline methods are still served; once
// the running ones finish, each gets its own result.
func TestInFlightCap(t *testing.T) {
	g := &gated{release: make(chan struct{})}
	p := newCappedPeer(t, g, 4)
	// Written from another goroutine: refusals are written by the reader, which then waits
	// for this test to read them.
	go func() {
		for i := range 10 {
			io.WriteString(p.in, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"slow"}`+"\n")
		}
	}()
	refused := map[float64]bool{}
	for range 6 {
		m := p.recv(t)
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != float64(CodeOverloaded) {
			t.Fatalf("want an overload error, got %v", m)
		}
		data, _ := e["data"].(map[string]any)
		if ms, _ := data["retry_after_ms"].(float64); ms <= 0 {
			t.Fatalf("overload error without retry_after_ms: %v", m)
		}
		refused[m["id"].(float64)] = true
	}
	p.send(t, `{"jsonrpc":"2.0","id":"inline","method":"quick"}`)
	if m := p.recv(t); m["id"] != "inline" || m["result"] != "inline" {
		t.Fatalf("inline method under a full cap: %v", m)
	}
	close(g.release)
	for range 4 {
		m := p.recv(t)
		if m["result"] != "done" || refused[m["id"].(float64)] {
			t.Fatalf("after release: %v (refused %v)", m, refused)
		}
	}
	if n := g.running.Load(); n != 4 {
		t.Fatalf("%d slow requests ran, want 4", n)
	}
}

// TestPipelinedFloodMemoryBounded is the unbounded in-flight defect: a peer pipelines
// thousands of async requests that do not finish. Memory must stay bounded by the cap rather
// than grow with the flood (one goroutine and request per message, before the cap).
func TestPipelinedFloodMemoryBounded(t *testing.T) {
	const flood = 20000
	g := &gated{release: make(chan struct{})}
	p := newCappedPeer(t, g, DefaultMaxInFlight)
	var overloaded atomic.Int32
	var sawEnd atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			line, err := p.out.ReadBytes('\n')
			if err != nil {
				return
			}
			if bytes.Contains(line, []byte(`"code":-32001`)) {
				overloaded.Add(1)
			}
			if bytes.Contains(line, []byte(`"id":"end"`)) {
				sawEnd.Store(true)
			}
		}
	})
	before := inUse()
	var buf bytes.Buffer
	for i := range flood {
		buf.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"slow","params":{"pad":"` + strings.Repeat("x", 64) + `"}}` + "\n")
		if buf.Len() > 1<<16 {
			if _, err := p.in.Write(buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			buf.Reset()
		}
	}
	// A marker answered inline: once it is read, every request before it has been dispatched.
	buf.WriteString(`{"jsonrpc":"2.0","id":"end","method":"quick"}` + "\n")
	if _, err := p.in.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	for p.c.ctx.Err() == nil && !sawEnd.Load() {
		runtime.Gosched()
	}
	grown := int64(inUse()) - int64(before)
	close(g.release)
	p.in.Close()
	wg.Wait()
	if grown > 16<<20 {
		t.Fatalf("memory grew by %d MiB under a flood of %d requests", grown>>20, flood)
	}
	if got := overloaded.Load(); got != flood-DefaultMaxInFlight {
		t.Fatalf("%d overload errors, want %d", got, flood-DefaultMaxInFlight)
	}
	t.Logf("flood of %d: memory grew %d KiB", flood, grown>>10)
}

func inUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// FuzzDecodeEcho: decode never panics; a request it accepts has a method and object params; an
// error it answers goes to null or to an id copied byte for byte from the frame, and that id
// is valid UTF-8 (the answer must be JSON).
func FuzzDecodeEcho(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"a"}`, `{"jsonrpc":"2.0","id":"x","method":5}`,
		`{"jsonrpc":"2.0","id":"a` + "\xff" + `","method":"a"}`, `{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","method":null,"id":2}`, `[]`, `{`, `{"jsonrpc":"2.0","id":[1],"method":"a","params":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		d, e, id := decode(frame)
		if e != nil {
			if string(id) != "null" && !bytes.Contains(frame, id) {
				t.Fatalf("error id %q is not from the frame %q", id, frame)
			}
			if !utf8.Valid(id) {
				t.Fatalf("error id %q of frame %q is not valid UTF-8", id, frame)
			}
			return
		}
		if d.kind == kindRequest && (d.req.Method == "" || len(d.req.Params) == 0 || d.req.Params[0] != '{') {
			t.Fatalf("accepted request %+v from %q", d.req, frame)
		}
	})
}
