package gwclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sync"

	"github.com/fasthttp/websocket"

	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// DialWS connects to a gateway WebSocket (ws://host/api/ws?token=…).
func DialWS(ctx context.Context, url string, header http.Header) (*Client, error) {
	d := websocket.Dialer{ReadBufferSize: 8 << 10, WriteBufferSize: 8 << 10}
	conn, resp, err := d.DialContext(ctx, url, header)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (HTTP %d)", url, err, resp.StatusCode)
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	conn.SetReadLimit(64 << 20)
	return New(&WSFramer{Conn: conn}), nil
}

// WSFramer carries one message per WebSocket text frame.
type WSFramer struct {
	Conn *websocket.Conn
	mu   sync.Mutex
}

// Read returns the next text message.
func (f *WSFramer) Read(context.Context) ([]byte, error) {
	for {
		mt, msg, err := f.Conn.ReadMessage()
		if err != nil {
			return nil, err // a *websocket.CloseError keeps its code (CloseCode)
		}
		if mt == websocket.TextMessage || mt == websocket.BinaryMessage {
			return msg, nil
		}
	}
}

// Write sends one text message.
func (f *WSFramer) Write(_ context.Context, msg []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Conn.WriteMessage(websocket.TextMessage, msg)
}

// Close closes the socket.
func (f *WSFramer) Close() error { return f.Conn.Close() }

// CloseCode reports the close code of a WebSocket that ended with a close frame, else 0.
func CloseCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

// Stdio starts a gateway subprocess and talks to it over its stdin/stdout. The process ends
// when the client closes its stdin.
func Stdio(cmd *exec.Cmd) (*Client, error) {
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
	c := New(jsonrpc.NewLineFramer(out, in, procCloser{in: in, cmd: cmd, once: new(sync.Once)}, 64<<20))
	return c, nil
}

type procCloser struct {
	in   io.Closer
	cmd  *exec.Cmd
	once *sync.Once
}

func (p procCloser) Close() error {
	var err error
	p.once.Do(func() {
		p.in.Close()
		err = p.cmd.Wait()
	})
	return err
}
