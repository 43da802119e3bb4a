package mcptool_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
	"github.com/hermes-go/hermes/engine/tool/toolenv"
)

// TestStdioServerEnvironmentHidesKeys starts a real stdio server (this test binary) with
// Hermes' and a provider's key in this process's environment: the server sees neither, and
// sees its configured env and the variable the user passes through.
func TestStdioServerEnvironmentHidesKeys(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-openai-key-0001")
	t.Setenv("HERMES_API_KEY", "hk-test-hermes-key-0002")
	t.Setenv("UNLISTED_SECRET", "unlisted-secret-0003")
	t.Setenv("PASS_ME", "passed-through-0004")
	cfg := stdioServer("env")
	cfg.Env["CONFIGURED_TOKEN"] = "configured-0005"
	m := mcptool.New(map[string]mcptool.ServerConfig{"srv": cfg}, mcptool.Options{
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		StartTimeout: 20 * time.Second,
		Env:          toolenv.Policy{Passthrough: []string{"PASS_ME"}},
	})
	defer m.Close()
	var envTool tool.Tool
	for _, tl := range m.Tools(context.Background()) {
		if tl.Spec().Name == "srv__env" {
			envTool = tl
		}
	}
	if envTool == nil {
		t.Fatalf("env tool not offered; status %+v", m.Status())
	}
	res, err := envTool.Call(context.Background(), tool.Call{ID: "c1", Name: "srv__env", Args: json.RawMessage(`{}`)}, &tool.Env{})
	if err != nil || res.IsError {
		t.Fatalf("env: %v %+v", err, res)
	}
	for _, secret := range []string{"sk-test-openai-key-0001", "hk-test-hermes-key-0002", "unlisted-secret-0003"} {
		if strings.Contains(res.Content, secret) {
			t.Errorf("the server saw %q:\n%s", secret, res.Content)
		}
	}
	for _, want := range []string{"PASS_ME=passed-through-0004", "CONFIGURED_TOKEN=configured-0005", "MCPTOOL_TEST_SERVER=env", "PATH="} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("the server did not see %q:\n%s", want, res.Content)
		}
	}
}

// TestStatusRedactsURLSecrets: a server that cannot be reached reports an error naming its
// URL, without the user info or token the URL carries.
func TestStatusRedactsURLSecrets(t *testing.T) {
	m := mcptool.New(map[string]mcptool.ServerConfig{"remote": {
		URL:     "http://alice:hunter2pw@127.0.0.1:1/mcp?token=tok-secret-77&x=1",
		Headers: map[string]string{"Authorization": "Bearer header-secret-88"},
	}}, mcptool.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StartTimeout: 20 * time.Second})
	defer m.Close()
	m.Tools(context.Background())
	st := m.Status()
	if len(st) != 1 || st[0].Connected || st[0].Error == "" {
		t.Fatalf("status %+v: want one failed server with an error", st)
	}
	b, _ := json.Marshal(st)
	for _, secret := range []string{"alice", "hunter2pw", "tok-secret-77", "header-secret-88"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("status holds %q: %s", secret, b)
		}
	}
}
