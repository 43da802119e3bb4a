package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/tool"
)

// echoTool is a tool a surface attaches to one session (as an MCP server's tool would be).
type echoTool struct {
	name  string
	calls atomic.Int32
}

func (e *echoTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: e.name, Description: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (e *echoTool) Call(_ context.Context, c tool.Call, _ *tool.Env) (tool.Result, error) {
	e.calls.Add(1)
	return tool.Result{Content: "echo " + string(c.Args)}, nil
}

// requestTools lists the tool names of the i-th request the fake model received.
func (h *harness) requestTools(i int) []string {
	h.t.Helper()
	var body struct {
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(h.srv.Requests()[i].Body, &body); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, t := range body.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

func TestAttachedToolsAreSessionScopedAndAsked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.Policy.Approver = askAll{} })
	s, other := h.create(), h.create()
	echo := &echoTool{name: "srv__echo"}
	detach, err := s.AttachTools(echo)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.AttachedTools(); len(got) != 1 || got[0] != "srv__echo" {
		t.Fatalf("attached: %v", got)
	}
	h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "c1", Name: "srv__echo", Args: []string{`{"x":1}`}}), openaitest.Text("done"))
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "use it"})
	if err != nil {
		t.Fatal(err)
	}
	// The ask policy covers attached tools: the call waits for an approval.
	ev := next(t, sub, engine.EvRequestOpen)
	req := ev.Data.(engine.Request)
	if req.Kind != engine.KindApproval || req.Payload["tool"] != "srv__echo" || echo.calls.Load() != 0 {
		t.Fatalf("request %+v, calls %d", req, echo.calls.Load())
	}
	if err := s.Answer(req.ID, map[string]any{"choice": engine.ChoiceOnce}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Wait(ctxT(t), adm.TurnID)
	if err != nil || out.Status != engine.StatusCompleted || echo.calls.Load() != 1 {
		t.Fatalf("outcome %+v %v, calls %d", out, err, echo.calls.Load())
	}
	if names := h.requestTools(0); !slices.Contains(names, "srv__echo") || !slices.Contains(names, "read_file") {
		t.Fatalf("tools sent to the model: %v", names)
	}

	// Another session neither sees nor can call it.
	h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "c2", Name: "srv__echo", Args: []string{`{}`}}), openaitest.Text("ok"))
	out = h.run(other, "try")
	if names := h.requestTools(2); slices.Contains(names, "srv__echo") {
		t.Fatalf("other session was offered %v", names)
	}
	msgs := h.lastRequestMessages()
	if tm := msgs[len(msgs)-1]; tm["role"] != "tool" || !strings.Contains(tm["content"].(string), `Unknown tool "srv__echo"`) || echo.calls.Load() != 1 {
		t.Fatalf("other session's call: %v (calls %d)", tm, echo.calls.Load())
	}

	// Detached, it is gone from the session too.
	detach()
	detach()
	if got := s.AttachedTools(); len(got) != 0 {
		t.Fatalf("after detach: %v", got)
	}
}

func TestAttachToolsRefusesBuiltinNamesAndDetachKeepsReplacement(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.create()
	if _, err := s.AttachTools(&echoTool{name: "x__a"}, &echoTool{name: "read_file"}); !errors.Is(err, engine.ErrToolConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if got := s.AttachedTools(); len(got) != 0 {
		t.Fatalf("a refused attach left %v", got)
	}
	first, err := s.AttachTools(&echoTool{name: "x__a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AttachTools(&echoTool{name: "x__a"}, &echoTool{name: "x__b"}); err != nil {
		t.Fatal(err)
	}
	first() // the replacement stays
	if got := s.AttachedTools(); len(got) != 2 || got[0] != "x__a" || got[1] != "x__b" {
		t.Fatalf("after detaching the replaced set: %v", got)
	}
}

// memFS keeps written files in memory, as an editor's buffers.
type memFS struct {
	mu    sync.Mutex
	files map[string]string
}

func (m *memFS) ReadTextFile(_ context.Context, path string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.files[path]; ok {
		return s, nil
	}
	return "", errors.ErrUnsupported
}

func (m *memFS) WriteTextFile(_ context.Context, path, content string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path] = content
	return nil
}

func TestSetFSRoutesFileToolsAndSubAgents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.create()
	fs := &memFS{files: map[string]string{}}
	s.SetFS(fs)
	h.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "w1", Name: "write_file", Args: []string{`{"path":"a.txt","content":"A"}`}}),
		openaitest.ToolCalls(openaitest.Call{ID: "d1", Name: "delegate_task", Args: []string{`{"goal":"write b"}`}}),
		// the sub-agent's turn
		openaitest.ToolCalls(openaitest.Call{ID: "w2", Name: "write_file", Args: []string{`{"path":"b.txt","content":"B"}`}}),
		openaitest.Text("wrote b"),
		openaitest.Text("all written"),
	)
	if out := h.run(s, "write"); out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.files) != 2 || fs.files[filepath.Join(h.cwd, "a.txt")] != "A" || fs.files[filepath.Join(h.cwd, "b.txt")] != "B" {
		t.Fatalf("lent file system got %v", fs.files)
	}
	for _, n := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(h.cwd, n)); err == nil {
			t.Fatalf("%s reached the disk", n)
		}
	}
}
