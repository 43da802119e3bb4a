package acp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/acp"
)

func TestEditsReviewedBeforeTheyAreWritten(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	c := connect(t, eng, cwd, acp.Options{Logger: quiet})
	ctx := testCtx(t)
	id := c.newSession(t, ctx)
	a := filepath.Join(cwd, "a.txt")
	if err := os.WriteFile(a, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, _ := os.ReadFile(a)
		return string(b)
	}

	// Rejected: nothing is written, and the model is told.
	var onDisk string
	c.cl.decide = func(sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
		onDisk = read() // what the file holds while the person looks at the diff
		return choose(acp.OptDeny)(sdk.RequestPermissionRequest{})
	}
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "p1", Name: "patch", Args: []string{`{"mode":"replace","path":"a.txt","old_string":"keep","new_string":"gone"}`}}), openaitest.Text("ok"))
	c.prompt(t, ctx, id, "change it")
	if onDisk != "keep\n" || read() != "keep\n" {
		t.Fatalf("file during review %q, after a rejection %q", onDisk, read())
	}
	if body := string(srv.Requests()[1].Body); !strings.Contains(body, "rejected this edit") || !strings.Contains(body, "was not modified") {
		t.Fatalf("the model was not told: %.400s", body)
	}
	summarize(c.cl.take()).assertClosed(t)

	// "Allow for this session": written, and the next edit of the session is not asked.
	c.cl.mu.Lock()
	c.cl.perms = nil
	c.cl.mu.Unlock()
	c.cl.decide = choose(acp.OptAllowSession)
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "w1", Name: "write_file", Args: []string{`{"path":"new/b.txt","content":"fresh\n"}`}}),
		openaitest.ToolCalls(openaitest.Call{ID: "p2", Name: "patch", Args: []string{`{"mode":"replace","path":"a.txt","old_string":"keep","new_string":"kept"}`}}),
		openaitest.Text("done"))
	c.prompt(t, ctx, id, "write both")
	b, _ := os.ReadFile(filepath.Join(cwd, "new", "b.txt"))
	if string(b) != "fresh\n" || read() != "kept\n" {
		t.Fatalf("after approval: b=%q a=%q", b, read())
	}
	c.cl.mu.Lock()
	perms := c.cl.perms
	c.cl.mu.Unlock()
	if len(perms) != 1 || string(perms[0].ToolCall.ToolCallId) != "w1" {
		t.Fatalf("permission requests %d (want one, for w1)", len(perms))
	}
	d := perms[0].ToolCall.Content[0].Diff
	if d == nil || d.Path != filepath.Join(cwd, "new", "b.txt") || d.OldText != nil || d.NewText != "fresh\n" {
		t.Fatalf("new-file diff %+v", perms[0].ToolCall.Content)
	}
	var opts []string
	for _, o := range perms[0].Options {
		opts = append(opts, string(o.OptionId))
	}
	if strings.Join(opts, " ") != "allow_once allow_session deny" {
		t.Fatalf("options %v", opts)
	}

	// The edit modes do not ask (a new session, which has approved nothing).
	id2 := c.newSessionNoInit(t, ctx)
	if _, err := c.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: id2, ModeId: "accept_edits"}); err != nil {
		t.Fatal(err)
	}
	c.cl.decide = nil // a request would be answered cancelled, i.e. refused
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "w2", Name: "write_file", Args: []string{`{"path":"c.txt","content":"C"}`}}), openaitest.Text("ok"))
	c.prompt(t, ctx, id2, "write c")
	if b, _ := os.ReadFile(filepath.Join(cwd, "c.txt")); string(b) != "C" {
		t.Fatalf("accept_edits: %q", b)
	}
}
