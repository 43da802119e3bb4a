package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// blocking is a handler whose "block" (inline) and "slow" (async) methods report their
// context and wait for it to end; "keep" reports its context and answers at once; "boom"
// panics; anything else echoes.
type blocking struct {
	started chan context.Context
}

func newBlocking() *blocking { return &blocking{started: make(chan context.Context, 8)} }

func (b *blocking) Async(method string) bool { return method == "slow" }

func (b *blocking) Handle(ctx context.Context, _ *Conn, r *Request) (any, error) {
	switch r.Method {
	case "block", "slow":
		b.started <- ctx
		<-ctx.Done()
		return nil, ctx.Err()
	case "keep":
		b.started <- ctx
		return "kept", nil
	case "boom":
		panic("secret detail from the handler")
	}
	return r.Params, nil
}

// logSink records log records as text.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// newLoggedPeer is newPeer with the connection's logger writing to the returned sink, the
// connection run under ctx, and a goroutine-leak check when the test ends.
func newLoggedPeer(t *testing.T, ctx context.Context, h Handler) (*pipePeer, *logSink) {
	t.Helper()
	checkGoroutines(t)
	sink := &logSink{}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := NewConn(NewLineFramer(inR, outW, multiCloser{inR, outW}, 0), h, Options{Logger: slog.New(slog.NewJSONHandler(sink, nil))})
	p := &pipePeer{in: inW, out: bufio.NewReader(outR), c: c, err: make(chan error, 1)}
	go func() { p.err <- c.Run(ctx) }()
	t.Cleanup(func() { inW.Close(); outR.Close(); <-p.c.done })
	return p, sink
}

// checkGoroutines fails the test if, once its other cleanups have run, more goroutines are
// left than it started with. Goroutines take a moment to exit after what ends them, so the
// count is polled until it settles.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		n := 0
		for i := 0; i < 500; i++ {
			if n = runtime.NumGoroutine(); n <= before {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines left behind (%d before the test):\n%s", n-before, before, buf)
	})
}

// await waits for ctx to end, failing the test if it never does.
func await(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the request's context never ended", what)
	}
}

// TestCancelRequest: $/cancelRequest ends the named request's context, inline or async,
// even while that request holds the dispatcher; its answer is -32800 under its own id, and
// the connection carries on.
func TestCancelRequest(t *testing.T) {
	for _, method := range []string{"block", "slow"} {
		t.Run(method, func(t *testing.T) {
			b := newBlocking()
			p, _ := newLoggedPeer(t, context.Background(), b)
			p.send(t, `{"jsonrpc":"2.0","id":"r1","method":"`+method+`"}`)
			ctx := <-b.started
			p.send(t, `{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"r\u0031"}}`)
			await(t, ctx, method)
			if !errors.Is(context.Cause(ctx), errCancelled) {
				t.Fatalf("cause %v", context.Cause(ctx))
			}
			m := p.recv(t)
			if m["id"] != "r1" || code(m) != codeRequestCancelled {
				t.Fatalf("cancelled request answered %v", m)
			}
			p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"ok":true}}`)
			if m := p.recv(t); m["id"] != 2.0 || m["result"].(map[string]any)["ok"] != true {
				t.Fatalf("after cancel: %v", m)
			}
		})
	}
}

// TestCancelQueuedRequest: a request cancelled while it waits behind an inline one is
// answered -32800 without running, and the request form of $/cancelRequest is answered {}.
func TestCancelQueuedRequest(t *testing.T) {
	b := newBlocking()
	p, _ := newLoggedPeer(t, context.Background(), b)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"block"}`)
	first := <-b.started
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"keep"}`)
	p.send(t, `{"jsonrpc":"2.0","id":"c","method":"$/cancelRequest","params":{"id":2}}`)
	if m := p.recv(t); m["id"] != "c" || m["error"] != nil {
		t.Fatalf("cancel sent as a request: %v", m)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`)
	await(t, first, "block")
	for _, want := range []float64{1, 2} {
		if m := p.recv(t); m["id"] != want || code(m) != codeRequestCancelled {
			t.Fatalf("want %v cancelled, got %v", want, m)
		}
	}
	select {
	case <-b.started:
		t.Fatal("a request cancelled before it started ran anyway")
	default:
	}
}

// TestRequestContextEndsWithConnection: a handler waiting on its context is released when
// the connection is closed or its Run context ends.
func TestRequestContextEndsWithConnection(t *testing.T) {
	for _, method := range []string{"block", "slow"} {
		t.Run(method+"/close", func(t *testing.T) {
			b := newBlocking()
			p, _ := newLoggedPeer(t, context.Background(), b)
			p.send(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`)
			ctx := <-b.started
			p.c.Close()
			await(t, ctx, method)
		})
		t.Run(method+"/run-context", func(t *testing.T) {
			b := newBlocking()
			runCtx, stop := context.WithCancel(context.Background())
			p, _ := newLoggedPeer(t, runCtx, b)
			p.send(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`)
			ctx := <-b.started
			stop()
			await(t, ctx, method)
			p.in.Close()
		})
	}
}

// TestRequestContextEndsAfterResponse: a request's context is its own: it ends once the
// response is written, while the connection lives on.
func TestRequestContextEndsAfterResponse(t *testing.T) {
	b := newBlocking()
	p, _ := newLoggedPeer(t, context.Background(), b)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"keep"}`)
	ctx := <-b.started
	if m := p.recv(t); m["result"] != "kept" {
		t.Fatalf("keep: %v", m)
	}
	await(t, ctx, "keep")
	if p.c.Context().Err() != nil {
		t.Fatal("the connection's context ended with the request's")
	}
	p.send(t, `{"jsonrpc":"2.0","method":"keep"}`) // a notification: ended once handled
	await(t, <-b.started, "notification")
}

// TestPanicLoggedAndAnswered: a panicking handler is answered -32603 under its id without the
// panic's text or stack, the panic and its stack go to the connection's logger, and the
// connection serves the next request.
func TestPanicLoggedAndAnswered(t *testing.T) {
	for _, async := range []bool{false, true} {
		name := "inline"
		var h Handler = newBlocking()
		if async {
			name = "async"
			h = asyncAll{h}
		}
		t.Run(name, func(t *testing.T) {
			p, sink := newLoggedPeer(t, context.Background(), h)
			p.send(t, `{"jsonrpc":"2.0","id":"p1","method":"boom"}`)
			raw := p.recvRaw(t)
			if string(raw) != `{"jsonrpc":"2.0","id":"p1","error":{"code":-32603,"message":"internal error"}}` {
				t.Fatalf("panic answered %s", raw)
			}
			logs := sink.String()
			for _, want := range []string{"panicked", "secret detail from the handler", `"method":"boom"`, "runtime/debug.Stack", "(*blocking).Handle"} {
				if !strings.Contains(logs, want) {
					t.Errorf("log lacks %q:\n%s", want, logs)
				}
			}
			p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"ok":true}}`)
			if m := p.recv(t); m["id"] != 2.0 || m["result"].(map[string]any)["ok"] != true {
				t.Fatalf("after the panic: %v", m)
			}
		})
	}
}

// asyncAll runs every method off the dispatcher.
type asyncAll struct{ Handler }

func (asyncAll) Async(string) bool { return true }
