package jsonrpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Handler serves incoming requests. The result is marshalled as the response (nil becomes {});
// an *Error (possibly wrapped) chooses the wire error, any other error becomes -32603.
//
// ctx is the request's own: it is derived from the connection's and cancelled once the
// response has been written (for a notification, once Handle returns), when the peer cancels
// the request with $/cancelRequest, and when the connection ends (not when the peer's input
// merely ends: see Run). A handler that fails once its ctx was cancelled is answered -32800.
// A panic in Handle is recovered, logged with its stack and answered with -32603; the
// connection carries on.
type Handler interface {
	Handle(ctx context.Context, c *Conn, r *Request) (any, error)
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
	// Logger receives what the connection cannot tell the peer: a handler's panic and its
	// stack. Default slog.Default().
	Logger *slog.Logger
	// EOFWait bounds how long the requests read before a clean end of input may still take
	// (default DefaultEOFWait); when it runs out the connection ends, which cancels them. A
	// negative value ends the connection as soon as the input ends.
	EOFWait time.Duration
}

// DefaultEOFWait is how long the requests read before the end of input may take to finish.
const DefaultEOFWait = 60 * time.Second

// DefaultMaxInFlight is the per-connection cap on async requests running at once.
const DefaultMaxInFlight = 128

// CodeOverloaded answers a request refused because its connection already has MaxInFlight
// requests running. error.data.retry_after_ms says when to try again (as Codex's app server
// does); nothing about the request was done.
const CodeOverloaded = -32001

// retryAfterMs is the retry_after_ms hint of an overload error.
const retryAfterMs = 200

// OverloadError is the error a request over the in-flight cap gets.
func OverloadError(limit int) *Error {
	return &Error{
		Code:    CodeOverloaded,
		Message: fmt.Sprintf("server overloaded: %d requests already in flight on this connection; retry later", limit),
		Data:    map[string]any{"retry_after_ms": retryAfterMs, "max_in_flight": limit},
	}
}

// Conn is one JSON-RPC connection.
type Conn struct {
	f    Framer
	h    Handler
	opts Options

	writeMu  sync.Mutex
	writeErr error       // the first failed write; nothing is written after it (writeMu)
	hungUp   atomic.Bool // Close was called: nothing more is written

	slots chan struct{} // one token per async request running; nil when uncapped

	mu         sync.Mutex
	pending    map[string]chan *response
	incoming   map[string]*inbound // the peer's requests read and not yet answered, by id
	inputEnded bool                // nothing more is read: no answer to our calls can come
	inputDone  chan struct{}       // closed when inputEnded is set
	closed     bool
	done       chan struct{}  // closed when Run has finished with the connection
	wg         sync.WaitGroup // async handlers
	ctx        context.Context
	cancel     context.CancelFunc
}

// response is the peer's answer to a request we sent.
type response struct {
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
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.EOFWait == 0 {
		opts.EOFWait = DefaultEOFWait
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{f: f, h: h, opts: opts, pending: map[string]chan *response{}, incoming: map[string]*inbound{},
		inputDone: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel}
	if opts.MaxInFlight > 0 {
		c.slots = make(chan struct{}, opts.MaxInFlight)
	}
	return c
}

// Context is cancelled when the connection ends (see Run): after a clean end of input, only
// once the requests read before it are answered.
func (c *Conn) Context() context.Context { return c.ctx }

// Run reads and dispatches until the input ends or the connection does, and returns once
// every request it read has been dealt with.
//
// A clean end of input (EOF) only means the peer sends nothing more: the requests read
// before it, running or queued, are still handled under live contexts and answered, for at
// most Options.EOFWait; then the connection ends and Run returns nil. Our own calls waiting
// for an answer fail at once with ErrClosed, since none can arrive.
//
// The connection ends when ctx ends, when Close is called, when a write fails and when the
// input breaks (a read error other than EOF, returned by Run). Every request still running
// then has its context cancelled; those that then fail, and those still queued (which do not
// run), are answered -32800 as long as the output can still be written. After Close nothing
// more is written: a side that hangs up does not decline the requests it was holding.
//
// The reader only reads: it routes responses to our calls and $/cancelRequest at once (so
// neither waits behind the work it unblocks or cancels) and queues everything else, in
// arrival order, for one dispatcher, which runs inline methods itself and starts async ones.
// The queue is short (see queueMaxJobs), so a peer still cannot get far ahead of its answers.
func (c *Conn) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, c.cancel)
	defer stop()
	defer c.shutdown()
	q := newQueue(c.ctx)
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		for {
			job, ok := q.pop()
			if !ok {
				return
			}
			job()
		}
	}()
	err := c.read(q)
	c.endInput()
	switch {
	case err != nil || c.opts.EOFWait < 0:
		c.cancel() // the input broke (or no wait is wanted): the connection ends
	case c.ctx.Err() == nil:
		// A clean end of input: what was read is still handled, within EOFWait.
		t := time.AfterFunc(c.opts.EOFWait, c.cancel)
		defer t.Stop()
	}
	q.close()
	<-dispatched
	c.wg.Wait()
	return err
}

// InputDone is closed once nothing more will be read from the peer: its input ended, or the
// connection did. A handler waiting on something only the peer could still send (or on
// someone acting for the peer) can stop waiting then.
func (c *Conn) InputDone() <-chan struct{} { return c.inputDone }

// endInput records that nothing more is read: calls still waiting for an answer fail.
func (c *Conn) endInput() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inputEnded {
		c.inputEnded = true
		close(c.inputDone)
	}
}

// read is the reader goroutine's loop.
func (c *Conn) read(q *queue) error {
	for {
		frame, err := c.f.Read(c.ctx)
		if errors.Is(err, errFrameTooLarge) {
			e := &Error{Code: codeInvalidRequest, Message: "invalid request: " + err.Error()}
			if !c.enqueue(q, func() { c.writeError(nullID, e) }, 0) {
				return nil
			}
			continue
		}
		if err != nil {
			if c.ctx.Err() != nil || isEOF(err) {
				return nil
			}
			return err
		}
		if c.opts.OnFrame != nil {
			c.opts.OnFrame("in", frame)
		}
		d, derr, id := decode(frame)
		if derr != nil {
			if !c.enqueue(q, func() { c.writeError(id, derr) }, 0) {
				return nil
			}
			continue
		}
		if d.kind == kindResponse {
			c.deliver(d)
			continue
		}
		req := d.req
		if req.Method == cancelMethod {
			c.cancelRequest(&req)
			continue
		}
		in := c.track(&req)
		if !c.enqueue(q, func() { c.dispatch(&req, in) }, len(frame)) {
			return nil
		}
	}
}

// enqueue hands a message's job to the dispatcher. When the connection has ended meanwhile it
// runs the job itself, which then only answers (a request gets -32800 without running), and
// reports false: the reader stops.
func (c *Conn) enqueue(q *queue, job func(), size int) bool {
	if q.push(job, size) {
		return true
	}
	job()
	return false
}

// dispatch runs an inline request, or starts an async one.
func (c *Conn) dispatch(req *Request, in *inbound) {
	if c.cancelled(in) { // while queued: the connection ended, or the peer cancelled it
		c.serve(req, in)
		return
	}
	if a, ok := c.h.(Async); ok && a.Async(req.Method) {
		if !c.acquire(req) {
			c.finish(in)
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer c.release()
			c.serve(req, in)
		}()
		return
	}
	c.serve(req, in)
}

// acquire takes an in-flight slot for req. A request that finds none is refused with
// CodeOverloaded (the refusal is written by the dispatcher, so a peer that does not read its
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

// serve runs the handler under the request's context and writes its answer; the context ends
// after that. A request whose context was cancelled before its turn (by the peer, or by the
// connection ending) does not run.
func (c *Conn) serve(req *Request, in *inbound) {
	defer c.finish(in)
	var res any
	var err error
	if c.cancelled(in) {
		err = context.Canceled
	} else {
		res, err = c.safeHandle(in.ctx, req)
	}
	if w, ok := res.(AfterWrite); ok {
		defer w.Written()
		res = w.Value()
	}
	if req.IsNotification() {
		return
	}
	if err != nil {
		if c.cancelled(in) { // stopped for a cancellation: the peer's or the connection's
			c.writeError(req.ID, &Error{Code: codeRequestCancelled, Message: "request cancelled"})
			return
		}
		c.writeError(req.ID, toError(err))
		return
	}
	if res == nil {
		res = struct{}{}
	}
	b, err := json.Marshal(res)
	if err != nil {
		c.writeError(req.ID, &Error{Code: codeInternalError, Message: "internal error: marshal result: " + err.Error()})
		return
	}
	c.WriteRaw(responseFrame(req.ID, "result", b))
}

// cancelled reports whether req's context was cancelled, by the peer or by the connection
// ending. The connection's own context is asked too: it reports its end before the end has
// reached every request's context.
func (c *Conn) cancelled(in *inbound) bool { return in.ctx.Err() != nil || c.ctx.Err() != nil }

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

// safeHandle calls the handler. A panic is logged with its stack and becomes a bare
// internal error: neither the panic's text nor the stack reaches the peer.
func (c *Conn) safeHandle(ctx context.Context, req *Request) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.opts.Logger.Error("jsonrpc: handler panicked", "method", req.Method, "id", string(req.ID), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err = nil, &Error{Code: codeInternalError, Message: "internal error"}
		}
	}()
	return c.h.Handle(withTraceMeta(ctx, req.Params), c, req)
}

func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: codeInternalError, Message: "internal error: " + err.Error()}
}

func (c *Conn) writeError(id json.RawMessage, e *Error) { c.WriteRaw(ErrorFrame(id, e)) }

// ErrorFrame encodes the error response e to the request with id (null when id is empty), the
// id exactly as the peer wrote it. Data that does not marshal is left out.
func ErrorFrame(id json.RawMessage, e *Error) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		b, _ = json.Marshal(&Error{Code: e.Code, Message: e.Message})
	}
	return responseFrame(id, "error", b)
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
	if err := c.writable(); err != nil {
		return err
	}
	if c.opts.OnFrame != nil {
		c.opts.OnFrame("out", b)
	}
	if err := c.f.Write(c.ctx, b); err != nil {
		c.writeFailed(err)
		return err
	}
	return nil
}

// writable reports why nothing can be written any more: Close was called, or a write failed.
// Called with writeMu held.
func (c *Conn) writable() error {
	if c.hungUp.Load() {
		return ErrClosed
	}
	return c.writeErr
}

// writeFailed ends the connection after a failed write. Called with writeMu held.
func (c *Conn) writeFailed(err error) {
	c.writeErr = err
	c.cancel()
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
	if err := c.writable(); err != nil {
		return err
	}
	if c.opts.OnFrame != nil {
		for _, f := range frames {
			c.opts.OnFrame("out", f)
		}
	}
	var err error
	if bw, ok := c.f.(batchWriter); ok {
		err = bw.WriteBatch(c.ctx, frames)
	} else {
		for _, f := range frames {
			if err = c.f.Write(c.ctx, f); err != nil {
				break
			}
		}
	}
	if err != nil {
		c.writeFailed(err)
	}
	return err
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	return c.write(outRequest{JSONRPC: "2.0", Method: method, Params: params})
}

// CallWithID sends a request to the peer and waits for its response; sent, when set, learns
// the request's id before it is written. The id is a string minted here (prefix + 12 hex), so
// it never collides with the peer's own ids. Once the input has ended no answer can arrive:
// the call fails with ErrClosed.
func (c *Conn) CallWithID(ctx context.Context, method string, params any, sent func(id string)) (json.RawMessage, error) {
	id := c.newID()
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
	return c.await(ctx, id, ch)
}

// newID mints a request id.
func (c *Conn) newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return c.opts.IDPrefix + hex.EncodeToString(b[:])
}

// expect registers a pending outgoing request.
func (c *Conn) expect(id string) (chan *response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inputEnded {
		return nil, ErrClosed
	}
	ch := make(chan *response, 1)
	c.pending[id] = ch
	return ch, nil
}

// await waits for the response to id.
func (c *Conn) await(ctx context.Context, id string, ch chan *response) (json.RawMessage, error) {
	defer c.forget(id)
	select {
	case r := <-ch:
		return r.value()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.inputDone:
		select {
		case r := <-ch: // read just before the input ended
			return r.value()
		default:
			return nil, ErrClosed
		}
	}
}

func (r *response) value() (json.RawMessage, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	return r.Result, nil
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
		ch <- &response{Result: d.result, Err: d.err}
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
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	c.mu.Unlock()
	_ = c.f.Close()
}

// Close ends the connection from this side: nothing more is written (a request cut short
// gets no answer), running requests are cancelled and the framer is closed.
func (c *Conn) Close() error {
	c.hungUp.Store(true)
	c.cancel()
	return c.f.Close()
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrClosed)
}
