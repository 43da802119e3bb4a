package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/redact"
	"github.com/hermes-go/hermes/engine/store"
)

// The server's own credentials (the values config.Load registers with redact) never leave
// through a tool: a file tool reading config.yaml and a terminal that cats it give the model,
// the transcript and the events the file with the keys masked. Text that only looks like a
// secret is the user's own and passes unchanged.
func TestToolOutputMasksTheConfiguredSecrets(t *testing.T) {
	t.Parallel()
	const secret = "hk-test-admin-0f3a9c1b7e5d2468"
	redact.Register(secret)
	h := enginetest.New(t, enginetest.Options{Memory: true})
	cfg := "server:\n  admin_api_key: " + secret + "\n  note: sk-lookalike-but-not-registered-0000\n"
	if err := os.WriteFile(filepath.Join(h.Cwd, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h.Server.Enqueue(
		openaitest.ToolCalls(openaitest.Call{Name: "read_file", Args: []string{`{"path":"config.yaml"}`}}),
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"cat config.yaml"}`}}),
		openaitest.Text("done"),
	)
	s := h.Create()
	if out := h.Run(s, "show me the config"); !out.Completed {
		t.Fatalf("turn: %s %s: %s", out.Status, out.ExitReason, out.Error)
	}
	reqs := h.Server.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if strings.Contains(string(r.Body), secret) {
			t.Fatalf("model request %d carries the secret:\n%s", i, r.Body)
		}
	}
	last := string(reqs[2].Body)
	if strings.Count(last, redact.Mask) < 2 || !strings.Contains(last, "sk-lookalike-but-not-registered-0000") {
		t.Fatalf("the model should see both outputs masked and the look-alike unchanged:\n%s", last)
	}
	rows, err := s.History(context.Background(), store.RowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	tools := 0
	for _, r := range rows {
		if strings.Contains(r.Content, secret) {
			t.Fatalf("stored %s row carries the secret: %q", r.Role, r.Content)
		}
		if r.Role == "tool" && strings.Contains(r.Content, "admin_api_key: "+redact.Mask) {
			tools++
		}
	}
	if tools != 2 {
		t.Fatalf("%d stored tool rows show the masked key, want 2: %+v", tools, rows)
	}
	evs, _ := s.EventsSince(0)
	completes := 0
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b)+ev.Text, secret) {
			t.Fatalf("event %s carries the secret: %s", ev.Type, b)
		}
		if ev.Type == engine.EvToolComplete {
			completes++
		}
	}
	if completes != 2 {
		t.Fatalf("%d tool.complete events, want 2", completes)
	}
}
