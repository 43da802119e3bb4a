package acp_test

import (
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/acp"
)

// kinds lists the sessionUpdate kinds of ns, in order.
func kinds(ns []sdk.SessionNotification) []string {
	var out []string
	for _, n := range ns {
		u := n.Update
		switch {
		case u.AvailableCommandsUpdate != nil:
			out = append(out, "available_commands_update")
		case u.UsageUpdate != nil:
			out = append(out, "usage_update")
		case u.SessionInfoUpdate != nil:
			out = append(out, "session_info_update")
		case u.AgentMessageChunk != nil:
			out = append(out, "agent_message_chunk")
		}
	}
	return out
}

func TestSlashCommandsAnsweredLocally(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{Logger: quiet, Version: "1.2.3"})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)

	// The commands are advertised right behind the session/new response.
	say := func(text string) (transcript, []sdk.SessionNotification) {
		t.Helper()
		if sr := c.prompt(t, ctx, id, text); sr != sdk.StopReasonEndTurn {
			t.Fatalf("%s: stop reason %s", text, sr)
		}
		ns := c.cl.take()
		return summarize(ns), ns
	}
	tr, ns := say("/help")
	var cmds []string
	for _, n := range ns {
		if u := n.Update.AvailableCommandsUpdate; u != nil {
			for _, c := range u.AvailableCommands {
				cmds = append(cmds, c.Name)
			}
		}
	}
	if strings.Join(cmds, " ") != "help model tools context reset compact steer queue version" {
		t.Fatalf("available commands %v (updates %v)", cmds, kinds(ns))
	}
	if !strings.Contains(tr.message, "/compact <focus (optional)>") || !strings.Contains(tr.message, "/queue <prompt>") {
		t.Fatalf("/help: %q", tr.message)
	}
	if tr, _ := say("/version"); tr.message != "Hermes 1.2.3 (ACP protocol v1)" {
		t.Fatalf("/version: %q", tr.message)
	}
	if tr, _ := say("/tools"); !strings.Contains(tr.message, "terminal") || !strings.Contains(tr.message, "write_file") {
		t.Fatalf("/tools: %q", tr.message)
	}
	if tr, _ := say("/context"); !strings.HasPrefix(tr.message, "Context: ") {
		t.Fatalf("/context: %q", tr.message)
	}
	if tr, _ := say("/steer"); tr.message != "Usage: /steer <guidance>" {
		t.Fatalf("/steer without text: %q", tr.message)
	}
	if len(srv.Requests()) != 0 {
		t.Fatalf("a command reached the model: %d requests", len(srv.Requests()))
	}

	// Idle, /queue's text is the prompt; the first answered turn titles the session.
	srv.Enqueue(openaitest.Text("done"))
	tr, ns = say("/queue   fix the build\nand more")
	if tr.message != "done" || !strings.Contains(string(srv.Requests()[0].Body), "fix the build") {
		t.Fatalf("/queue while idle: %q", tr.message)
	}
	var title string
	for _, n := range ns {
		if u := n.Update.SessionInfoUpdate; u != nil && u.Title != nil {
			title = *u.Title
		}
	}
	if title != "fix the build" {
		t.Fatalf("title %q (updates %v)", title, kinds(ns))
	}
	if k := kinds(ns); k[len(k)-1] != "usage_update" {
		t.Fatalf("no usage_update ends the prompt: %v", k)
	}
	l, err := c.ListSessions(ctx, sdk.ListSessionsRequest{})
	if err != nil || len(l.Sessions) != 1 || l.Sessions[0].Title == nil || *l.Sessions[0].Title != "fix the build" {
		t.Fatalf("list: %+v %v", l, err)
	}

	if tr, _ := say("/reset"); tr.message != "Conversation cleared (1 turns archived)." {
		t.Fatalf("/reset: %q", tr.message)
	}
	// An unknown slash word is the model's.
	srv.Enqueue(openaitest.Text("no such command"))
	if tr, _ := say("/frobnicate"); tr.message != "no such command" {
		t.Fatalf("/frobnicate: %q", tr.message)
	}
}

func TestListShowsFirstMessageBeforeTitle(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	// A turn that fails gets no automatic title; the list shows the first message instead.
	srv.Enqueue(openaitest.Response{Status: 400})
	c.prompt(t, ctx, id, "  why does   the build fail on arm64 when the cache is cold and the moon is full?")
	l, err := c.ListSessions(ctx, sdk.ListSessionsRequest{})
	if err != nil || len(l.Sessions) != 1 || l.Sessions[0].Title == nil {
		t.Fatalf("list: %+v %v", l, err)
	}
	if got := *l.Sessions[0].Title; got != "why does the build fail on arm64 when the cache is cold and…" {
		t.Fatalf("preview %q", got)
	}
}
