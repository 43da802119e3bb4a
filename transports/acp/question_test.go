package acp_test

import (
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/agent"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/transports/acp"
)

func withClarify(c *engine.Config) {
	c.Tools = tool.NewRegistry(append(builtin.Defaults(dangerCheck), agent.Clarify{})...)
}

func TestClarifyWithChoicesIsAPermissionRequest(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngineWith(t, p, "", withClarify)
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	c.cl.decide = choose("choice_2")
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "q1", Name: "clarify", Args: []string{`{"question":"Which database?","choices":["sqlite","postgres"]}`}}),
		openaitest.Text("Using postgres."))
	if sr := c.prompt(t, ctx, id, "set up storage"); sr != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %s", sr)
	}
	c.cl.mu.Lock()
	perms := c.cl.perms
	c.cl.mu.Unlock()
	if len(perms) != 1 || string(perms[0].ToolCall.ToolCallId) != "q1" || *perms[0].ToolCall.Title != "Which database?" {
		t.Fatalf("permission requests %+v", perms)
	}
	var opts []string
	for _, o := range perms[0].Options {
		opts = append(opts, string(o.OptionId)+"="+o.Name)
	}
	if strings.Join(opts, " ") != "choice_1=sqlite choice_2=postgres skip=Skip" {
		t.Fatalf("options %v", opts)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `"content":"postgres"`) {
		t.Fatalf("the model did not get the answer: %s", reqs[len(reqs)-1].Body)
	}
	tr := summarize(c.cl.take())
	tr.assertClosed(t)
}

func TestUnanswerableQuestionIsWithdrawnAndClarifyHidden(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngineWith(t, p, "", withClarify)
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	// A free-text question: the client has no way to answer it, so the turn goes on at once
	// (the test's 60 s bound is far below the question timeout).
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "q1", Name: "clarify", Args: []string{`{"question":"What should the service be called?"}`}}),
		openaitest.Text("I named it api."))
	if sr := c.prompt(t, ctx, id, "create the service"); sr != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %s", sr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "did not answer") {
		t.Fatalf("tool result: %s", reqs[len(reqs)-1].Body)
	}
	offered := func(body []byte) bool {
		return strings.Contains(string(body), `"function":{"name":"clarify","description"`)
	}
	if !offered(reqs[0].Body) || offered(reqs[1].Body) {
		t.Fatal("clarify still offered to the model after a question the client could not answer")
	}
	c.cl.mu.Lock()
	n := len(c.cl.perms)
	c.cl.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d permission requests for a free-text question", n)
	}
	summarize(c.cl.take()).assertClosed(t)
}
