// Package gwclient is a small TUI-gateway client: it speaks the gateway's JSON-RPC over any
// framer (a `hermes gateway` subprocess's pipes, a WebSocket), collects events and
// server→client requests, and answers them. Tests and the conformance runner use it.
package gwclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// Event is an event notification's params.
type Event struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Seq       uint64          `json:"seq,omitempty"`
	// Received is when the frame was read (for latency measurements).
	Received time.Time `json:"-"`
}

// Decode unmarshals the payload into v.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Payload, v) }

// Orphan is a response to no call of ours: the answer to a raw frame, or an error with a null
// id for a frame the server could not read.
type Orphan struct {
	ID     string
	Result json.RawMessage
	Err    *jsonrpc.Error
}

// WaitOrphan waits for the next orphan response.
func (c *Client) WaitOrphan(ctx context.Context) (Orphan, error) {
	for {
		c.mu.Lock()
		if len(c.orphans) > 0 {
			o := c.orphans[0]
			c.orphans = c.orphans[1:]
			c.mu.Unlock()
			return o, nil
		}
		ch, done := c.changed, c.done
		c.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return Orphan{}, fmt.Errorf("connection ended: %w", c.Err())
		case <-ctx.Done():
			return Orphan{}, ctx.Err()
		}
	}
}

// Request is a server→client request waiting for Answer or Decline.
type Request struct {
	ID     string
	Method string
	Params map[string]any
	reply  chan reply
}

type reply struct {
	res any
	err error
}

// Client is one gateway connection.
type Client struct {
	conn *jsonrpc.Conn

	mu       sync.Mutex
	events   []Event
	requests []*Request
	orphans  []Orphan
	frames   []string      // "event:<type>" or "response:<id>", in arrival order
	changed  chan struct{} // closed and replaced on every new event or request
	lastID   atomic.Value
	done     chan struct{}
	runErr   error
}

// New starts a client over f. It reads until the connection ends.
func New(f jsonrpc.Framer) *Client {
	c := &Client{changed: make(chan struct{}), done: make(chan struct{})}
	c.lastID.Store("")
	c.conn = jsonrpc.NewConn(f, handler{c}, jsonrpc.Options{IDPrefix: "cli-", OnFrame: c.onFrame, OnResponse: func(id string, res json.RawMessage, err *jsonrpc.Error) {
		c.mu.Lock()
		c.orphans = append(c.orphans, Orphan{ID: id, Result: res, Err: err})
		c.notifyLocked()
		c.mu.Unlock()
	}})
	go func() {
		err := c.conn.Run(context.Background())
		c.mu.Lock()
		c.runErr = err
		close(c.done)
		c.notifyLocked()
		c.mu.Unlock()
	}()
	return c
}

type handler struct{ c *Client }

// Async runs server→client requests on their own goroutine (they wait for the test) while
// events are recorded inline, in arrival order.
func (handler) Async(method string) bool { return method != "event" }

// errServerGone answers a server→client request still waiting when the server's output ends
// (the server has gone): the connection then ends at once rather than wait for the test.
var errServerGone = errors.New("the gateway's output ended")

func (h handler) Handle(ctx context.Context, conn *jsonrpc.Conn, r *jsonrpc.Request) (any, error) {
	c := h.c
	if r.IsNotification() {
		if r.Method == "event" {
			var e Event
			if err := json.Unmarshal(r.Params, &e); err == nil {
				e.Received = time.Now()
				c.mu.Lock()
				c.events = append(c.events, e)
				c.notifyLocked()
				c.mu.Unlock()
			}
		}
		return nil, nil
	}
	var id string
	_ = json.Unmarshal(r.ID, &id)
	req := &Request{ID: id, Method: r.Method, reply: make(chan reply, 1)}
	_ = json.Unmarshal(r.Params, &req.Params)
	c.mu.Lock()
	c.requests = append(c.requests, req)
	c.notifyLocked()
	c.mu.Unlock()
	select {
	case rp := <-req.reply:
		return rp.res, rp.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-conn.InputDone():
		return nil, errServerGone
	}
}

func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Call sends a request and returns its result.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.conn.CallWithID(ctx, method, params, func(id string) { c.lastID.Store(id) })
}

// CallInto calls and decodes the result into out.
func (c *Client) CallInto(ctx context.Context, method string, params, out any) error {
	res, err := c.Call(ctx, method, params)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(res, out)
}

// Code returns the JSON-RPC error code of err (0 when it is not one).
func Code(err error) int {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func (c *Client) onFrame(dir string, frame []byte) {
	if dir != "in" {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Type string `json:"type"`
		} `json:"params"`
	}
	if json.Unmarshal(frame, &m) != nil {
		return
	}
	tag := ""
	switch {
	case m.Method == "event":
		tag = "event:" + m.Params.Type
	case m.Method != "":
		tag = "request:" + m.Method
	default:
		tag = "response:" + strings.Trim(string(m.ID), `"`)
	}
	c.mu.Lock()
	c.frames = append(c.frames, tag)
	c.mu.Unlock()
}

// Frames lists the incoming frames in arrival order ("event:<type>", "request:<method>",
// "response:<id>").
func (c *Client) Frames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.frames...)
}

// LastCallID is the id of the newest call this client sent.
func (c *Client) LastCallID() string { return c.lastID.Load().(string) }

// Events returns a copy of every event received so far.
func (c *Client) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// WaitEvent waits for the first event at index >= from that matches, returning it and its
// index.
func (c *Client) WaitEvent(ctx context.Context, from int, match func(Event) bool) (Event, int, error) {
	for {
		c.mu.Lock()
		for i := from; i < len(c.events); i++ {
			if match(c.events[i]) {
				e := c.events[i]
				c.mu.Unlock()
				return e, i, nil
			}
		}
		ch, done := c.changed, c.done
		c.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			c.mu.Lock()
			n := len(c.events)
			c.mu.Unlock()
			if n > from {
				continue
			}
			return Event{}, 0, fmt.Errorf("connection ended: %w", c.Err())
		case <-ctx.Done():
			return Event{}, 0, ctx.Err()
		}
		select {
		case <-done:
			// drain once more above, then report
		default:
		}
	}
}

// WaitType waits for an event of type typ (in session sid when non-empty) at index >= from.
func (c *Client) WaitType(ctx context.Context, from int, sid, typ string) (Event, int, error) {
	return c.WaitEvent(ctx, from, func(e Event) bool { return e.Type == typ && (sid == "" || e.SessionID == sid) })
}

// WaitRequest waits for the next unanswered server→client request.
func (c *Client) WaitRequest(ctx context.Context) (*Request, error) {
	for {
		c.mu.Lock()
		if len(c.requests) > 0 {
			r := c.requests[0]
			c.requests = c.requests[1:]
			c.mu.Unlock()
			return r, nil
		}
		ch, done := c.changed, c.done
		c.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return nil, fmt.Errorf("connection ended: %w", c.Err())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Answer replies to a server→client request.
func (r *Request) Answer(result any) { r.reply <- reply{res: result} }

// Decline replies with an error (e.g. -32601 for a method the client does not implement).
func (r *Request) Decline(code int, msg string) {
	r.reply <- reply{err: &jsonrpc.Error{Code: code, Message: msg}}
}

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil for a clean end).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runErr
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Raw sends a pre-encoded frame (for bad-input tests).
func (c *Client) Raw(frame []byte) error { return c.conn.WriteRaw(frame) }
