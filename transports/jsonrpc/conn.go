package jsonrpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Handler serves incoming requests. The result is marshalled as the response (nil becomes {});
// an *Error (possibly wrapped) chooses the wire error, any other error becomes -32603.
type Handler interface {
	Handle(ctx context.Context, c *Conn, r *Request) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Conn, r *Request) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c *Conn, r *Request) (any, error) {
	return f(ctx, c, r)
}

// Async is an optional Handler ability: methods for which it returns true run on their own
// goroutine, so a slow call does not hold up the ones behind it. Their responses may then
// overtake nothing they depend on but may arrive after later responses.
type Async interface {
	Async(method string) bool
}

// ErrClosed is returned by calls on a closed connection.
var ErrClosed = errors.New("connection closed")

// Options configure a Conn.
type Options struct {
	// OnFrame, when set, sees every frame in and out (for transcripts); dir is "in" or "out".
	OnFrame func(dir string, frame []byte)
	// IDPrefix prefixes ids of requests this side sends (default "srq-").
	IDPrefix string
	// OnResponse receives responses whose id this Conn is not waiting for: requests written
	// on the caller's behalf (WriteRequest) and answered here. Without it they are dropped.
	OnResponse func(id string, result json.RawMessage, err *Error)
	// MaxInFlight caps the async requests (see Async) running at once on this connection
	// (default DefaultMaxInFlight; negative means no cap). A request over the cap is answered
	// at once with CodeOverloaded; an async notification over it waits for a slot, so reading
	// pauses. Inline methods run on the reader and are bounded by it.
	MaxInFlight int
}

// DefaultMaxInFlight is the per-connection cap on async requests running at once.
const DefaultMaxInFlight = 128

// CodeOverloaded answers a request refused because its connection already has MaxInFlight
// requests running. error.data.retry_after_ms says when to try again (as Codex's app server
// does); nothing about the request was done.
const CodeOverloaded = -32001

// RetryAfterMs is the retry_after_ms hint of an overload error.
const RetryAfterMs = 200

// OverloadError is the error a request over the in-flight cap gets.
func OverloadError(limit int) *Error {
	return &Error{
		Code:    CodeOverloaded,
		Message: fmt.Sprintf("server overloaded: %d requests already in flight on this connection; retry later", limit),
		Data:    map[string]any{"retry_after_ms": RetryAfterMs, "max_in_flight": limit},
	}
}

// Conn is one JSON-RPC connection.
type Conn struct {
	f    Framer
	h    Handler
	opts Options

	writeMu sync.Mutex

	slots chan struct{} // one token per async request running; nil when uncapped

	mu      sync.Mutex
	pending map[string]chan *Response
	closed  bool
	done    chan struct{}
	wg      sync.WaitGroup // async handlers
	ctx     context.Context
	cancel  context.CancelFunc
}

// Response is the peer's answer to a request we sent.
type Response struct {
	Result json.RawMessage
	Err    *Error
}

// NewConn binds a framer and a handler.
func NewConn(f Framer, h Handler, opts Options) *Conn {
	if opts.IDPrefix == "" {
		opts.IDPrefix = "srq-"
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{f: f, h: h, opts: opts, pending: map[string]chan *Response{}, done: make(chan struct{}), ctx: ctx, cancel: cancel}
	if opts.MaxInFlight > 0 {
		c.slots = make(chan struct{}, opts.MaxInFlight)
	}
	return c
}

// Context is cancelled when the connection ends.
func (c *Conn) Context() context.Context { return c.ctx }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Run reads and dispatches until the peer goes away or ctx ends. It returns nil on a clean
// end of input.
func (c *Conn) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, c.cancel)
	defer stop()
	defer c.shutdown()
	for {
		frame, err := c.f.Read(c.ctx)
		if errors.Is(err, ErrFrameTooLarge) {
			c.writeError(nullID, &Error{Code: CodeInvalidRequest, Message: "invalid request: " + err.Error()})
			continue
		}
		if err != nil {
			if c.ctx.Err() != nil {
				return nil
			}
			if isEOF(err) {
				return nil
			}
			return err
		}
		if c.opts.OnFrame != nil {
			c.opts.OnFrame("in", frame)
		}
		d, derr, id := decode(frame)
		if derr != nil {
			c.writeError(id, derr)
			continue
		}
		if d.kind == kindResponse {
			c.deliver(d)
			continue
		}
		req := d.req
		if a, ok := c.h.(Async); ok && a.Async(req.Method) {
			if !c.acquire(&req) {
				if c.ctx.Err() != nil {
					return nil
				}
				continue
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer c.release()
				c.serve(&req)
			}()
			continue
		}
		c.serve(&req)
	}
}

// acquire takes an in-flight slot for req. A request that finds none is refused with
// CodeOverloaded (the refusal is written by the reader, so a peer that does not read its
// answers stops being read too); a notification waits for one. It reports whether req may run.
func (c *Conn) acquire(req *Request) bool {
	if c.slots == nil {
		return true
	}
	select {
	case c.slots <- struct{}{}:
		return true
	default:
	}
	if !req.IsNotification() {
		c.writeError(req.ID, OverloadError(cap(c.slots)))
		return false
	}
	select {
	case c.slots <- struct{}{}:
		return true
	case <-c.ctx.Done():
		return false
	}
}

func (c *Conn) release() {
	if c.slots != nil {
		<-c.slots
	}
}

func (c *Conn) serve(req *Request) {
	res, err := c.safeHandle(req)
	if w, ok := res.(AfterWrite); ok {
		defer w.Written()
		res = w.Value()
	}
	if req.IsNotification() {
		return
	}
	if c.ctx.Err() != nil {
		// The connection is ending: a handler cut short by it must not answer (a client
		// leaving would otherwise decline every request it was still holding).
		return
	}
	if err != nil {
		c.writeError(req.ID, toError(err))
		return
	}
	if res == nil {
		res = struct{}{}
	}
	b, err := json.Marshal(res)
	if err != nil {
		c.writeError(req.ID, &Error{Code: CodeInternalError, Message: "internal error: marshal result: " + err.Error()})
		return
	}
	c.WriteRaw(responseFrame(req.ID, "result", b))
}

// responseFrame assembles a response around the request's id as it arrived: encoding/json
// would re-escape it ('<', '&', U+2028), and a peer matches responses by the bytes it sent.
func responseFrame(id json.RawMessage, member string, body []byte) []byte {
	if len(id) == 0 {
		id = nullID
	}
	b := make([]byte, 0, len(id)+len(body)+32)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"`...)
	b = append(b, member...)
	b = append(b, `":`...)
	b = append(b, body...)
	return append(b, '}')
}

// AfterWrite is a result that wants to know when its response frame has been written (or the
// write failed), e.g. to release events held back so they follow the response.
type AfterWrite interface {
	Value() any
	Written()
}

func (c *Conn) safeHandle(req *Request) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Code: CodeInternalError, Message: "internal error"}
		}
	}()
	return c.h.Handle(c.ctx, c, req)
}

func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternalError, Message: "internal error: " + err.Error()}
}

func (c *Conn) writeError(id json.RawMessage, e *Error) {
	b, err := json.Marshal(e)
	if err != nil { // Data that does not marshal: send the error without it
		b, _ = json.Marshal(&Error{Code: e.Code, Message: e.Message})
	}
	c.WriteRaw(responseFrame(id, "error", b))
}

// write marshals and sends one frame; frames never interleave.
func (c *Conn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jsonrpc: marshal: %w", err)
	}
	return c.WriteRaw(b)
}

// WriteRaw sends one pre-encoded frame.
func (c *Conn) WriteRaw(b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.opts.OnFrame != nil {
		c.opts.OnFrame("out", b)
	}
	if err := c.f.Write(c.ctx, b); err != nil {
		c.cancel()
		return err
	}
	return nil
}

// NotificationFrame encodes a notification without sending it (see WriteFrames).
func NotificationFrame(method string, params any) ([]byte, error) {
	return json.Marshal(outRequest{JSONRPC: "2.0", Method: method, Params: params})
}

// WriteFrames sends pre-encoded frames in order, in one write when the framer can batch.
func (c *Conn) WriteFrames(frames [][]byte) error {
	if len(frames) == 0 {
		return nil
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.opts.OnFrame != nil {
		for _, f := range frames {
			c.opts.OnFrame("out", f)
		}
	}
	var err error
	if bw, ok := c.f.(BatchWriter); ok {
		err = bw.WriteBatch(c.ctx, frames)
	} else {
		for _, f := range frames {
			if err = c.f.Write(c.ctx, f); err != nil {
				break
			}
		}
	}
	if err != nil {
		c.cancel()
	}
	return err
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	return c.write(outRequest{JSONRPC: "2.0", Method: method, Params: params})
}

// Call sends a request to the peer and waits for its response. The id is a string minted here
// (prefix + 12 hex), so it never collides with the peer's own ids.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.CallWithID(ctx, method, params, nil)
}

// CallWithID is Call that reports the minted id before the request is written.
func (c *Conn) CallWithID(ctx context.Context, method string, params any, sent func(id string)) (json.RawMessage, error) {
	id := c.NewID()
	if sent != nil {
		sent(id)
	}
	ch, err := c.expect(id)
	if err != nil {
		return nil, err
	}
	if err := c.write(outRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params}); err != nil {
		c.forget(id)
		return nil, err
	}
	return c.Await(ctx, id, ch)
}

// NewID mints a request id.
func (c *Conn) NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return c.opts.IDPrefix + hex.EncodeToString(b[:])
}

// expect registers a pending outgoing request.
func (c *Conn) expect(id string) (chan *Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	ch := make(chan *Response, 1)
	c.pending[id] = ch
	return ch, nil
}

// Await waits for the response to id.
func (c *Conn) Await(ctx context.Context, id string, ch chan *Response) (json.RawMessage, error) {
	defer c.forget(id)
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, ErrClosed
	}
}

func (c *Conn) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// deliver routes a response to its waiting Call. Unknown ids are dropped.
func (c *Conn) deliver(d decoded) {
	var id string
	if err := json.Unmarshal(d.id, &id); err != nil {
		id = string(d.id) // a number or null: not one of ours, but OnResponse may want it
	}
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		ch <- &Response{Result: d.result, Err: d.err}
		return
	}
	if c.opts.OnResponse != nil {
		c.opts.OnResponse(id, d.result, d.err)
	}
}

// WriteRequest writes a request frame whose answer goes to Options.OnResponse (the session
// layer tracks it, e.g. a question fanned out to several connections).
func (c *Conn) WriteRequest(id, method string, params any) error {
	return c.write(outRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
}

func (c *Conn) shutdown() {
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	c.mu.Unlock()
	_ = c.f.Close()
}

// Close ends the connection.
func (c *Conn) Close() error {
	c.cancel()
	return c.f.Close()
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrClosed)
}
