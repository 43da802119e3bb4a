package mcptool_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
)

// recordingApprover allows everything except the tools in deny, and records what it saw.
type recordingApprover struct {
	mu   sync.Mutex
	seen []string
	deny string
}

func (a *recordingApprover) Approve(_ context.Context, in policy.ApprovalInput) (policy.ApprovalDecision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, in.Tool+" "+string(in.Args))
	if in.Tool == a.deny {
		return policy.ApprovalDecision{Decision: policy.Deny, Reason: "not this one"}, nil
	}
	return policy.ApprovalDecision{Decision: policy.Allow}, nil
}

// TestEngineTurnUsesMCPTool runs a real turn: the model (a fake OpenAI server) calls
// t__echo, the MCP child answers, the model sees the answer; a second call to a denied MCP
// tool goes through the approval policy like any other tool.
func TestEngineTurnUsesMCPTool(t *testing.T) {
	_, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, 0)
	reg := tool.NewRegistry()
	for _, n := range []string{"t__echo", "t__pid"} {
		reg.Add(tools[n])
	}
	srv := openaitest.New(t)
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	appr := &recordingApprover{deny: "t__pid"}
	eng, err := engine.New(engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1})},
		DefaultModel: "openai:fake-agent",
		Tools:        reg,
		Policy:       policy.Set{Approver: appr},
		Cwd:          t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	srv.Enqueue(
		openaitest.ToolCalls(
			openaitest.Call{Name: "t__echo", Args: []string{`{"text":`, `"from the model"}`}},
			openaitest.Call{Name: "t__pid", Args: []string{`{}`}},
		),
		openaitest.Text("The server said it back."),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := eng.Create(ctx, engine.CreateOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := s.Submit(ctx, engine.Prompt{Text: "echo something"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Wait(ctx, adm.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || out.Text != "The server said it back." {
		t.Fatalf("outcome %+v", out)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	first, second := string(reqs[0].Body), string(reqs[1].Body)
	if !strings.Contains(first, `"t__echo"`) || !strings.Contains(first, `"text"`) {
		t.Errorf("the MCP tool and its schema were not offered: %s", first)
	}
	if !strings.Contains(second, "echo: from the model") {
		t.Errorf("the model did not see the MCP result: %s", second)
	}
	if !strings.Contains(second, "BLOCKED") {
		t.Errorf("the denied MCP call was not blocked: %s", second)
	}
	appr.mu.Lock()
	defer appr.mu.Unlock()
	slices.Sort(appr.seen) // the engine may run the two calls in either order
	if len(appr.seen) != 2 || !strings.HasPrefix(appr.seen[0], "t__echo ") || !strings.HasPrefix(appr.seen[1], "t__pid ") {
		t.Errorf("approver saw %q", appr.seen)
	}
}

// askApprover asks about every call.
type askApprover struct{}

func (askApprover) Approve(context.Context, policy.ApprovalInput) (policy.ApprovalDecision, error) {
	return policy.ApprovalDecision{Decision: policy.Ask, Reason: "every call is confirmed"}, nil
}

// TestAskPolicyCoversMCPTools: under an ask policy an MCP tool call raises an approval request
// naming the namespaced tool; the server is not called until the request is answered.
func TestAskPolicyCoversMCPTools(t *testing.T) {
	_, tools, _ := newManager(t, map[string]mcptool.ServerConfig{"t": stdioServer("ok")}, 0)
	reg := tool.NewRegistry(tools["t__echo"])
	srv := openaitest.New(t)
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1})},
		DefaultModel: "openai:fake-agent",
		Tools:        reg,
		Policy:       policy.Set{Approver: askApprover{}},
		Cwd:          t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "t__echo", Args: []string{`{"text":"approved words"}`}}),
		openaitest.Text("done"),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := eng.Create(ctx, engine.CreateOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	adm, err := s.Submit(ctx, engine.Prompt{Text: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	var req engine.Request
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no approval request: %v", err)
		}
		if ev.Type == engine.EvToolComplete {
			t.Fatal("the MCP tool ran before it was approved")
		}
		if r, ok := ev.Data.(engine.Request); ok {
			req = r
			break
		}
	}
	if req.Kind != engine.KindApproval || req.Payload["tool"] != "t__echo" {
		t.Fatalf("request %+v", req)
	}
	if len(srv.Requests()) != 1 {
		t.Fatalf("%d model requests while the approval is open", len(srv.Requests()))
	}
	if err := s.Answer(req.ID, map[string]any{"choice": engine.ChoiceOnce}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Wait(ctx, adm.TurnID)
	if err != nil || out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v %v", out, err)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "echo: approved words") {
		t.Fatalf("the approved call's result did not reach the model")
	}
}
