package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
)

// cancelMethod is the peer's way to cancel one of its requests, as in LSP and jsonrpc2:
// {"method":"$/cancelRequest","params":{"id":<the request's id>}}. The reader handles it out
// of band, so it never waits behind the work it cancels. The cancelled request's context ends;
// if its handler then fails, the answer is codeRequestCancelled (a handler that finished
// anyway answers as usual). An id that is not in flight is ignored. Sent as a request rather
// than a notification, it is answered with {} at once.
const cancelMethod = "$/cancelRequest"

// codeRequestCancelled answers a request its peer cancelled (LSP's RequestCancelled).
const codeRequestCancelled = -32800

// errCancelled is the cause of a request context ended by $/cancelRequest.
var errCancelled = errors.New("request cancelled by the peer")

// inbound is one of the peer's requests from the moment it is read until it is answered.
type inbound struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	key    string // "" for a notification: nothing can name it
}

// track gives req its context and, when it has an id, makes it cancellable by that id. A
// request reusing the id of one still in flight takes the id over.
func (c *Conn) track(req *Request) *inbound {
	ctx, cancel := context.WithCancelCause(c.ctx)
	in := &inbound{ctx: ctx, cancel: cancel}
	if !req.IsNotification() {
		in.key = idKey(req.ID)
		c.mu.Lock()
		c.incoming[in.key] = in
		c.mu.Unlock()
	}
	return in
}

// finish ends the request's context and forgets it.
func (c *Conn) finish(in *inbound) {
	if in.key != "" {
		c.mu.Lock()
		if c.incoming[in.key] == in {
			delete(c.incoming, in.key)
		}
		c.mu.Unlock()
	}
	in.cancel(nil)
}

// cancelRequest handles $/cancelRequest on the reader.
func (c *Conn) cancelRequest(req *Request) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(req.Params, &p) == nil && !isNull(p.ID) {
		c.mu.Lock()
		in := c.incoming[idKey(p.ID)]
		c.mu.Unlock()
		if in != nil {
			in.cancel(errCancelled)
		}
	}
	if !req.IsNotification() {
		c.WriteRaw(responseFrame(req.ID, "result", []byte("{}")))
	}
}

// idKey names a request id however it was spelled: "a" and "\u0061" are one string id.
// Numbers are compared as written.
func idKey(id json.RawMessage) string {
	var s string
	if len(id) > 0 && id[0] == '"' && json.Unmarshal(id, &s) == nil {
		return "s" + s
	}
	return "n" + string(id)
}
