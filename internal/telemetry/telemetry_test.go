package telemetry_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/internal/telemetry"
	"github.com/hermes-go/hermes/internal/telemetry/otlptest"
	"github.com/hermes-go/hermes/scripting"
)

// echoTool answers with its arguments.
type echoTool struct{}

func (echoTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "echo", Description: "echo the text", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}
}

func (echoTool) Call(_ context.Context, c tool.Call, _ *tool.Env) (tool.Result, error) {
	return tool.Result{Content: "echo: " + string(c.Args)}, nil
}

// traced is an engine exporting through the real OTLP/HTTP exporter, configured by the
// standard environment, to an in-process receiver.
type traced struct {
	recv *otlptest.Receiver
	srv  *openaitest.Server
	eng  *engine.Engine
	tr   *telemetry.Tracing
}

func newTraced(t *testing.T, content bool, pol engine.Config) *traced {
	t.Helper()
	recv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint())
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-hermes-tenant=t1")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	tr, err := telemetry.Setup(context.Background(), os.Getenv, "test-version")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	if tr.TracerProvider() == nil {
		t.Fatal("tracing is on but there is no provider")
	}
	srv := openaitest.New(t)
	client := &http.Client{Transport: telemetry.Transport(nil)}
	cfg := engine.Config{
		Store:          memstore.New(),
		Providers:      map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1, HTTPClient: client})},
		DefaultModel:   "openai:fake-agent",
		Tools:          tool.NewRegistry(echoTool{}),
		Cwd:            t.TempDir(),
		TracerProvider: tr.TracerProvider(),
		TraceContent:   content,
		Policy:         pol.Policy,
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &traced{recv: recv, srv: srv, eng: eng, tr: tr}
}

// run runs one turn under ctx and flushes the spans.
func (x *traced) run(t *testing.T, ctx context.Context, prompt string) (*engine.Session, engine.Outcome) {
	t.Helper()
	wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := x.eng.Create(wctx, engine.CreateOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := s.Submit(ctx, engine.Prompt{Text: prompt})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Wait(wctx, adm.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return s, out
}

func one(t *testing.T, spans []otlptest.Span, name string) otlptest.Span {
	t.Helper()
	got := otlptest.Named(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %s", len(got), name, otlptest.Names(spans))
	}
	return got[0]
}

func wantAttr(t *testing.T, s otlptest.Span, key string, want any) {
	t.Helper()
	if got, ok := s.Attrs[key]; !ok {
		t.Errorf("span %q: no attribute %s (have %v)", s.Name, key, s.Attrs)
	} else if !equal(got, want) {
		t.Errorf("span %q: %s = %#v, want %#v", s.Name, key, got, want)
	}
}

func equal(a, b any) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return string(ab) == string(bb)
}

// A turn with two tool calls (one that runs, one unknown) and a final answer: the span tree
// and its GenAI attributes as a collector receives them, continuing the caller's trace; the
// model requests carry traceparent naming their chat span.
func TestTurnSpanTree(t *testing.T) {
	x := newTraced(t, false, engine.Config{})
	x.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_echo", Name: "echo", Args: []string{`{"text":"hi"}`}}, openaitest.Call{ID: "call_nope", Name: "nope", Args: []string{`{}`}}),
		openaitest.Text("all ", "done"),
	)
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	s, out := x.run(t, trace.ContextWithRemoteSpanContext(context.Background(), parent), "use the tools")
	if out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	spans := x.recv.WaitFor(t, 30*time.Second, "turn span", func(ss []otlptest.Span) bool {
		return len(otlptest.Named(ss, "invoke_agent hermes")) > 0
	})
	for _, sp := range spans {
		if sp.TraceID != parent.TraceID().String() {
			t.Errorf("span %q is in trace %s, want the caller's %s", sp.Name, sp.TraceID, parent.TraceID())
		}
		if sp.Resource["service.name"] != "hermes" || sp.Resource["service.version"] != "test-version" {
			t.Errorf("span %q resource %v", sp.Name, sp.Resource)
		}
		for k := range sp.Attrs {
			if k == "gen_ai.input.messages" || k == "gen_ai.output.messages" || k == "gen_ai.tool.call.arguments" || k == "gen_ai.tool.call.result" {
				t.Errorf("span %q carries %s without the content opt-in", sp.Name, k)
			}
		}
	}

	turn := one(t, spans, "invoke_agent hermes")
	if turn.ParentSpanID != parent.SpanID().String() {
		t.Errorf("turn span's parent %q, want the caller's span %s", turn.ParentSpanID, parent.SpanID())
	}
	wantAttr(t, turn, "gen_ai.operation.name", "invoke_agent")
	wantAttr(t, turn, "gen_ai.agent.name", "hermes")
	wantAttr(t, turn, "gen_ai.conversation.id", s.ID())
	wantAttr(t, turn, "gen_ai.provider.name", "openai")
	wantAttr(t, turn, "gen_ai.request.model", "fake-agent")
	wantAttr(t, turn, "hermes.turn.id", out.TurnID)
	wantAttr(t, turn, "hermes.turn.status", "completed")
	wantAttr(t, turn, "hermes.turn.exit_reason", "text_response(finish_reason=stop)")
	wantAttr(t, turn, "gen_ai.usage.input_tokens", int64(24))
	wantAttr(t, turn, "gen_ai.usage.output_tokens", int64(14))
	wantAttr(t, turn, "hermes.turn.tool_calls", int64(2))
	if turn.StatusCode != tracepb.Status_STATUS_CODE_OK {
		t.Errorf("turn span status %v", turn.StatusCode)
	}

	chats := otlptest.Named(spans, "chat fake-agent")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2: %s", len(chats), otlptest.Names(spans))
	}
	slices.SortFunc(chats, func(a, b otlptest.Span) int { return a.Start.Compare(b.Start) })
	for i, c := range chats {
		if c.ParentSpanID != turn.SpanID {
			t.Errorf("chat span %d's parent %s, want the turn %s", i, c.ParentSpanID, turn.SpanID)
		}
		if c.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("chat span kind %v, want client", c.Kind)
		}
		wantAttr(t, c, "gen_ai.operation.name", "chat")
		wantAttr(t, c, "gen_ai.provider.name", "openai")
		wantAttr(t, c, "gen_ai.request.model", "fake-agent")
		wantAttr(t, c, "gen_ai.response.model", "fake-agent")
		wantAttr(t, c, "gen_ai.usage.input_tokens", int64(12))
		wantAttr(t, c, "gen_ai.usage.output_tokens", int64(7))
		wantAttr(t, c, "gen_ai.conversation.id", s.ID())
	}
	wantAttr(t, chats[0], "gen_ai.response.finish_reasons", []any{"tool_calls"})
	wantAttr(t, chats[1], "gen_ai.response.finish_reasons", []any{"stop"})

	// Each model request carried its own chat span as the parent.
	reqs := x.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		want := "00-" + parent.TraceID().String() + "-" + chats[i].SpanID + "-01"
		if got := r.Header.Get("traceparent"); got != want {
			t.Errorf("model request %d traceparent %q, want %q", i, got, want)
		}
	}

	echo := one(t, spans, "execute_tool echo")
	if echo.ParentSpanID != turn.SpanID {
		t.Errorf("tool span's parent %s, want the turn %s", echo.ParentSpanID, turn.SpanID)
	}
	wantAttr(t, echo, "gen_ai.operation.name", "execute_tool")
	wantAttr(t, echo, "gen_ai.tool.name", "echo")
	wantAttr(t, echo, "gen_ai.tool.call.id", "call_echo")
	if echo.StatusCode == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("echo span is an error: %s", echo.StatusMessage)
	}
	nope := one(t, spans, "execute_tool nope")
	wantAttr(t, nope, "gen_ai.tool.call.id", "call_nope")
	wantAttr(t, nope, "hermes.tool.blocked", true)
	if nope.StatusCode != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(nope.StatusMessage, "Unknown tool") {
		t.Errorf("unknown tool span status %v %q, want an error", nope.StatusCode, nope.StatusMessage)
	}

	pol := one(t, spans, "hermes.policy approval")
	if pol.ParentSpanID != echo.SpanID {
		t.Errorf("policy span's parent %s, want the echo tool span %s", pol.ParentSpanID, echo.SpanID)
	}
	wantAttr(t, pol, "hermes.policy.hook", "approval")
	wantAttr(t, pol, "hermes.policy.language", "go")
	wantAttr(t, pol, "hermes.policy.verdict", "allow")
	if !pol.End.After(pol.Start) && !pol.End.Equal(pol.Start) {
		t.Errorf("policy span ends before it starts")
	}

	var tenant bool
	for _, h := range x.recv.Headers() {
		tenant = tenant || h.Get("x-hermes-tenant") == "t1"
	}
	if !tenant {
		t.Error("OTEL_EXPORTER_OTLP_HEADERS did not reach the receiver")
	}
}

// Content is recorded only when opted in, and always redacted; a script policy's spans name
// its language and its verdict.
func TestTurnContentOptInAndScriptPolicy(t *testing.T) {
	pol, err := scripting.Load("policy.js", `export function approval(req) { return req.tool === "echo" ? "deny" : "ask"; }`, scripting.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pol.Close() })
	x := newTraced(t, true, engine.Config{Policy: pol.Set()})
	x.srv.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_echo", Name: "echo", Args: []string{`{"text":"hi"}`}}),
		openaitest.Text("ok"),
	)
	const secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	_, out := x.run(t, context.Background(), "remember my key "+secret+" please")
	if out.Status != engine.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	spans := x.recv.WaitFor(t, 30*time.Second, "turn span", func(ss []otlptest.Span) bool {
		return len(otlptest.Named(ss, "invoke_agent hermes")) > 0
	})
	turn := one(t, spans, "invoke_agent hermes")
	if turn.ParentSpanID != "" {
		t.Errorf("a turn without a caller's trace has parent %s", turn.ParentSpanID)
	}
	chats := otlptest.Named(spans, "chat fake-agent")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans: %s", len(chats), otlptest.Names(spans))
	}
	for _, c := range chats {
		in, _ := c.Attrs["gen_ai.input.messages"].(string)
		if !strings.Contains(in, "remember my key") {
			t.Errorf("chat span input messages %q lack the prompt", in)
		}
		if strings.Contains(in, secret) {
			t.Errorf("chat span input messages carry the secret unredacted: %s", in)
		}
		var msgs []map[string]any
		if err := json.Unmarshal([]byte(in), &msgs); err != nil || len(msgs) < 2 {
			t.Errorf("gen_ai.input.messages is not a list of messages: %v %s", err, in)
		}
		if _, ok := c.Attrs["gen_ai.output.messages"]; !ok {
			t.Errorf("chat span lacks gen_ai.output.messages")
		}
	}
	echo := one(t, spans, "execute_tool echo")
	wantAttr(t, echo, "gen_ai.tool.call.arguments", `{"text":"hi"}`)
	if echo.StatusCode != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("a denied tool call's span is not an error")
	}
	p := one(t, spans, "hermes.policy approval")
	wantAttr(t, p, "hermes.policy.language", "js")
	wantAttr(t, p, "hermes.policy.verdict", "deny")
}

// With no OTLP endpoint tracing is off: no provider, and the engine's spans are no-ops.
func TestOffWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := telemetry.Setup(context.Background(), os.Getenv, "v")
	if err != nil {
		t.Fatal(err)
	}
	if tr.TracerProvider() != nil {
		t.Fatal("a provider without an endpoint")
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces", "OTEL_SDK_DISABLED": "true"}
	if telemetry.Enabled(func(k string) string { return env[k] }) {
		t.Error("OTEL_SDK_DISABLED=true left tracing on")
	}
	delete(env, "OTEL_SDK_DISABLED")
	if !telemetry.Enabled(func(k string) string { return env[k] }) {
		t.Error("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT alone did not turn tracing on")
	}
	env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
	if _, err := telemetry.Setup(context.Background(), func(k string) string { return env[k] }, "v"); err == nil || !strings.Contains(err.Error(), "http/protobuf") {
		t.Errorf("grpc protocol: %v, want an error naming http/protobuf", err)
	}
}
