package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"
)

// holding is a handler whose "hold" (inline) and "slowhold" (async) methods report their
// context and wait until release is closed (answering "released") or their context ends
// (failing with its error); "keep" reports its context and answers at once; anything else
// echoes its params.
type holding struct {
	started chan context.Context
	release chan struct{}
	once    sync.Once
}

func newHolding() *holding {
	return &holding{started: make(chan context.Context, 16), release: make(chan struct{})}
}

func (h *holding) free() { h.once.Do(func() { close(h.release) }) }

func (h *holding) Async(method string) bool { return method == "slowhold" }

func (h *holding) Handle(ctx context.Context, _ *Conn, r *Request) (any, error) {
	switch r.Method {
	case "hold", "slowhold":
		h.started <- ctx
		select {
		case <-h.release:
			return "released", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "keep":
		h.started <- ctx
		return "kept", nil
	}
	return r.Params, nil
}

// eofSignal is a framer that reports when its Read has met the end of the input.
type eofSignal struct {
	Framer
	once sync.Once
	eof  chan struct{}
}

func (f *eofSignal) Read(ctx context.Context) ([]byte, error) {
	b, err := f.Framer.Read(ctx)
	if err != nil {
		f.once.Do(func() { close(f.eof) })
	}
	return b, err
}

// endPeer is a Conn over pipes whose output is read as it comes (so a write never waits for
// the test), with a framer that reports the end of input.
type endPeer struct {
	in     *io.PipeWriter // test → conn
	outW   *io.PipeWriter // the conn's output
	c      *Conn
	eof    chan struct{}       // the conn has read the end of its input
	frames chan map[string]any // everything the conn wrote, closed when its output ends
	err    chan error          // Run's result
}

// newEndPeer runs a Conn under ctx. closeOut false leaves the output open when the Conn closes
// its framer (so a test can see whether anything is written after Close).
func newEndPeer(t *testing.T, ctx context.Context, h Handler, opts Options, closeOut bool) *endPeer {
	t.Helper()
	checkGoroutines(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	closer := multiCloser{inR}
	if closeOut {
		closer = append(closer, outW)
	}
	f := &eofSignal{Framer: NewLineFramer(inR, outW, closer, 0), eof: make(chan struct{})}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &endPeer{in: inW, outW: outW, c: NewConn(f, h, opts), eof: f.eof, frames: make(chan map[string]any, 64), err: make(chan error, 1)}
	go func() { p.err <- p.c.Run(ctx) }()
	go func() {
		defer close(p.frames)
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				m = map[string]any{"unparsable": string(line)}
			}
			p.frames <- m
		}
	}()
	t.Cleanup(func() {
		if hh, ok := h.(*holding); ok {
			hh.free() // a handler still holding must not keep the connection up
		}
		inW.Close()
		outW.Close()
		outR.Close()
		<-p.c.done
	})
	return p
}

func (p *endPeer) send(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(p.in, s+"\n"); err != nil {
		t.Fatal(err)
	}
}

// answers waits (10s at most) for n frames and returns them by id (numbers in these tests).
func (p *endPeer) answers(t *testing.T, n int) map[float64]map[string]any {
	t.Helper()
	got := map[float64]map[string]any{}
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case m, ok := <-p.frames:
			if !ok {
				t.Fatalf("the output ended after %d of %d answers: %v", len(got), n, got)
			}
			id, ok := m["id"].(float64)
			if !ok {
				t.Fatalf("frame without a numeric id: %v", m)
			}
			got[id] = m
		case <-timeout:
			t.Fatalf("%d of %d answers after 10s: %v", len(got), n, got)
		}
	}
	return got
}

// noMoreFrames fails if the conn writes anything before its output ends.
func (p *endPeer) noMoreFrames(t *testing.T) {
	t.Helper()
	select {
	case m, ok := <-p.frames:
		if ok {
			t.Fatalf("unexpected frame: %v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the output never ended")
	}
}

// TestEOFAnswersRequestsRead: when the input ends, the requests already read are still
// handled under live contexts and answered — async ones running (with nothing holding the
// dispatcher), or an inline one holding the dispatcher with others queued behind it, among
// them one with bad params — and then Run returns nil.
func TestEOFAnswersRequestsRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holders []string // methods that wait for the release
	}{
		{"async", []string{"slowhold", "slowhold"}},
		{"inline", []string{"slowhold", "hold"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHolding()
			p := newEndPeer(t, context.Background(), h, Options{}, true)
			for i, m := range tc.holders {
				p.send(t, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"`+m+`"}`)
			}
			var ctxs []context.Context
			for range tc.holders {
				ctxs = append(ctxs, <-h.started)
			}
			p.send(t, `{"jsonrpc":"2.0","id":3,"method":"echo","params":{"n":3}}`)
			p.send(t, `{"jsonrpc":"2.0","id":4,"method":"echo","params":[1]}`)
			p.send(t, `{"jsonrpc":"2.0","method":"echo"}`) // a notification: nothing to answer
			p.in.Close()
			<-p.eof
			time.Sleep(100 * time.Millisecond) // long enough for a connection ending at EOF to show it
			select {
			case <-p.c.InputDone():
			default:
				t.Fatal("InputDone is open after the end of input")
			}
			if p.c.Context().Err() != nil {
				t.Fatal("the connection's context ended with the input")
			}
			for i, ctx := range ctxs {
				if ctx.Err() != nil {
					t.Fatalf("request %d: its context ended with the input (%v)", i+1, context.Cause(ctx))
				}
			}
			h.free()
			got := p.answers(t, 4)
			for _, id := range []float64{1, 2} {
				if got[id]["result"] != "released" {
					t.Errorf("request %v: %v", id, got[id])
				}
			}
			if r, _ := got[3]["result"].(map[string]any); r["n"] != 3.0 {
				t.Errorf("request 3: %v", got[3])
			}
			if code(got[4]) != CodeInvalidParams {
				t.Errorf("request 4: %v", got[4])
			}
			select {
			case err := <-p.err:
				if err != nil {
					t.Fatalf("Run after a clean end of input: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return once every request was answered")
			}
		})
	}
}

// TestEOFWaitBound: requests still running EOFWait after the end of input are cancelled and
// answered -32800; one still queued then is answered -32800 without running.
func TestEOFWaitBound(t *testing.T) {
	h := newHolding()
	p := newEndPeer(t, context.Background(), h, Options{EOFWait: 200 * time.Millisecond}, true)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"slowhold"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"hold"}`)
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"keep"}`)
	<-h.started
	<-h.started
	start := time.Now()
	p.in.Close()
	got := p.answers(t, 3)
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("cancelled after %v, before EOFWait", waited)
	}
	for _, id := range []float64{1, 2, 3} {
		if code(got[id]) != codeRequestCancelled {
			t.Errorf("request %v: %v", id, got[id])
		}
	}
	select {
	case <-h.started:
		t.Fatal("a request still queued when the wait ran out ran anyway")
	default:
	}
	if err := <-p.err; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestConnectionEndAnswersCancelled: when the connection ends while its output still works
// (its Run context ends: the server shuts down), a running request cut short and the one
// read behind it are answered -32800; behind an inline request, the second never runs.
func TestConnectionEndAnswersCancelled(t *testing.T) {
	for _, method := range []string{"hold", "slowhold"} {
		t.Run(method, func(t *testing.T) {
			h := newHolding()
			runCtx, stop := context.WithCancel(context.Background())
			p := newEndPeer(t, runCtx, h, Options{}, true)
			p.send(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`)
			<-h.started
			p.send(t, `{"jsonrpc":"2.0","id":2,"method":"hold"}`) // queued behind 1 when inline
			if method == "slowhold" {
				<-h.started
			}
			stop()
			got := p.answers(t, 2)
			for _, id := range []float64{1, 2} {
				if code(got[id]) != codeRequestCancelled {
					t.Errorf("request %v: %v", id, got[id])
				}
			}
			select {
			case <-h.started:
				t.Fatal("the queued request ran after the connection ended")
			default:
			}
			p.in.Close()
		})
	}
}

// TestCloseWritesNothing: after Close this side writes nothing more, not even the -32800 of
// the requests it cut short (a client hanging up does not decline what it was holding), even
// when the framer's output stays open.
func TestCloseWritesNothing(t *testing.T) {
	for _, method := range []string{"hold", "slowhold"} {
		t.Run(method, func(t *testing.T) {
			h := newHolding()
			p := newEndPeer(t, context.Background(), h, Options{}, false)
			p.send(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`)
			ctx := <-h.started
			p.c.Close()
			await(t, ctx, method)
			<-p.c.done
			p.outW.Close()
			p.noMoreFrames(t)
		})
	}
}

// TestWriteFailureEndsConnection: once a write fails the connection ends (running requests are
// cancelled) and later writes are not attempted.
func TestWriteFailureEndsConnection(t *testing.T) {
	h := newHolding()
	var frames []string
	var mu sync.Mutex
	opts := Options{OnFrame: func(dir string, b []byte) {
		if dir == "out" {
			mu.Lock()
			frames = append(frames, string(b))
			mu.Unlock()
		}
	}}
	p := newEndPeer(t, context.Background(), h, opts, true)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"slowhold"}`)
	ctx := <-h.started
	p.outW.Close()
	if err := p.c.Notify("event", nil); err == nil {
		t.Fatal("a write to a closed output succeeded")
	}
	await(t, ctx, "slowhold")
	if err := p.c.Notify("event", nil); err == nil {
		t.Fatal("a write after a failed one succeeded")
	}
	p.in.Close()
	<-p.c.done
	mu.Lock()
	defer mu.Unlock()
	if len(frames) != 1 {
		t.Fatalf("frames attempted after the output failed: %q", frames)
	}
}
