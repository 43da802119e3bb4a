package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// fakeServer is an in-process JSON-RPC peer: each frame the runner sends is handed to
// respond, whose frames the runner then receives.
type fakeServer struct {
	respond func(frame map[string]any) []string
	sent    []string
}

func (s *fakeServer) Connect() (Conn, error) { return &fakeConn{s: s}, nil }
func (s *fakeServer) Close() error           { return nil }

type fakeConn struct {
	s       *fakeServer
	pending []string
}

func (c *fakeConn) Send(frame []byte) error {
	c.s.sent = append(c.s.sent, string(frame))
	var m map[string]any
	if err := json.Unmarshal(frame, &m); err != nil {
		c.pending = append(c.pending, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}`)
		return nil
	}
	c.pending = append(c.pending, c.s.respond(m)...)
	return nil
}

func (c *fakeConn) Recv(ctx context.Context) ([]byte, error) {
	if len(c.pending) == 0 {
		return nil, errNothingPending
	}
	f := c.pending[0]
	c.pending = c.pending[1:]
	return []byte(f), nil
}

func (c *fakeConn) Close() error { return nil }

func fixtureOf(t *testing.T, client string) *Fixture {
	t.Helper()
	f, err := Parse("t.txtar", []byte("-- meta.json --\n{\"transports\":[\"fake\"]}\n-- cassette.json --\n{}\n-- client.jsonl --\n"+client))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRunnerSteps(t *testing.T) {
	srv := &fakeServer{respond: func(m map[string]any) []string {
		id, _ := json.Marshal(m["id"])
		switch m["method"] {
		case "start": // a reply, two events and a server→client request
			return []string{
				`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"session_id":"abcdef12"}}`,
				`{"jsonrpc":"2.0","method":"event","params":{"type":"tick","session_id":"abcdef12","seq":40}}`,
				`{"jsonrpc":"2.0","id":7,"method":"approval","params":{"session_id":"abcdef12"}}`,
			}
		case "broken":
			return []string{`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":4001}}`}
		case nil: // the answer to request 7
			return []string{`{"jsonrpc":"2.0","method":"event","params":{"type":"done","session_id":"abcdef12","seq":41}}`}
		}
		return nil
	}}
	f := fixtureOf(t, `{"send": {"jsonrpc":"2.0","id":1,"method":"start"}, "until": "approval"}
{"answer": "$request1", "result": {"choice": "once", "session": "$session1"}, "until": "done"}
{"raw": "not json"}
`)
	got, err := f.Run(context.Background(), srv, "fake", jsonRPC{}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`1 {"id":1,"jsonrpc":"2.0","result":{"session_id":"$session1"}}`,
		`1 {"jsonrpc":"2.0","method":"event","params":{"seq":1,"session_id":"$session1","type":"tick"}}`,
		`1 {"id":"$request1","jsonrpc":"2.0","method":"approval","params":{"session_id":"$session1"}}`,
		`2 {"jsonrpc":"2.0","method":"event","params":{"seq":2,"session_id":"$session1","type":"done"}}`,
		`3 {"error":{"code":-32700},"id":null,"jsonrpc":"2.0"}`,
	}
	if d := Diff(want, got); d != "" {
		t.Fatal(d)
	}
	// the answer went back with the numeric id and the captured session id substituted
	if a := srv.sent[1]; a != `{"id":7,"jsonrpc":"2.0","result":{"choice":"once","session":"abcdef12"}}` {
		t.Fatalf("answer frame: %s", a)
	}

	// a request that fails stops an until step at once, with the reason
	f = fixtureOf(t, `{"send": {"jsonrpc":"2.0","id":1,"method":"broken"}, "until": "done"}`+"\n")
	if _, err := f.Run(context.Background(), srv, "fake", jsonRPC{}, "", false); err == nil || !strings.Contains(err.Error(), "the request failed") {
		t.Fatalf("failed request: %v", err)
	}
	// an answer to a request never seen names the placeholder
	f = fixtureOf(t, `{"answer": "$request9", "result": {}}`+"\n")
	if _, err := f.Run(context.Background(), srv, "fake", jsonRPC{}, "", false); err == nil || !strings.Contains(err.Error(), "$request9") {
		t.Fatalf("unknown request: %v", err)
	}
	// http has no server→client requests and no request ids
	if _, err := (httpDialect{}).Answer("x", nil); !errors.Is(err, ErrNoServerRequests) {
		t.Fatal(err)
	}
	if (httpDialect{}).ReplyTo(json.RawMessage("1")) != nil {
		t.Fatal("http ReplyTo")
	}
}

func TestJSONRPCNotificationGetsNoReply(t *testing.T) {
	if (jsonRPC{}).Reply([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`)) != nil {
		t.Fatal("a notification waits for a reply")
	}
	reply := (jsonRPC{}).Reply([]byte(`{bad`))
	if ok, failed := reply(map[string]any{"id": nil, "error": map[string]any{}}); !ok || !failed {
		t.Fatal("malformed input is answered by a null-id error")
	}
	var d acpDialect
	m := map[string]any{"method": "session/update", "params": map[string]any{"update": map[string]any{"sessionUpdate": "tool_call"}}}
	if d.Event(m) != "tool_call" || !d.Until(m, "tool_call") {
		t.Fatal("ACP events are named by sessionUpdate")
	}
	if d.Event(map[string]any{"method": "$/cancel_request"}) != "$/cancel_request" {
		t.Fatal("other notifications are named by method")
	}
}
