// Package enginetest builds an engine for tests: a real store (badger in a temp directory, or
// the in-memory one), the fake OpenAI server behind the real client, the built-in tools in a
// temp working directory, and a cleanup that closes it all and fails the test if any goroutine
// it started is left running.
package enginetest

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/agent"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/engine/tool/danger"
)

// Options choose the harness's store and adjust the engine's configuration.
type Options struct {
	// Memory uses the in-memory store instead of badger in a temp directory.
	Memory bool
	// Configure, if set, edits the configuration before the engine is built (wrap Store,
	// add a policy, lower a limit).
	Configure func(*engine.Config)
	// Server configures the fake model (a context window, a responder).
	Server []openaitest.Option
}

// Harness is an engine under test and what it talks to.
type Harness struct {
	T      testing.TB
	Server *openaitest.Server // the fake model: Enqueue its responses
	Engine *engine.Engine
	Store  store.Store // the store as configured (after Configure)
	Cwd    string      // the tools' working directory
}

// New builds the harness. Its cleanup closes the engine and the store, stops the fake server
// and then checks for goroutines left behind (see CheckGoroutines).
func New(t testing.TB, o Options) *Harness {
	t.Helper()
	CheckGoroutines(t)
	srv := openaitest.New(t, o.Server...)
	var st store.Store
	if o.Memory {
		st = memstore.New()
	} else {
		bst, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		st = bst
	}
	t.Cleanup(func() { st.Close() })
	cwd := t.TempDir()
	reg := tool.NewRegistry(builtin.Defaults(DangerCheck)...)
	reg.Add(agent.Clarify{})
	reg.Add(agent.Delegate{})
	cfg := engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1})},
		DefaultModel: "openai:fake-agent",
		Tools:        reg,
		Cwd:          cwd,
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &Harness{T: t, Server: srv, Engine: eng, Store: cfg.Store, Cwd: cwd}
}

// DangerCheck is the terminal tool's guard as the product wires it.
func DangerCheck(cmd string) tool.Verdict {
	r := danger.Check(cmd, danger.Options{})
	v := tool.Verdict{Blocked: r.Hardline, Reason: r.Reason, Command: cmd}
	for _, m := range r.Matches {
		v.Patterns = append(v.Patterns, m.Key)
	}
	return v
}

// Create opens a new stored session.
func (h *Harness) Create() *engine.Session {
	h.T.Helper()
	s, err := h.Engine.Create(context.Background(), engine.CreateOptions{Source: "test"})
	if err != nil {
		h.T.Fatal(err)
	}
	return s
}

// Run submits prompt and waits for the turn's outcome.
func (h *Harness) Run(s *engine.Session, prompt string) engine.Outcome {
	h.T.Helper()
	adm, err := s.Submit(Context(h.T), engine.Prompt{Text: prompt})
	if err != nil {
		h.T.Fatal(err)
	}
	out, err := s.Wait(Context(h.T), adm.TurnID)
	if err != nil {
		h.T.Fatal(err)
	}
	return out
}

// Context is a context for one wait of the test, ended when the test ends; its generous
// deadline only turns a hang into a failure.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// labelKey is the profiler label CheckGoroutines marks a test's goroutines with.
const labelKey = "enginetest"

var checks atomic.Int64

// checked holds the tests CheckGoroutines already covers.
var checked sync.Map // testing.TB → struct{}

// CheckGoroutines fails the test if, once its later-registered cleanups have run, goroutines
// it started are still running. It labels the calling goroutine, so every goroutine started
// from it (and from those) carries the label and is counted; other tests' goroutines are not,
// so the check holds under t.Parallel. Goroutines take a moment to exit after what ends them,
// so the count is polled until it settles; a failure prints their stacks. A second call in
// the same test does nothing: the first check runs last and covers both.
func CheckGoroutines(t testing.TB) {
	t.Helper()
	if _, dup := checked.LoadOrStore(t, struct{}{}); dup {
		return
	}
	id := strconv.FormatInt(checks.Add(1), 10)
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(labelKey, id)))
	t.Cleanup(func() {
		defer checked.Delete(t)
		var left []string
		for range 1000 {
			if left = labelled(id); len(left) == 0 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("%d goroutine stacks left behind by the test:\n%s", len(left), strings.Join(left, "\n\n"))
	})
}

// labelled returns the goroutine profile's records (a count and a stack each) for goroutines
// labelled id, leaving out the one calling it.
func labelled(id string) []string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return []string{err.Error()}
	}
	mark := fmt.Sprintf("# labels: {%q:%q}", labelKey, id)
	var out []string
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(rec, mark) {
			continue
		}
		if strings.HasPrefix(rec, "goroutine profile:") {
			_, rec, _ = strings.Cut(rec, "\n") // the profile's header line
		}
		if strings.HasPrefix(rec, "1 @ ") && strings.Contains(rec, "enginetest.labelled") {
			continue // the test's own goroutine, running this
		}
		out = append(out, rec)
	}
	return out
}
