package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// rawGateway serves one connection over pipes and returns the client's ends.
func rawGateway(t *testing.T) (io.Writer, <-chan []byte, store.Store) {
	t.Helper()
	return pipeGateway(t, gateway.Options{})
}

// pipeGateway serves one connection of a gateway built with opts over pipes and returns the
// client's ends and the store; cleanup closes everything and checks for leaked goroutines.
func pipeGateway(t *testing.T, opts gateway.Options) (io.Writer, <-chan []byte, store.Store) {
	t.Helper()
	enginetest.CheckGoroutines(t)
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{"p": instant{}}, DefaultModel: "p:m",
		Tools: tool.NewRegistry(), Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(eng, opts)
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		gw.Serve(context.Background(), jsonrpc.NewLineFramer(sr, sw, closers{sr, sw}, 0), false, nil)
	}()
	frames := make(chan []byte, 64)
	go func() {
		defer close(frames)
		br := bufio.NewReader(cr)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			frames <- line
		}
	}()
	t.Cleanup(func() {
		cw.Close()
		cr.Close()
		for range frames {
		}
		<-done
		gw.Close()
		eng.Close()
		st.Close()
	})
	return cw, frames, st
}

// answer reads frames until the response with id (raw JSON), skipping notifications.
func answer(t *testing.T, r <-chan []byte, id string) map[string]json.RawMessage {
	t.Helper()
	for {
		line, ok := <-r
		if !ok {
			t.Fatalf("connection ended waiting for %s", id)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("bad frame %q", line)
		}
		if _, isNote := m["method"]; !isNote && string(m["id"]) == id {
			return m
		}
	}
}

// TestBadIDParams: an id param that is not an identifier (not UTF-8, over long, invisible
// characters) is -32602 before any method sees it, and nothing is stored.
func TestBadIDParams(t *testing.T) {
	w, r, st := rawGateway(t)
	cases := []struct{ method, params string }{
		{"session.resume", "{\"session_id\":\"a\xffb\"}"},
		{"prompt.submit", `{"session_id":"a\u202eb","text":"hi"}`},
		{"session.history", `{"session_id":"` + strings.Repeat("x", 300) + `"}`},
		{"session.branch", `{"session_id":"a/b"}`},
		{"session.history", "{\"Session_ID\":\"a\xffb\"}"},
	}
	for i, c := range cases {
		id := `"bad-` + string(rune('a'+i)) + `"`
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+c.method+`","params":`+c.params+`}`+"\n")
		m := answer(t, r, id)
		var e struct{ Code int }
		if json.Unmarshal(m["error"], &e) != nil || e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s %.30s: %s, want -32602", c.method, c.params, m["error"])
		}
	}
	// A title with a '/' can still be resumed by name; an unknown one is simply not found.
	io.WriteString(w, `{"jsonrpc":"2.0","id":"t","method":"session.resume","params":{"session_id":"fix a/b"}}`+"\n")
	if m := answer(t, r, `"t"`); strings.Contains(string(m["error"]), "-32602") {
		t.Fatalf("a title was refused as an id: %s", m["error"])
	}
	io.WriteString(w, `{"jsonrpc":"2.0","id":"l","method":"session.list","params":{}}`+"\n")
	if m := answer(t, r, `"l"`); m["result"] == nil {
		t.Fatalf("session.list: %s", m["error"])
	}
	list, err := st.ListSessions(context.Background(), engine.ListOptions{})
	if err != nil || len(list) != 0 {
		t.Fatalf("stored after refused ids: %v %v", list, err)
	}
}
