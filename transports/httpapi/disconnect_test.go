package httpapi_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// TestStreamClientClosedInterruptsQuietTurn: a client that closes the connection of a stream
// while the turn writes nothing (the model call is held, as a slow tool would be) interrupts
// the turn without a write to fail. The keep-alive is an hour, so only the server's look at the
// connection can notice; the wait below is a failure deadline, not a measurement.
func TestStreamClientClosedInterruptsQuietTurn(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) { o.KeepAlive = time.Hour })
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"closed-1"}`, nil), 201)
	for _, tc := range []struct{ name, path, body, first string }{
		{"chat", "/v1/chat/completions", chatBody(true, false, "user", "slow chat"), `"role":"assistant"`},
		{"responses", "/v1/responses", respBody(t, map[string]any{"input": "slow response", "stream": true}), "response.in_progress"},
		{"session", "/api/sessions/closed-1/chat/stream", `{"input":"slow session turn"}`, "message.started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := openaitest.NewGate()
			t.Cleanup(gate.Release)
			tg.fake.Enqueue(openaitest.Response{Text: []string{"never", "seen"}, FaultAt: 1, Gate: gate})
			conn, err := net.Dial("tcp", strings.TrimPrefix(tg.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req := "POST " + tc.path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testKey +
				"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(tc.body)) + "\r\n\r\n" + tc.body
			if _, err := conn.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
			sid := res.Header.Get("X-Hermes-Session-Id")
			if tc.name == "session" {
				sid = "closed-1"
			}
			for line := ""; !strings.Contains(line, tc.first); {
				if line, err = br.ReadString('\n'); err != nil {
					t.Fatalf("stream ended before %s: %v", tc.first, err)
				}
			}
			<-gate.Reached()
			sess, ok := tg.eng.Live(sid)
			if !ok {
				t.Fatalf("session %q not live", sid)
			}
			sub := sess.Subscribe(0)
			defer sub.Close()
			conn.Close() // the client leaves while the turn is quiet
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					t.Fatalf("the turn was not interrupted: %v", err)
				}
				if o, ok := ev.Data.(engine.Outcome); ok {
					if o.Status != engine.StatusCancelled || !o.Interrupted || !strings.Contains(o.ExitReason, "(client disconnected)") {
						t.Fatalf("outcome %+v", o)
					}
					break
				}
			}
			if err := sess.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
