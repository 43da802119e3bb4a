package httpapi_test

import (
	"context"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
	"github.com/hermes-go/hermes/engine/model/anthropic/anthropictest"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// anthropicTarget is a real server in front of an engine whose default model is
// anthropic:claude-sonnet-4-5, served by the fake Messages API through the real client.
func anthropicTarget(t *testing.T) (*target, *anthropictest.Server) {
	t.Helper()
	fake := anthropictest.New(t)
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	eng, err := engine.New(engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"anthropic": anthropic.New(anthropic.Config{BaseURL: fake.URL(), APIKey: "k", MaxRetries: -1})},
		DefaultModel: "anthropic:claude-sonnet-4-5",
		Tools:        tool.NewRegistry(builtin.Defaults(dangerCheck)...),
		Cwd:          cwd,
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(eng, gateway.Options{})
	srv, err := httpapi.New(eng, gw, httpapi.Options{APIKey: testKey, Version: "test",
		Models: func() []string { return []string{"anthropic:claude-sonnet-4-5", "anthropic:claude-haiku-4-5"} }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
		gw.Close()
		eng.Close()
		st.Close()
	})
	return &target{t: t, base: "http://" + ln.Addr().String(), eng: eng, cwd: cwd, srv: srv}, fake
}

func toolTurn(fake *anthropictest.Server, word string) {
	fake.Enqueue(
		anthropictest.Response{Thinking: []string{"run it"}, Calls: []anthropictest.Call{{Name: "terminal", Args: []string{`{"command":"echo `, word + `"}`}}}},
		anthropictest.Response{Text: []string{"It printed ", word + "."}, Usage: &anthropictest.Usage{Input: 1_000_000, CacheRead: 1_000_000, Output: 100_000}},
	)
}

func TestAnthropicChatCompletionToolTurn(t *testing.T) {
	t.Parallel()
	tg, fake := anthropicTarget(t)
	toolTurn(fake, "http-anthropic")
	b := decode(t, tg.do(t, "POST", "/v1/chat/completions", `{"model":"anthropic:claude-sonnet-4-5","messages":[{"role":"user","content":"run echo"}]}`, nil))
	choices, _ := b["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("response %v", b)
	}
	msg := choices[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "It printed http-anthropic." {
		t.Fatalf("message %v", msg)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `"tool_result"`) || !strings.Contains(string(reqs[1].Body), "http-anthropic") {
		t.Fatalf("%d requests; the tool output did not reach the model", len(reqs))
	}
}

func TestAnthropicRunCost(t *testing.T) {
	t.Parallel()
	tg, fake := anthropicTarget(t)
	toolTurn(fake, "run-anthropic")
	r := decode(t, tg.do(t, "POST", "/v1/runs", `{"input":"run echo"}`, nil))
	id, _ := r["run_id"].(string)
	if id == "" {
		t.Fatalf("run %v", r)
	}
	var st map[string]any
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st = decode(t, tg.do(t, "GET", "/v1/runs/"+id, "", nil))
		if st["status"] != "running" && st["status"] != "started" && st["status"] != "queued" {
			break
		}
	}
	if st["status"] != "completed" || st["output"] != "It printed run-anthropic." {
		t.Fatalf("run status %v", st)
	}
	// Both calls: the tool call's default usage (21 in, 9 out) and the answer's 1M uncached
	// in, 1M cache reads, 100k out, at $3 / $0.30 / $15 per million.
	want := (21*3 + 9*15 + 1e6*3 + 1e6*0.3 + 1e5*15) / 1e6
	u, _ := st["usage"].(map[string]any)
	if c, _ := u["cost_usd"].(float64); math.Abs(c-want) > 1e-9 {
		t.Errorf("run usage %v, want cost_usd %v", u, want)
	}
}

// The HTTP model field: a provider:model the server does not list is decided by the catalogue.
func TestAnthropicModelField(t *testing.T) {
	t.Parallel()
	tg, _ := anthropicTarget(t)
	e := envelope(t, tg.do(t, "POST", "/v1/chat/completions", `{"model":"anthropic:gpt-5.5","messages":[{"role":"user","content":"hi"}]}`, nil), 404, "model_not_found")
	if msg := e["message"].(string); !strings.Contains(msg, "belongs to provider openai") || !strings.Contains(msg, "claude-") || e["param"] != "model" {
		t.Errorf("refusal %v", e)
	}
	r := tg.do(t, "POST", "/api/sessions", `{"model":"anthropic:claude-next-9"}`, nil)
	if r.status/100 != 2 || !strings.Contains(string(r.body), `"anthropic:claude-next-9"`) {
		t.Fatalf("own-family name not catalogued yet: %d %s", r.status, r.body)
	}
	envelope(t, tg.do(t, "POST", "/api/sessions", `{"model":"missing:x"}`, nil), 404, "model_not_found")
}
