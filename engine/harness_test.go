package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/agent"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/engine/tool/danger"
)

// harness is an engine on a real badger directory, talking to a fake OpenAI server on
// 127.0.0.1 through the real client, with the real built-in tools in a temp working directory.
type harness struct {
	t   *testing.T
	srv *openaitest.Server
	eng *engine.Engine
	st  store.Store
	cwd string
}

func dangerCheck(cmd string) tool.Verdict {
	r := danger.Check(cmd, danger.Options{})
	v := tool.Verdict{Blocked: r.Hardline, Reason: r.Reason, Command: cmd}
	for _, m := range r.Matches {
		v.Patterns = append(v.Patterns, m.Key)
	}
	return v
}

func newHarness(t *testing.T, mut func(*engine.Config)) *harness {
	t.Helper()
	srv := openaitest.New(t)
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	reg := tool.NewRegistry(builtin.Defaults(dangerCheck)...)
	reg.Add(agent.Clarify{})
	reg.Add(agent.Delegate{})
	cfg := engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1})},
		DefaultModel: "openai:fake-agent",
		Tools:        reg,
		Cwd:          cwd,
	}
	if mut != nil {
		mut(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	return &harness{t: t, srv: srv, eng: eng, st: st, cwd: cwd}
}

func (h *harness) create() *engine.Session {
	h.t.Helper()
	s, err := h.eng.Create(context.Background(), engine.CreateOptions{Source: "test"})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

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

// submit starts a turn and waits for its outcome.
func (h *harness) run(s *engine.Session, prompt string) engine.Outcome {
	h.t.Helper()
	adm, err := s.Submit(ctxT(h.t), engine.Prompt{Text: prompt})
	if err != nil {
		h.t.Fatal(err)
	}
	out, err := s.Wait(ctxT(h.t), adm.TurnID)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
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
