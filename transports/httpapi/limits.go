package httpapi

import (
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Limits bound the connections of the server. A zero field takes its default (the
// Default* constants); a negative one switches that limit off.
type Limits struct {
	// ReadHeaderTimeout is how long a new connection may take to send its first request
	// line and headers, and how long a keep-alive connection may take over the headers once
	// the first byte of its next request arrived. It is what closes half-open and slowloris
	// connections. The WebSocket opening handshake is such a request and is bound by it too.
	ReadHeaderTimeout time.Duration
	// ReadTimeout is how long reading a request body may take after its headers.
	ReadTimeout time.Duration
	// WriteTimeout is how long one write to a client may stall: a client that stops reading
	// is cut off. It is not a limit on a whole response, so an event stream or a WebSocket
	// that its client keeps reading lives as long as it has something to say.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next request.
	IdleTimeout time.Duration
	// MaxConns caps the open connections (HTTP, event streams and WebSockets together).
	// A connection over the cap is refused at once with a 503 and Connection: close.
	MaxConns int
	// MaxConnsPerIP caps the open connections from one remote address, refused the same
	// way. Behind a reverse proxy every connection comes from the proxy: raise it there.
	MaxConnsPerIP int
	// WSPingInterval is how often the server pings a WebSocket client.
	WSPingInterval time.Duration
	// WSPongTimeout is how long after a ping the client may stay silent (no pong, no
	// message) before the server closes the connection as dead.
	WSPongTimeout time.Duration
}

// Defaults of Limits, sized for 10,000 concurrent event streams on one process.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConns          = 16384
	DefaultMaxConnsPerIP     = 4096
	DefaultWSPingInterval    = 30 * time.Second
	DefaultWSPongTimeout     = 30 * time.Second
)

// forever stands for "no timeout" where fasthttp reads 0 as "use another timeout".
const forever = 100 * 365 * 24 * time.Hour

// withDefaults fills zero fields; negative fields become 0 (off).
func (l Limits) withDefaults() Limits {
	dur := func(d *time.Duration, def time.Duration) {
		switch {
		case *d == 0:
			*d = def
		case *d < 0:
			*d = 0
		}
	}
	num := func(n *int, def int) {
		switch {
		case *n == 0:
			*n = def
		case *n < 0:
			*n = 0
		}
	}
	dur(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	dur(&l.ReadTimeout, DefaultReadTimeout)
	dur(&l.WriteTimeout, DefaultWriteTimeout)
	dur(&l.IdleTimeout, DefaultIdleTimeout)
	num(&l.MaxConns, DefaultMaxConns)
	num(&l.MaxConnsPerIP, DefaultMaxConnsPerIP)
	dur(&l.WSPingInterval, DefaultWSPingInterval)
	dur(&l.WSPongTimeout, DefaultWSPongTimeout)
	return l
}

// initLimits applies the timeouts to the fasthttp server. fasthttp's own WriteTimeout stays
// 0: it would be one deadline for a whole response, which ends every event stream after
// it; the listener's connections apply WriteTimeout to each write instead.
func (s *Server) initLimits() {
	l := s.opts.Limits.withDefaults()
	s.opts.Limits = l
	srv := s.app.Server()
	// fasthttp's ReadTimeout covers the wait for the first byte of a new connection and the
	// headers; HeaderReceived then moves the deadline to the body's.
	srv.ReadTimeout = l.ReadHeaderTimeout
	srv.WriteTimeout = 0
	srv.IdleTimeout = l.IdleTimeout
	if l.IdleTimeout == 0 {
		srv.IdleTimeout = forever // 0 would mean ReadTimeout to fasthttp
	}
	body := l.ReadTimeout
	if body == 0 {
		body = forever
	}
	srv.HeaderReceived = func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
		return fasthttp.RequestConfig{ReadTimeout: body}
	}
	srv.ConnState = func(c net.Conn, st fasthttp.ConnState) {
		if lc, ok := c.(*limitConn); ok {
			lc.state.Store(int32(st))
		}
	}
}

// limitListener counts the open connections, in total and per remote address, refuses those
// over a cap, applies the write timeout to every connection, and never hands an accept error
// other than "closed" to the server: it backs off and accepts again, as net/http does.
type limitListener struct {
	net.Listener
	max, perIP   int
	writeTimeout time.Duration
	log          *slog.Logger

	mu     sync.Mutex
	conns  map[*limitConn]struct{}
	byIP   map[string]int
	closed bool

	refused   atomic.Int64
	acceptErr atomic.Int64
	onReject  func(reason string) // Options.OnReject; nil when unset
	// sleep is time.Sleep; tests replace it.
	sleep func(time.Duration)
}

func newLimitListener(ln net.Listener, l Limits, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: l.MaxConns, perIP: l.MaxConnsPerIP, writeTimeout: l.WriteTimeout, log: log,
		conns: map[*limitConn]struct{}{}, byIP: map[string]int{}, sleep: time.Sleep}
}

// refusal is the answer to a refused connection, written before anything is read from it.
func refusal(msg string) []byte {
	body := msg + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

var (
	refuseTotal = refusal("too many open connections")
	refuseIP    = refusal("too many open connections from your address")
)

// Accept returns the next connection within the caps.
func (l *limitListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			// EMFILE, ENFILE, ECONNABORTED and friends: the listener is still good. Wait
			// (5 ms doubling to 1 s) so the descriptors held can be given back, then retry.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay *= 2; delay > time.Second {
				delay = time.Second
			}
			if l.acceptErr.Add(1) == 1 || delay == time.Second {
				l.log.Warn("accept failed; retrying", "err", err, "retry_in", delay)
			}
			l.sleep(delay)
			continue
		}
		delay = 0
		ip := remoteIP(c)
		l.mu.Lock()
		switch {
		case l.closed:
			l.mu.Unlock()
			_ = c.Close()
			return nil, net.ErrClosed
		case l.max > 0 && len(l.conns) >= l.max:
			l.mu.Unlock()
			if l.onReject != nil {
				l.onReject("max_conns")
			}
			l.refuse(c, refuseTotal)
			continue
		case l.perIP > 0 && l.byIP[ip] >= l.perIP:
			l.mu.Unlock()
			if l.onReject != nil {
				l.onReject("max_conns_per_ip")
			}
			l.refuse(c, refuseIP)
			continue
		}
		lc := &limitConn{Conn: c, l: l, ip: ip, writeTimeout: l.writeTimeout}
		l.conns[lc] = struct{}{}
		l.byIP[ip]++
		l.mu.Unlock()
		return lc, nil
	}
}

// refuse answers a connection over a cap with a 503 and closes it. The write goes to an
// empty socket buffer, so it does not block the accept loop; the deadline is a safeguard.
func (l *limitListener) refuse(c net.Conn, msg []byte) {
	if n := l.refused.Add(1); n == 1 || n%1000 == 0 {
		l.log.Warn("connection refused over the connection cap", "remote", remoteIP(c), "refused_total", n)
	}
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write(msg)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite() // FIN after the answer, so the client reads it
	}
	_ = c.Close()
}

// listeners are the listeners a Server serves on, for Shutdown.
type listeners struct {
	mu   sync.Mutex
	list []*limitListener
	shut bool // close was called: no listener is taken after it
}

// add takes l for Shutdown to close; false once Shutdown began (l is not to be served).
func (ls *listeners) add(l *limitListener) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.shut {
		return false
	}
	ls.list = append(ls.list, l)
	return true
}

// close stops every listener from accepting, and any added later.
func (ls *listeners) close() {
	ls.mu.Lock()
	ls.shut = true
	list := ls.list
	ls.mu.Unlock()
	for _, l := range list {
		_ = l.Close()
	}
}

// closeConns closes the matching connections of every listener.
func (ls *listeners) closeConns(states ...fasthttp.ConnState) {
	ls.mu.Lock()
	list := ls.list
	ls.mu.Unlock()
	for _, l := range list {
		l.closeConns(states...)
	}
}

// Close stops accepting. Closing again does nothing (Shutdown closes the listeners before
// fasthttp does).
func (l *limitListener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	return l.Listener.Close()
}

// closeConns closes the open connections in one of the given states (all when none given).
func (l *limitListener) closeConns(states ...fasthttp.ConnState) {
	l.mu.Lock()
	var victims []*limitConn
	for c := range l.conns {
		st := fasthttp.ConnState(c.state.Load())
		if len(states) == 0 {
			victims = append(victims, c)
			continue
		}
		for _, want := range states {
			if st == want {
				victims = append(victims, c)
			}
		}
	}
	l.mu.Unlock()
	for _, c := range victims {
		_ = c.Close()
	}
}

func remoteIP(c net.Conn) string {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case nil:
		return ""
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		return host
	}
}

// limitConn is an accepted connection: it leaves the counts when closed, and bounds each
// write by the write timeout (or an earlier deadline its user set).
type limitConn struct {
	net.Conn
	l            *limitListener
	ip           string
	writeTimeout time.Duration
	state        atomic.Int32 // fasthttp.ConnState
	once         sync.Once
	// deadline is the write deadline set by the connection's user (unix nanoseconds, 0 for
	// none).
	deadline atomic.Int64
}

func (c *limitConn) Write(b []byte) (int, error) {
	if c.writeTimeout > 0 {
		d := time.Now().Add(c.writeTimeout)
		if u := c.deadline.Load(); u != 0 && u < d.UnixNano() {
			d = time.Unix(0, u)
		}
		if err := c.Conn.SetWriteDeadline(d); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

func (c *limitConn) SetWriteDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitConn) SetDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *limitConn) noteDeadline(t time.Time) {
	if t.IsZero() {
		c.deadline.Store(0)
	} else {
		c.deadline.Store(t.UnixNano())
	}
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		l := c.l
		l.mu.Lock()
		delete(l.conns, c)
		if l.byIP[c.ip]--; l.byIP[c.ip] <= 0 {
			delete(l.byIP, c.ip)
		}
		l.mu.Unlock()
	})
	return err
}
