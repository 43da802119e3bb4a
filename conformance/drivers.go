package conformance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
)

// Env is where one fixture runs: a fresh HERMES_HOME and working directory, and the
// environment that points hermes at the fixture's cassette and policy.
type Env struct {
	Binary string   // the hermes build under test
	Dir    string   // working directory
	Vars   []string // KEY=VALUE additions to the environment
}

// Conn is one client connection to a server under test.
type Conn interface {
	Send(frame []byte) error
	Recv(ctx context.Context) ([]byte, error)
	Close() error
}

// Server is a running build under test.
type Server interface {
	Connect() (Conn, error)
	Close() error
}

// Driver starts a build for a transport. Adding a transport is adding a Driver.
type Driver interface {
	Name() string
	Start(env Env) (Server, error)
}

// Greeter is an optional Driver ability: the server speaks first on every new connection
// (the gateway's gateway.ready), and the runner records that frame before the first step.
type Greeter interface {
	Greets() bool
}

// Drivers are the transports the runner knows.
var Drivers = map[string]Driver{
	"gateway-stdio": stdioDriver{},
	"gateway-ws":    wsDriver{},
	"acp-stdio":     acpDriver{},
	"http":          httpDriver{},
	"cli":           cliDriver{},
}

func (stdioDriver) Greets() bool { return true }
func (wsDriver) Greets() bool    { return true }

// acpDriver runs `hermes acp`: ACP v1, newline-delimited JSON-RPC on stdio, client speaks first.
type acpDriver struct{}

func (acpDriver) Name() string     { return "acp-stdio" }
func (acpDriver) Dialect() Dialect { return acpDialect{} }

// acpDialect is JSON-RPC whose events are session/update notifications, named by their
// sessionUpdate kind (agent_message_chunk, tool_call, …).
type acpDialect struct{ jsonRPC }

func (d acpDialect) Event(m map[string]any) string {
	if m["method"] != "session/update" {
		return d.jsonRPC.Event(m)
	}
	p, _ := m["params"].(map[string]any)
	u, _ := p["update"].(map[string]any)
	t, _ := u["sessionUpdate"].(string)
	return t
}

func (d acpDialect) Until(m map[string]any, name string) bool {
	return m["method"] == name || d.Event(m) == name
}

func (acpDriver) Start(env Env) (Server, error) {
	return &stdioServer{env: env, args: []string{"acp"}}, nil
}

// ErrOneConnection is returned by servers that serve a single connection (stdio).
var ErrOneConnection = errors.New("this transport serves one connection per process")

type stdioDriver struct{}

func (stdioDriver) Name() string { return "gateway-stdio" }

func (stdioDriver) Start(env Env) (Server, error) {
	return &stdioServer{env: env, args: []string{"gateway"}}, nil
}

type stdioServer struct {
	env  Env
	args []string // default: gateway
	conn *lineConn
}

// Connect starts the process. A later Connect, after the previous connection closed (and so
// its process exited), starts a new process on the same home: a restart, which is how a
// stdio fixture shows what persists (ACP session/load).
func (s *stdioServer) Connect() (Conn, error) {
	if s.conn != nil && !s.conn.closed() {
		return nil, ErrOneConnection
	}
	args := s.args
	if len(args) == 0 {
		args = []string{"gateway"}
	}
	cmd := exec.Command(s.env.Binary, args...)
	cmd.Dir = s.env.Dir
	cmd.Env = append(os.Environ(), s.env.Vars...)
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.conn = newLineConn(out, in, cmd)
	return s.conn, nil
}

func (s *stdioServer) Close() error {
	if s.conn != nil {
		return s.conn.Close()
	}
	return nil
}

// lineConn reads newline-delimited frames on a goroutine so Recv can honour a deadline.
type lineConn struct {
	w      io.WriteCloser
	frames chan []byte
	errc   chan error
	cmd    *exec.Cmd
	once   sync.Once
	stop   chan struct{} // closed by Close: the reader stops delivering
	reader sync.WaitGroup
	done   chan struct{} // closed when Close has finished
}

func newLineConn(r io.Reader, w io.WriteCloser, cmd *exec.Cmd) *lineConn {
	c := &lineConn{w: w, frames: make(chan []byte, 1024), errc: make(chan error, 1), cmd: cmd,
		stop: make(chan struct{}), done: make(chan struct{})}
	c.reader.Go(func() {
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(strings.TrimSpace(string(line))) > 0 {
				select {
				case c.frames <- line:
				case <-c.stop:
					return
				}
			}
			if err != nil {
				c.errc <- err
				return
			}
		}
	})
	return c
}

func (c *lineConn) Send(frame []byte) error {
	_, err := c.w.Write(append(append([]byte(nil), frame...), '\n'))
	return err
}

func (c *lineConn) Recv(ctx context.Context) ([]byte, error) {
	select {
	case f := <-c.frames:
		return f, nil
	case err := <-c.errc:
		c.errc <- err
		select {
		case f := <-c.frames:
			return f, nil
		default:
		}
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *lineConn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Close ends stdin and waits for the process to exit (killing it after ten seconds).
func (c *lineConn) Close() error {
	c.once.Do(func() {
		defer close(c.done)
		close(c.stop)
		c.w.Close()
		if c.cmd != nil {
			done := make(chan struct{})
			go func() { c.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				c.cmd.Process.Kill()
				<-done
			}
		}
		c.reader.Wait() // the process is gone, so its stdout is at EOF
	})
	return nil
}

type wsDriver struct{}

func (wsDriver) Name() string { return "gateway-ws" }

// serveKey is the API key the drivers start `hermes serve` with.
const serveKey = "conformance-key-0123456789"

var listening = regexp.MustCompile(`listening on http://(\S+)`)

// Start runs `hermes serve` on a free loopback port and waits until it listens.
func (wsDriver) Start(env Env) (Server, error) {
	p, err := startServe(env)
	if err != nil {
		return nil, err
	}
	return &wsServer{proc: p, url: "ws://" + p.addr + "/api/ws?token=" + serveKey}, nil
}

// serveProc is a `hermes serve` subprocess listening on a loopback port.
type serveProc struct {
	cmd  *exec.Cmd
	addr string
	logs sync.WaitGroup // drains the log until the process exits
}

// startServe starts `hermes serve --addr 127.0.0.1:0` with the conformance API key and reads
// the address it bound from its log.
func startServe(env Env) (*serveProc, error) {
	cmd := exec.Command(env.Binary, "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = env.Dir
	cmd.Env = append(append(os.Environ(), env.Vars...), "HERMES_API_KEY="+serveKey)
	errOut, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serveProc{cmd: cmd}
	addr := make(chan string, 1)
	p.logs.Go(func() {
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		close(addr)
	})
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case a, ok := <-addr:
		if ok {
			p.addr = a
			return p, nil
		}
		p.stop()
		return nil, errors.New("hermes serve exited before it listened")
	case <-timeout.C:
		p.stop()
		return nil, errors.New("hermes serve did not start listening")
	}
}

// stop asks the server to shut down (SIGINT), kills it if it lingers, and waits for it.
func (p *serveProc) stop() {
	p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { p.logs.Wait(); p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// TargetServer connects to an already running gateway WebSocket (hermes conformance --target ws://…).
func TargetServer(url string) Server { return &wsServer{url: url} }

type wsServer struct {
	proc *serveProc // nil for a server someone else runs
	url  string
	mu   sync.Mutex
	ctls []*controller // browser controllers a fixture connected
}

func (s *wsServer) Connect() (Conn, error) {
	c, _, err := websocket.DefaultDialer.Dial(s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", s.url, err)
	}
	c.SetReadLimit(64 << 20)
	wc := &wsConn{c: c, frames: make(chan []byte, 1024), errc: make(chan error, 1)}
	wc.reader.Go(func() {
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				wc.errc <- err
				return
			}
			wc.frames <- msg
		}
	})
	return wc, nil
}

func (s *wsServer) Close() error {
	s.closeControllers()
	if s.proc != nil {
		s.proc.stop()
	}
	return nil
}

type wsConn struct {
	c      *websocket.Conn
	reader sync.WaitGroup
	mu     sync.Mutex
	frames chan []byte
	errc   chan error
}

func (c *wsConn) Send(frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.WriteMessage(websocket.TextMessage, frame)
}

func (c *wsConn) Recv(ctx context.Context) ([]byte, error) {
	select {
	case f := <-c.frames:
		return f, nil
	case err := <-c.errc:
		c.errc <- err
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the connection and waits for its reader.
func (c *wsConn) Close() error {
	err := c.c.Close()
	c.reader.Wait()
	return err
}
