package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-go/hermes/engine/policy"
)

// The edit modes answer the policy's "ask" for an edit: accept_edits inside the working
// directory or the temporary directory, dont_ask wherever the file; both leave a sensitive
// path, a command and a decision that is not "ask" as the policy made it.
func TestEditModesAnswerAsks(t *testing.T) {
	cwd := t.TempDir()
	ask := policy.ApprovalDecision{Decision: policy.Ask, Reason: "ask"}
	call := func(tool, args string) policy.ApprovalInput {
		return policy.ApprovalInput{Tool: tool, Args: json.RawMessage(args), Cwd: cwd}
	}
	outside := filepath.Join(filepath.Dir(os.TempDir()), "elsewhere", "notes.txt")
	if within(os.TempDir(), outside) {
		t.Skip("no path outside the temporary directory to test with")
	}
	cases := []struct {
		in                policy.ApprovalInput
		d                 policy.ApprovalDecision
		acceptEdits, dont string
	}{
		{call("write_file", `{"path":"notes.txt","content":"x"}`), ask, policy.Allow, policy.Allow},
		{call("patch", `{"mode":"replace","path":"src/a.go","old_string":"a","new_string":"b"}`), ask, policy.Allow, policy.Allow},
		{call("write_file", `{"path":"../escape.txt","content":"x"}`), ask, policy.Allow, policy.Allow}, // the temporary directory
		{call("write_file", `{"path":"`+outside+`","content":"x"}`), ask, policy.Ask, policy.Allow},
		{call("write_file", `{"path":".env","content":"KEY=1"}`), ask, policy.Ask, policy.Ask},
		{call("write_file", `{"path":"config/.env.local","content":"KEY=1"}`), ask, policy.Ask, policy.Ask},
		{call("write_file", `{"path":".git/config","content":"x"}`), ask, policy.Ask, policy.Ask},
		{call("write_file", `{"path":"certs/server.pem","content":"x"}`), ask, policy.Ask, policy.Ask},
		{call("patch", `{"mode":"patch","patch":"*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** Add File: .ssh/config\n+Host x\n*** End Patch"}`), ask, policy.Ask, policy.Ask},
		{call("patch", `{"mode":"patch","patch":"*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch"}`), ask, policy.Allow, policy.Allow},
		{call("patch", `{"mode":"patch","patch":"no file named"}`), ask, policy.Ask, policy.Ask},
		{call("terminal", `{"command":"rm -r build"}`), ask, policy.Ask, policy.Ask},
		{call("write_file", `{"path":"notes.txt","content":"x"}`), policy.ApprovalDecision{Decision: policy.Deny}, policy.Deny, policy.Deny},
	}
	for i, c := range cases {
		if got := applyMode(ModeAcceptEdits, c.in, c.d).Decision; got != c.acceptEdits {
			t.Errorf("case %d %s %s: accept_edits %s, want %s", i, c.in.Tool, c.in.Args, got, c.acceptEdits)
		}
		if got := applyMode(ModeDontAsk, c.in, c.d).Decision; got != c.dont {
			t.Errorf("case %d %s %s: dont_ask %s, want %s", i, c.in.Tool, c.in.Args, got, c.dont)
		}
		if got := applyMode(ModeDefault, c.in, c.d).Decision; got != c.d.Decision {
			t.Errorf("case %d: default changed %s to %s", i, c.d.Decision, got)
		}
	}
}
