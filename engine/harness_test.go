package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
)

// harness is enginetest's harness as the engine's tests use it: an engine on a real badger
// directory, talking to a fake OpenAI server through the real client, with the real built-in
// tools in a temp working directory; its cleanup checks for leaked goroutines.
type harness struct {
	t   *testing.T
	h   *enginetest.Harness
	srv *openaitest.Server
	eng *engine.Engine
	st  store.Store
	cwd string
}

func newHarness(t *testing.T, mut func(*engine.Config)) *harness {
	t.Helper()
	h := enginetest.New(t, enginetest.Options{Configure: mut})
	return &harness{t: t, h: h, srv: h.Server, eng: h.Engine, st: h.Store, cwd: h.Cwd}
}

func (h *harness) create() *engine.Session { h.t.Helper(); return h.h.Create() }

func ctxT(t *testing.T) context.Context { return enginetest.Context(t) }

// next reads events until one of type typ arrives (failing on a terminal event first).
func next(t *testing.T, sub *engine.Subscription, typ engine.EventType) engine.Event {
	t.Helper()
	for {
		ev, err := sub.Next(ctxT(t))
		if err != nil {
			t.Fatalf("waiting for %s: %v", typ, err)
		}
		if ev.Type == typ {
			return ev
		}
		if ev.Type == engine.EvMessageComplete && typ != engine.EvMessageComplete {
			t.Fatalf("turn ended while waiting for %s: %+v", typ, ev.Data)
		}
	}
}

// run starts a turn and waits for its outcome.
func (h *harness) run(s *engine.Session, prompt string) engine.Outcome {
	h.t.Helper()
	return h.h.Run(s, prompt)
}

func args(v any) []string {
	b, _ := json.Marshal(v)
	s := string(b)
	// split the JSON into a few fragments, as models stream it
	n := len(s) / 3
	return []string{s[:n], s[n : 2*n], s[2*n:]}
}

func mustRows(t *testing.T, s *engine.Session) []store.Row {
	t.Helper()
	rows, err := s.History(context.Background(), store.RowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lastRequestMessages decodes the messages of the newest request the fake server received.
func (h *harness) lastRequestMessages() []map[string]any {
	h.t.Helper()
	reqs := h.srv.Requests()
	if len(reqs) == 0 {
		h.t.Fatal("no request received")
	}
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
		h.t.Fatal(err)
	}
	return body.Messages
}

// mustEvents returns the retained journal of a session.
func mustEvents(t *testing.T, s *engine.Session) []engine.Event {
	t.Helper()
	evs, ok := s.EventsSince(0)
	if !ok {
		t.Fatal("journal window lost the start")
	}
	return evs
}
