package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// TestLeaseAcrossGatewayProcesses: two `hermes gateway` processes on one home (through its
// store process) prompt one session while a turn runs in the first. The second gets the
// busy-input policy's answer for each mode, given by the process running the turn; only that
// process calls the model.
func TestLeaseAcrossGatewayProcesses(t *testing.T) {
	for _, mode := range []string{"queue", "steer", "interrupt", "reject"} {
		t.Run(mode, func(t *testing.T) {
			home, cwd := t.TempDir(), t.TempDir()
			t.Setenv(envStoreProcess, "on")
			t.Setenv(envStoreIdle, "300ms")
			t.Cleanup(func() { waitStoreProcessGone(t, home) })
			if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("busy_input_mode: "+mode+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := openaitest.New(t)
			gate := openaitest.NewGate()
			srv.Enqueue(openaitest.Response{Text: []string{"first ", "answer"}, FaultAt: 2, Gate: gate}, openaitest.Text("second answer"))
			env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=k"}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			call := func(c *gwclient.Client, method string, params any) map[string]any {
				t.Helper()
				var out map[string]any
				if err := c.CallInto(ctx, method, params, &out); err != nil {
					t.Fatalf("%s: %v", method, err)
				}
				return out
			}
			a, b := gatewayProcess(t, cwd, env), gatewayProcess(t, cwd, env)
			created := call(a, "session.create", map[string]any{})
			sid, stored := created["session_id"].(string), created["stored_session_id"].(string)
			if r := call(a, "prompt.submit", map[string]any{"session_id": sid, "text": "first"}); r["status"] != "streaming" {
				t.Fatalf("first prompt: %v", r)
			}
			select {
			case <-gate.Reached():
			case <-ctx.Done():
				t.Fatal("the first turn never reached the model")
			}
			bsid := call(b, "session.resume", map[string]any{"session_id": stored})["session_id"].(string)
			r := call(b, "prompt.submit", map[string]any{"session_id": bsid, "text": "second"})
			want := map[string]string{"queue": "queued", "steer": "steered", "interrupt": "queued", "reject": "rejected"}[mode]
			if r["status"] != want {
				t.Fatalf("second prompt through the other process: %v, want status %q", r, want)
			}
			gate.Release()
			// The process holding the session finishes the turn, and the follow-up the
			// queue (or the interrupt) left.
			wantCalls := 1
			if mode == "queue" || mode == "interrupt" {
				wantCalls = 2
			}
			for n, from := 0, 0; n < wantCalls; n++ {
				_, i, err := a.WaitType(ctx, from, sid, "message.complete")
				if err != nil {
					t.Fatalf("turn %d in the holding process: %v", n+1, err)
				}
				from = i + 1
			}
			if got := len(srv.Requests()); got != wantCalls {
				t.Fatalf("model calls %d, want %d (only the holder runs turns)", got, wantCalls)
			}
		})
	}
}
