package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Dialect is how the runner reads a transport's frames: which frame answers the one just
// sent, which frame an until step waits for, which frames are events (for meta.ignore) and
// which are requests from the server to the client. JSON-RPC (the gateway and ACP) is the
// default; a Driver whose frames look different implements Dialecter.
type Dialect interface {
	// Reply returns a test for the frame that answers sent, or nil when sent gets no answer
	// (a JSON-RPC notification). The test's second result reports an answer that is a
	// failure, after which an until step stops waiting.
	Reply(sent []byte) func(frame map[string]any) (answers, failed bool)
	// ReplyTo returns a test for the answer to the client request with this id (an await
	// step), or nil when the transport has no request ids.
	ReplyTo(id json.RawMessage) func(frame map[string]any) bool
	// Until reports whether frame is the event or server→client request an until step names.
	Until(frame map[string]any, name string) bool
	// Event returns the event type of frame, or "" when it is not an event.
	Event(frame map[string]any) string
	// ServerRequest returns the id of a server→client request frame.
	ServerRequest(frame map[string]any) (id any, ok bool)
	// Answer encodes the client's answer to a server→client request.
	Answer(id any, result json.RawMessage) ([]byte, error)
}

// Dialecter is the optional Driver ability of speaking something other than JSON-RPC.
type Dialecter interface {
	Dialect() Dialect
}

// ErrNoServerRequests is returned by dialects without server→client requests for an answer step.
var ErrNoServerRequests = errors.New("this transport has no server→client requests to answer")

func dialectOf(d Driver) Dialect {
	if x, ok := d.(Dialecter); ok {
		return x.Dialect()
	}
	return jsonRPC{}
}

// jsonRPC is JSON-RPC 2.0: responses carry the request's id and no method; events are
// notifications of method "event" (the gateway) and server→client requests carry both.
type jsonRPC struct{}

func (jsonRPC) Reply(sent []byte) func(map[string]any) (bool, bool) {
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if err := json.Unmarshal(sent, &probe); err == nil && probe.Method != nil && (len(probe.ID) == 0 || string(probe.ID) == "null") {
		return nil // a notification: no answer comes
	}
	if len(probe.ID) == 0 || string(probe.ID) == "null" {
		// not JSON, or no method: the error answer has a null id
		return func(m map[string]any) (bool, bool) { return m["method"] == nil, m["error"] != nil }
	}
	match := jsonRPC{}.ReplyTo(probe.ID)
	return func(m map[string]any) (bool, bool) {
		if !match(m) {
			return false, false
		}
		return true, m["error"] != nil
	}
}

func (jsonRPC) ReplyTo(id json.RawMessage) func(map[string]any) bool {
	want := string(id)
	return func(m map[string]any) bool {
		got, _ := json.Marshal(m["id"])
		return m["method"] == nil && string(got) == want
	}
}

func (j jsonRPC) Until(m map[string]any, name string) bool {
	return m["method"] == name || j.Event(m) == name
}

// Event names the gateway's "event" notifications by their type, and any other notification
// by its method.
func (jsonRPC) Event(m map[string]any) string {
	method, _ := m["method"].(string)
	if method == "" || m["id"] != nil {
		return ""
	}
	if method != "event" {
		return method
	}
	p, _ := m["params"].(map[string]any)
	t, _ := p["type"].(string)
	return t
}

func (jsonRPC) ServerRequest(m map[string]any) (any, bool) {
	id, ok := m["id"]
	return id, ok && id != nil && m["method"] != nil
}

func (jsonRPC) Answer(id any, result json.RawMessage) ([]byte, error) {
	if s, ok := id.(string); ok { // numeric ids go back as numbers
		if n, err := json.Number(s).Int64(); err == nil {
			id = n
		}
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	if err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	return b, nil
}
