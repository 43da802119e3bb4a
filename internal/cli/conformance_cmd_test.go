package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// startConformanceServe runs `hermes serve` on a free loopback port and returns its address; the
// server is stopped (SIGINT) and waited for when the test ends.
func startConformanceServe(t *testing.T, key string) string {
	t.Helper()
	home := t.TempDir()
	cassette := repoPath("scripts", "demo", "demo.cassette.json")
	cmd := hermesCmd(t, home, []string{"HERMES_HOME=" + home, "HERMES_API_KEY=" + key, "HERMES_MODEL=replay:" + cassette, "HERMES_POLICY="},
		"serve", "--addr", "127.0.0.1:0")
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		defer close(addr)
		re := regexp.MustCompile(`listening on http://(\S+)`)
		sc := bufio.NewScanner(logs)
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-drained
		cmd.Wait()
	})
	a, ok := <-addr
	if !ok {
		t.Fatal("hermes serve exited before it listened")
	}
	return a
}

// rowFor returns the table row of a fixture on a transport.
func rowFor(out, fixture, transport string) []string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == fixture && f[1] == transport {
			return f
		}
	}
	return nil
}

func TestConformanceURLTarget(t *testing.T) {
	const key = "conformance-cmd-test-key-0123"
	addr := startConformanceServe(t, key)
	dir := t.TempDir()

	r := hermes(t, dir, nil, "conformance", "--target", "http://"+addr, "--key", key)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.err)
	}
	if row := rowFor(r.stdout, "behaviour_27_auth", "http"); row == nil || row[2] != "pass" {
		t.Fatalf("the remote auth fixture did not pass: %v\n%s", row, r.stdout)
	}
	if row := rowFor(r.stdout, "behaviour_30_run_approval", "http"); row == nil || row[2] != "skip" {
		t.Fatalf("a fixture with its own model was not skipped: %v\n%s", row, r.stdout)
	}
	if strings.Contains(r.stdout, "gateway-stdio") || strings.Contains(r.stdout, "acp-stdio") {
		t.Fatalf("an http target ran other transports:\n%s", r.stdout)
	}

	r = hermes(t, dir, nil, "conformance", "--target", "ws://"+addr+"/api/ws", "--key", key)
	if r.code != 0 {
		t.Fatalf("ws target: exit %d\n%s\n%s", r.code, r.stdout, r.err)
	}
	if row := rowFor(r.stdout, "gateway_errors", "gateway-ws"); row == nil || row[2] != "pass" {
		t.Fatalf("the remote gateway fixture did not pass: %v\n%s", row, r.stdout)
	}

	// the wrong key: every authorised request is refused, so the fixture fails with a diff
	r = hermes(t, dir, nil, "conformance", "--target", "http://"+addr, "--key", "wrong-key-wrong-key")
	if r.code != 1 || rowFor(r.stdout, "behaviour_27_auth", "http")[2] != "FAIL" || !strings.Contains(r.stdout, "differs") {
		t.Fatalf("wrong key: exit %d\n%s\n%s", r.code, r.stdout, r.err)
	}
}

func TestConformanceTargetErrors(t *testing.T) {
	dir := t.TempDir()
	if r := hermes(t, dir, nil, "conformance", "--target", "ftp://example.invalid"); r.code != 1 || !strings.Contains(r.err, "http://") {
		t.Fatalf("bad scheme: exit %d: %s", r.code, r.err)
	}
	if r := hermes(t, dir, nil, "conformance", "--target", filepath.Join(dir, "missing")); r.code != 1 {
		t.Fatalf("missing binary: exit %d: %s", r.code, r.err)
	}
	if r := hermes(t, dir, nil, "conformance", "--transport", "carrier-pigeon"); r.code != 2 {
		t.Fatalf("unknown transport: exit %d: %s", r.code, r.err)
	}
}

// TestConformanceBinaryTarget replays the cli fixtures against this build (the test binary
// acting as hermes): the table lists each with pass.
func TestConformanceBinaryTarget(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := hermes(t, t.TempDir(), nil, "conformance", "--target", exe, "--transport", "cli")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.err)
	}
	for _, f := range []string{"behaviour_27_auth", "policy_allow", "policy_ask", "policy_deny"} {
		if row := rowFor(r.stdout, f, "cli"); row == nil || row[2] != "pass" {
			t.Fatalf("%s: %v\n%s", f, row, r.stdout)
		}
	}
}
