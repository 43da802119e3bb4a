package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/interop"
)

// TestACPElicitationInterop runs interop/node/acp_elicit.mjs: the official ACP client, with
// elicitation forms advertised, answers a free-text clarify question's form (accepted, then
// declined) against the real `hermes acp`, every line schema-checked.
func TestACPElicitationInterop(t *testing.T) {
	n := interop.RequireNode(t)
	n.Package(t, "@agentclientprotocol/sdk")
	home, work := t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_name", Name: "clarify", Args: []string{`{"question":"What should the service be called?"}`}}),
		openaitest.Text("Named it ", "api-gateway."),
		openaitest.ToolCalls(openaitest.Call{ID: "call_port", Name: "clarify", Args: []string{`{"question":"Which port?"}`}}),
		openaitest.Text("Using 8080."),
	)
	bin, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Bin, "acp_elicit.mjs")
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
		t.Fatalf("node acp_elicit.mjs: %v\n%s", err, out.String())
	}
	t.Logf("node acp_elicit.mjs:\n%s", out.String())
	if got := strings.Count(out.String(), "ok - "); got != 3 {
		t.Fatalf("%d of 3 checks passed", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model requests: %d", len(reqs))
	}
	if !bytes.Contains(reqs[1].Body, []byte(`"content":"api-gateway"`)) {
		t.Errorf("the accepted answer did not reach the model: %.1500s", reqs[1].Body)
	}
	if !bytes.Contains(reqs[3].Body, []byte("request withdrawn: the user declined to answer")) {
		t.Errorf("the declined question's result: %.1500s", reqs[3].Body)
	}
}
