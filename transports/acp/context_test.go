package acp_test

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/acp"
)

// The context meter after every turn is the session's context (the last call's prompt and
// answer, against the model's window), and a turn that compacts shows it as two thought
// notices followed by the meter the compaction left, before the answer.
func TestContextMeterAndCompactionNotices(t *testing.T) {
	t.Parallel()
	const window = 12000
	srv := openaitest.New(t, openaitest.WithContextWindow(window), openaitest.WithResponder(func(r openaitest.Request) openaitest.Response {
		var b struct {
			Messages []struct {
				Content any `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(r.Body, &b)
		if last, _ := b.Messages[len(b.Messages)-1].Content.(string); strings.HasPrefix(last, "Summarise the conversation so far") {
			return openaitest.Text("The user said hi.")
		}
		return openaitest.Text("ok")
	}))
	eng, cwd := newEngineWith(t, openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1}), "queue", func(c *engine.Config) {
		c.ContextWindows = map[string]int{"openai:fake-agent": window}
	})
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	sess, err := eng.Open(ctx, string(id))
	if err != nil {
		t.Fatal(err)
	}
	meters := func(ns []sdk.SessionNotification) []sdk.SessionUsageUpdate {
		var out []sdk.SessionUsageUpdate
		for _, n := range ns {
			if n.Update.UsageUpdate != nil {
				out = append(out, *n.Update.UsageUpdate)
			}
		}
		return out
	}
	c.cl.take()
	if c.prompt(t, ctx, id, "hi") != sdk.StopReasonEndTurn {
		t.Fatal("first prompt did not end the turn")
	}
	ci := sess.Context()
	m := meters(c.cl.take())
	if len(m) == 0 || m[len(m)-1].Used != ci.Used || m[len(m)-1].Size != window || ci.Used <= 0 || ci.Estimated {
		t.Fatalf("meters %+v after the first turn; session context %+v", m, ci)
	}
	if n := srv.Requests(); openaitest.RequestTokens(n[len(n)-1].Body) > ci.Used {
		t.Fatalf("used %d is less than the last request's %d tokens: not the context of the last call", ci.Used, openaitest.RequestTokens(n[len(n)-1].Body))
	}

	if c.prompt(t, ctx, id, "big: "+strings.Repeat("a paste that fills the window. ", 900)) != sdk.StopReasonEndTurn {
		t.Fatal("second prompt did not end the turn")
	}
	ns := c.cl.take()
	var order []string
	for _, n := range ns {
		u := n.Update
		switch {
		case u.AgentThoughtChunk != nil && u.AgentThoughtChunk.Content.Text != nil:
			order = append(order, "thought:"+strings.Fields(u.AgentThoughtChunk.Content.Text.Text)[0])
		case u.UsageUpdate != nil:
			order = append(order, "usage")
		case u.AgentMessageChunk != nil:
			order = append(order, "message")
		}
	}
	if got := strings.Join(order, " "); !strings.HasPrefix(got, "thought:compacting thought:compacted: usage message") || !strings.HasSuffix(got, "usage") {
		t.Fatalf("updates of the compacting turn: %s", got)
	}
	ci = sess.Context()
	m = meters(ns)
	if ci.Compressions != 1 || m[len(m)-1].Used != ci.Used || m[len(m)-1].Size != window || m[0].Size != window {
		t.Fatalf("meters %+v; session context %+v", m, ci)
	}
}
