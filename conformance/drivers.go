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
}

func (stdioDriver) Greets() bool { return true }
func (wsDriver) Greets() bool    { return true }

// acpDriver runs `hermes acp`: ACP v1, newline-delimited JSON-RPC on stdio, client speaks first.
type acpDriver struct{}

func (acpDriver) Name() string { return "acp-stdio" }

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
	used bool
	cmd  *exec.Cmd
}

func (s *stdioServer) Connect() (Conn, error) {
	if s.used {
		return nil, ErrOneConnection
	}
	s.used = true
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
	s.cmd = cmd
	return newLineConn(out, in, cmd), nil
}

func (s *stdioServer) Close() error { return nil }

// lineConn reads newline-delimited frames on a goroutine so Recv can honour a deadline.
type lineConn struct {
	w      io.WriteCloser
	frames chan []byte
	errc   chan error
	cmd    *exec.Cmd
	once   sync.Once
}

func newLineConn(r io.Reader, w io.WriteCloser, cmd *exec.Cmd) *lineConn {
	c := &lineConn{w: w, frames: make(chan []byte, 1024), errc: make(chan error, 1), cmd: cmd}
	go func() {
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(strings.TrimSpace(string(line))) > 0 {
				c.frames <- line
			}
			if err != nil {
				c.errc <- err
				return
			}
		}
	}()
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

func (c *lineConn) Close() error {
	c.once.Do(func() {
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
	})
	return nil
}

type wsDriver struct{}

func (wsDriver) Name() string { return "gateway-ws" }

const wsKey = "conformance-key-0123456789"

var listening = regexp.MustCompile(`listening on http://(\S+)`)

// Start runs `hermes serve` on a free loopback port and waits until it listens.
func (wsDriver) Start(env Env) (Server, error) {
	cmd := exec.Command(env.Binary, "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = env.Dir
	cmd.Env = append(append(os.Environ(), env.Vars...), "HERMES_API_KEY="+wsKey)
	errOut, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return &wsServer{cmd: cmd, url: "ws://" + a + "/api/ws?token=" + wsKey}, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, errors.New("hermes serve did not start listening")
	}
}

// TargetServer connects to an already running server (hermes conformance --target URL).
func TargetServer(url string) Server { return &wsServer{url: url} }

type wsServer struct {
	cmd *exec.Cmd
	url string
}

func (s *wsServer) Connect() (Conn, error) {
	c, _, err := websocket.DefaultDialer.Dial(s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", s.url, err)
	}
	c.SetReadLimit(64 << 20)
	wc := &wsConn{c: c, frames: make(chan []byte, 1024), errc: make(chan error, 1)}
	go func() {
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				wc.errc <- err
				return
			}
			wc.frames <- msg
		}
	}()
	return wc, nil
}

func (s *wsServer) Close() error {
	if s.cmd == nil {
		return nil
	}
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	return nil
}

type wsConn struct {
	c      *websocket.Conn
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

func (c *wsConn) Close() error { return c.c.Close() }
