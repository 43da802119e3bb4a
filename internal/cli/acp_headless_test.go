package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/interop"
)

// TestACPHeadlessInterop runs interop/node/acp_headless.mjs: the official ACP client spawning
// one `hermes acp` process per command on one home, each with its stdin closed right behind
// its last request.
func TestACPHeadlessInterop(t *testing.T) {
	n := interop.RequireNode(t)
	n.Package(t, "@agentclientprotocol/sdk")
	home, work := t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("Built ", "fine."))
	bin, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Bin, "acp_headless.mjs")
	cmd.Dir = n.Dir
	cmd.Env = append(os.Environ(),
		"HERMES_BIN="+bin, "HERMES_TEST_AS_MAIN=1", "ACP_WORK="+work,
		"HERMES_HOME="+home, "HERMES_MODEL=openai:fake", "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY=test-key",
		"HERMES_POLICY=",
	)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node acp_headless.mjs: %v\n%s", err, out.String())
	}
	t.Logf("node acp_headless.mjs:\n%s", out.String())
	if got := strings.Count(out.String(), "ok - process"); got != 3 {
		t.Fatalf("%d of 3 processes passed", got)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || !bytes.Contains(reqs[0].Body, []byte("headless: summarize the build")) {
		t.Fatalf("model requests: %d", len(reqs))
	}
}

// TestACPAnswersAfterEOF writes requests to `hermes acp` and closes stdin at once, as
// `printf … | hermes acp` does: every request read is still answered before the process exits.
func TestACPAnswersAfterEOF(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	env := []string{"HERMES_HOME=" + home, "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=test-key", "HERMES_MODEL=openai:fake"}
	run := func(lines ...string) map[string]json.RawMessage {
		t.Helper()
		cmd := hermesCmd(t, work, env, "acp")
		cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("hermes acp: %v\n%s", err, stderr.String())
		}
		answers := map[string]json.RawMessage{}
		sc := bufio.NewScanner(&stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("stdout line %q: %v", sc.Text(), err)
			}
			if m.Method == "" {
				if m.Error != nil {
					t.Fatalf("request %s failed: %s", m.ID, m.Error)
				}
				answers[string(m.ID)] = m.Result
			}
		}
		return answers
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
	a := run(init, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, work))
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(a["2"], &created) != nil || created.SessionID == "" || a["1"] == nil {
		t.Fatalf("answers after EOF: %v", a)
	}
	// The next process finds the session: it was stored before session/new was answered.
	srv.Enqueue(openaitest.Text("still here"))
	b := run(init,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/resume","params":{"sessionId":%q,"cwd":%q}}`, created.SessionID, work))
	if b["2"] == nil {
		t.Fatalf("resume in a new process: %v", b)
	}
}
