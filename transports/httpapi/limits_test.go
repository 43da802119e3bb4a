package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/hermes-go/hermes/internal/loadgen"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// The limits tests run real servers on 127.0.0.1 with short limits. A client read deadline is
// only a bound on how long a test waits for what it expects; no test asserts a duration.

// waitClosed reads from c until the server closes it and returns what it read; it fails
// the test if c is still open after the bound.
func waitClosed(t *testing.T, c net.Conn, bound time.Duration) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(bound))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open (read %q)", b)
	}
	return string(b)
}

func dialFrom(t *testing.T, base, local string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// healthOn sends GET /health on c and returns the status line.
func healthOn(c net.Conn) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Status, nil
}

// Connections that never send a request, or send half of its headers, are closed by the
// server after the header timeout, and the server goes on answering.
func TestHalfOpenConnectionsClosedAfterHeaderTimeout(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) {
		o.Limits = httpapi.Limits{ReadHeaderTimeout: 300 * time.Millisecond}
	})
	const n = 20
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dialFrom(t, tg.base, "")
		if i%2 == 1 {
			if _, err := io.WriteString(conns[i], "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	var open atomic.Int32
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			_, err := io.ReadAll(c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				open.Add(1)
			}
		})
	}
	wg.Wait()
	if k := open.Load(); k > 0 {
		t.Fatalf("%d of %d half-open connections were never closed by the server", k, n)
	}
	if st, err := healthOn(dialFrom(t, tg.base, "")); err != nil || !strings.HasPrefix(st, "200") {
		t.Fatalf("/health after the half-open connections: %q, %v", st, err)
	}
}

// Over the per-address cap a connection gets a 503 with Connection: close; another address
// is still served, and the address is served again once one of its connections closed.
func TestConnectionsOverPerIPCapRefused(t *testing.T) {
	const perIP = 5
	tg := newTarget(t, func(o *httpapi.Options) {
		o.Limits = httpapi.Limits{MaxConnsPerIP: perIP, ReadHeaderTimeout: time.Minute}
	})
	held := make([]net.Conn, perIP)
	for i := range held {
		held[i] = dialFrom(t, tg.base, "127.0.0.1")
	}
	// Held connections are accepted in order, so the next one is over the cap.
	over := dialFrom(t, tg.base, "127.0.0.1")
	got := waitClosed(t, over, 10*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "Connection: close") {
		t.Fatalf("over the cap: got %q, want a 503 with Connection: close", got)
	}
	// Another address is not affected (the loopback network answers from any 127/8 address).
	if st, err := healthOn(dialFrom(t, tg.base, "127.0.0.2")); err != nil || !strings.HasPrefix(st, "200") {
		t.Fatalf("/health from another address: %q, %v", st, err)
	}
	// The held connections themselves are served.
	if st, err := healthOn(held[0]); err != nil || !strings.HasPrefix(st, "200") {
		t.Fatalf("/health on a held connection: %q, %v", st, err)
	}
	// A closed connection frees its place.
	held[1].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := healthOn(dialFrom(t, tg.base, "127.0.0.1"))
		if err == nil && strings.HasPrefix(st, "200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health after a held connection closed: %q, %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Over the total cap every address is refused.
func TestConnectionsOverTotalCapRefused(t *testing.T) {
	const total = 4
	tg := newTarget(t, func(o *httpapi.Options) {
		o.Limits = httpapi.Limits{MaxConns: total, ReadHeaderTimeout: time.Minute}
	})
	for i := range total {
		dialFrom(t, tg.base, fmt.Sprintf("127.0.0.%d", i+1))
	}
	got := waitClosed(t, dialFrom(t, tg.base, "127.0.0.9"), 10*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 503") {
		t.Fatalf("over the total cap: got %q, want a 503", got)
	}
}

// emfileListener fails its first accepts with EMFILE, as a process out of descriptors does.
type emfileListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// An accept error does not end Serve: the server backs off and serves the next connection.
func TestAcceptErrorsDoNotEndServer(t *testing.T) {
	tg := newTarget(t, nil)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &emfileListener{Listener: inner}
	ln.fails.Store(6)
	served := make(chan error, 1)
	go func() { served <- tg.srv.Serve(ln) }()
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := healthOn(c)
	select {
	case err := <-served:
		t.Fatalf("Serve returned after accept errors: %v", err)
	default:
	}
	if err != nil || !strings.HasPrefix(st, "200") {
		t.Fatalf("/health after accept errors: %q, %v", st, err)
	}
	if ln.fails.Load() >= 0 {
		t.Fatalf("the failing accepts were not all tried")
	}
}

// A WebSocket peer that stops answering pings is closed; one that answers stays open.
func TestWebSocketDeadPeerClosed(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) {
		o.Limits = httpapi.Limits{WSPingInterval: 100 * time.Millisecond, WSPongTimeout: 200 * time.Millisecond}
	})
	// A live client: its reader answers pings (the library's default ping handler).
	live, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(tg.base, "http")+"/api/ws?token="+testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	pings := make(chan struct{}, 100)
	live.SetPingHandler(func(data string) error {
		select {
		case pings <- struct{}{}:
		default:
		}
		return live.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	frames := make(chan []byte, 16)
	go func() {
		defer close(frames)
		for {
			_, msg, err := live.ReadMessage()
			if err != nil {
				return
			}
			frames <- msg
		}
	}()

	// A dead peer: it upgrades, then never reads or answers anything.
	dead := dialFrom(t, tg.base, "")
	fmt.Fprintf(dead, "GET /api/ws?token=%s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", testKey)
	br := bufio.NewReader(dead)
	_ = dead.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	_ = dead.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err = io.Copy(io.Discard, br) // pings, then the end of the connection
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a peer that answers no ping was never closed")
	}

	// The live client saw pings, answered them, and is still served.
	select {
	case <-pings:
	case <-time.After(10 * time.Second):
		t.Fatal("the live client was never pinged")
	}
	if err := live.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"session.list","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for answered := false; !answered; {
		select {
		case msg, ok := <-frames:
			if !ok {
				t.Fatal("the live client was closed")
			}
			answered = strings.Contains(string(msg), `"id":1`)
		case <-timeout:
			t.Fatal("the live client got no answer")
		}
	}
}

// An event stream that its client keeps reading outlives every timeout many times over: the
// write timeout bounds one write, not the response.
func TestSSEStreamOutlivesTimeouts(t *testing.T) {
	release := make(chan struct{})
	const short = 150 * time.Millisecond
	tg := newTargetWith(t, held{release: release}, func(o *httpapi.Options) {
		o.KeepAlive = 50 * time.Millisecond
		o.Limits = httpapi.Limits{ReadHeaderTimeout: short, ReadTimeout: short, WriteTimeout: short, IdleTimeout: short}
	})
	lt := &loadgen.Target{BaseURL: tg.base + "/v1", APIKey: testKey, Client: loadgen.NewClient(2)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := lt.OpenStream(ctx, "/chat/completions", []byte(`{"model":"openai:fake-agent","stream":true,"messages":[{"role":"user","content":"hold"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(10*short, func() { close(release) })
	r, err := s.Drain()
	if err != nil {
		t.Fatalf("the stream broke: %v", err)
	}
	if r.Text != "held released" {
		t.Fatalf("stream text %q", r.Text)
	}
}
