package cli

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/interop"
)

// startMCPHTTP runs `hermes mcp serve --http 127.0.0.1:0` (this test binary acting as hermes)
// and returns its URL and a stop function that sends SIGTERM and returns the exit error.
func startMCPHTTP(t *testing.T, dir string, env []string) (url string, stop func() error) {
	t.Helper()
	cmd := hermesCmd(t, dir, env, "mcp", "serve", "--http", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start-up line: %v", err)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), "streamable HTTP on ")
	if !ok {
		t.Fatalf("start-up line %q", line)
	}
	return url, func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		err := cmd.Wait()
		exited = true
		return err
	}
}

// TestMCPInteropTypeScriptClient drives `hermes mcp serve` with the official TypeScript MCP
// client (interop/node/mcp_client.mjs) over stdio and over streamable HTTP: create a session,
// prompt it (a fake model answers), list sessions, read the history.
func TestMCPInteropTypeScriptClient(t *testing.T) {
	n := interop.RequireNode(t)
	n.Package(t, "@modelcontextprotocol/sdk")
	bin, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			home, work := t.TempDir(), t.TempDir()
			srv := openaitest.New(t)
			answer := "Hermes answers the " + mode + " client."
			srv.Enqueue(openaitest.Text(answer))
			env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=test"}
			args := []string{filepath.Join(n.Dir, "mcp_client.mjs"), mode}
			var stop func() error
			if mode == "http" {
				var url string
				url, stop = startMCPHTTP(t, work, env)
				args = append(args, url)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, n.Bin, args...)
			cmd.Dir = n.Dir
			cmd.Env = append(os.Environ(), append(env, "HERMES_BIN="+bin, "HERMES_TEST_AS_MAIN=1", "MCP_WORK="+work, "MCP_EXPECT_ANSWER="+answer)...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("node mcp_client.mjs %s: %v\n%s", mode, err, out.String())
			}
			if !strings.Contains(out.String(), "ok - "+mode+": get_history") || strings.Contains(out.String(), "not ok") {
				t.Fatalf("incomplete run:\n%s", out.String())
			}
			reqs := srv.Requests()
			if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "hello over "+mode) {
				t.Fatalf("%d model requests; the prompt did not reach the model", len(reqs))
			}
			if stop != nil {
				if err := stop(); err != nil {
					t.Fatalf("hermes mcp serve --http after SIGTERM: %v", err)
				}
			}
		})
	}
}

// TestMCPStatusWithThirdPartyServers: `hermes mcp status` with the npm filesystem server, a
// server whose tools have malformed schemas (listed as skipped, the rest offered) and one that
// exits at start (FAIL with what it printed).
func TestMCPStatusWithThirdPartyServers(t *testing.T) {
	n := interop.RequireNode(t)
	home, data := t.TempDir(), t.TempDir()
	cfg := "mcp:\n  servers:\n" +
		"    fs:\n      command: " + n.BinScript(t, "mcp-server-filesystem") + "\n      args: [" + data + "]\n" +
		"    bad:\n      command: " + n.Bin + "\n      args: [" + filepath.Join(n.Dir, "mcp_bad.mjs") + "]\n" +
		"    quitter:\n      command: " + n.Bin + "\n      args: [-e, 'console.error(\"quitter: no licence key\"); process.exit(2)']\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := hermes(t, t.TempDir(), []string{"HERMES_HOME=" + home}, "mcp", "status")
	if r.code != 1 {
		t.Fatalf("exit %d: %+v", r.code, r)
	}
	for _, want := range []string{
		"fs (stdio): ok, ", "  fs__read_text_file\n",
		"bad (stdio): ok, 5 tools\n", "  bad__ok\n",
		`  skipped string_schema: malformed input schema: input schema type is string, want "object"`,
		"  skipped array_properties: malformed input schema",
		"quitter (stdio): FAIL ", "quitter: no licence key",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
}
