package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/interop"
)

// acpScriptStep is one model request the Node suite causes, in order: the scripted answer,
// the model the request must name, and text its body must contain (the turn's prompt, or
// history the request must carry).
type acpScriptStep struct {
	resp  openaitest.Response
	model string
	body  []string
}

func acpTerminal(id, command string) openaitest.Response {
	args, _ := json.Marshal(map[string]string{"command": command})
	return openaitest.ToolCalls(openaitest.Call{ID: id, Name: "terminal", Args: []string{string(args)}})
}

// acpInteropScript mirrors the case order of interop/node/acp_interop.mjs. A case that makes
// no model request (initialize, session/new, /model, list, close, load, resume) has no row.
var acpInteropScript = []acpScriptStep{
	// --- first hermes acp process ---
	// prompt: streamed in three fragments
	{openaitest.Text("Hello", " from", " Hermes."), "fake", []string{"stream: say hello"}},
	// permission allow once: the dangerous call, then the answer after it ran
	{acpTerminal("call_once", "rm -r build-once"), "fake", []string{"allow-once: remove build-once"}},
	{openaitest.Text("Removed build-once."), "fake", []string{`"tool_call_id":"call_once"`}},
	// permission allow for session: two matching calls, one question
	{acpTerminal("call_s1", "rm -r build-s1"), "fake", []string{"allow-session: remove build-s1 and build-s2"}},
	{acpTerminal("call_s2", "rm -r build-s2"), "fake", []string{`"tool_call_id":"call_s1"`}},
	{openaitest.Text("Removed both."), "fake", []string{`"tool_call_id":"call_s2"`}},
	// permission deny (second session): the model sees the refusal
	{acpTerminal("call_deny", "rm -r keep"), "fake", []string{"deny: remove keep"}},
	{openaitest.Text("Left keep alone."), "fake", []string{"BLOCKED: the user denied"}},
	// cancel mid-tool: the turn is cancelled during the sleep, so no follow-up request
	{acpTerminal("call_sleep", "sleep 30"), "fake", []string{"cancel: wait"}},
	// cancel while the permission request is open: the turn ends before the call runs
	{acpTerminal("call_perm", "rm -r keep"), "fake", []string{"cancel-permission: remove keep"}},
	// prompt content blocks: the embedded resource as context, the image as an image part
	{openaitest.Text("Seen."), "fake", []string{"EMBEDDED-CONTEXT-MARKER", "notes.md", `"type":"image_url"`, "data:image/png;base64,"}},
	// second concurrent prompt (third session): the first turn sleeps until interrupted,
	// then the second prompt's turn runs
	{acpTerminal("call_busy", "sleep 30"), "fake", []string{"busy: first"}},
	{openaitest.Text("Second prompt wins."), "fake", []string{"busy: second"}},
	// /model openai:other (no request), a turn on it, then the config option sets it back
	{openaitest.Text("Answered by other."), "other", []string{"model: which model?"}},
	{openaitest.Text("Answered by fake."), "fake", []string{"model: and now?"}},
	// fork of the first session: the fork's first turn carries the parent's history
	{openaitest.Text("Forked reply."), "fake", []string{"fork: continue", "Hello from Hermes.", "Answered by fake."}},
	// --- second process, same HERMES_HOME ---
	// resume of the second session: the turn carries its history from the first process
	{openaitest.Text("Resumed."), "fake", []string{"resume: still there?", "Left keep alone.", "Seen."}},
}

// TestACPInterop runs the official ACP TypeScript client against the real `hermes acp`
// (this test binary acting as hermes), with every line on the wire schema-checked.
func TestACPInterop(t *testing.T) {
	n := interop.RequireNode(t)
	n.Package(t, "@agentclientprotocol/sdk")
	home, work := t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	cfg := "approvals:\n  timeout: 60s\nproviders:\n  openai:\n    models: [fake, other]\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range acpInteropScript {
		srv.Enqueue(s.resp)
	}
	bin, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Bin, "acp_interop.mjs")
	cmd.Dir = n.Dir
	// node hands its environment to the agent it spawns; HERMES_TEST_AS_MAIN makes this test
	// binary run as hermes there.
	cmd.Env = append(os.Environ(),
		"HERMES_BIN="+bin, "HERMES_TEST_AS_MAIN=1", "ACP_WORK="+work,
		"HERMES_HOME="+home, "HERMES_MODEL=openai:fake", "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY=test-key",
		"HERMES_POLICY=", // the built-in policy: dangerous commands ask, the busy default applies
	)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil {
		t.Fatalf("node acp_interop.mjs: %v\n%s", err, out.String())
	}
	t.Logf("node acp_interop.mjs:\n%s", out.String())

	reqs := srv.Requests()
	if len(reqs) != len(acpInteropScript) || srv.Pending() != 0 {
		t.Fatalf("model requests: got %d, scripted %d, %d unused", len(reqs), len(acpInteropScript), srv.Pending())
	}
	for i, s := range acpInteropScript {
		var body struct {
			Model string `json:"model"`
		}
		if err := json.Unmarshal(reqs[i].Body, &body); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if body.Model != s.model {
			t.Errorf("request %d: model %q, want %q", i, body.Model, s.model)
		}
		for _, want := range s.body {
			if !strings.Contains(string(reqs[i].Body), want) {
				t.Errorf("request %d lacks %q:\n%.2000s", i, want, reqs[i].Body)
			}
		}
	}
}
