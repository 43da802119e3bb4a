package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/telemetry/otlptest"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// A caller's trace: what each surface is handed as traceparent.
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// otelEnv points a hermes process at the receiver, exporting quickly.
func otelEnv(recv *otlptest.Receiver) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint(), "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=hermes-test"}
}

// waitTurnTree waits for a turn span in the caller's trace and its chat span, and checks the
// turn continues the caller's span and the model request carried the chat span as parent.
func waitTurnTree(t *testing.T, recv *otlptest.Receiver, model *openaitest.Server) {
	t.Helper()
	spans := recv.WaitFor(t, 60*time.Second, "turn and chat spans", func(ss []otlptest.Span) bool {
		return len(otlptest.Named(ss, "invoke_agent hermes")) > 0 && len(otlptest.Named(ss, "chat fake-agent")) > 0
	})
	turn := otlptest.Named(spans, "invoke_agent hermes")[0]
	chat := otlptest.Named(spans, "chat fake-agent")[0]
	if turn.TraceID != callerTrace || turn.ParentSpanID != callerSpan {
		t.Errorf("turn span in trace %s under %s, want the caller's %s under %s", turn.TraceID, turn.ParentSpanID, callerTrace, callerSpan)
	}
	if chat.ParentSpanID != turn.SpanID || chat.TraceID != callerTrace {
		t.Errorf("chat span under %s in %s, want under the turn %s", chat.ParentSpanID, chat.TraceID, turn.SpanID)
	}
	if chat.Attrs["gen_ai.request.model"] != "fake-agent" || chat.Attrs["gen_ai.usage.output_tokens"] != int64(7) {
		t.Errorf("chat span attributes %v", chat.Attrs)
	}
	if turn.Resource["service.name"] != "hermes-test" {
		t.Errorf("OTEL_SERVICE_NAME not applied: %v", turn.Resource)
	}
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	if got, want := reqs[len(reqs)-1].Header.Get("traceparent"), "00-"+callerTrace+"-"+chat.SpanID+"-01"; got != want {
		t.Errorf("model request traceparent %q, want %q", got, want)
	}
}

// hermes serve with OTEL_EXPORTER_OTLP_ENDPOINT exports the spans of a chat completion, the
// turn continuing the request's traceparent.
func TestServeExportsTraces(t *testing.T) {
	recv := otlptest.New(t)
	p := startServe(t, otelEnv(recv)...)
	p.model.Enqueue(openaitest.Text("traced ", "answer"))
	body := `{"model":"` + interopModel + `","messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequest(http.MethodPost, p.base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", callerParent)
	req.Header.Set("tracestate", "vendor=x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "traced answer") {
		t.Fatalf("chat completion: %d %s", resp.StatusCode, b)
	}
	waitTurnTree(t, recv, p.model)
}

// hermes gateway continues params._meta.traceparent of prompt.submit, and flushes its spans
// when it exits.
func TestGatewayTraceMeta(t *testing.T) {
	recv := otlptest.New(t)
	_, cwd, srv, env := gwEnv(t, "")
	kv := otelEnv(recv)
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	kv = append(kv, "OTEL_BSP_SCHEDULE_DELAY=600000") // only the exit's flush exports
	cmd := hermesCmd(t, cwd, kv, "gateway")
	cmd.Stderr = os.Stderr
	c, err := gwclient.Stdio(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.WaitType(tctx(t), 0, "", "gateway.ready"); err != nil {
		t.Fatal(err)
	}
	sid := create(t, c)
	srv.Enqueue(openaitest.Text("ok"))
	from := len(c.Events())
	res := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "hi", "_meta": map[string]any{"traceparent": callerParent, "tracestate": "vendor=x"}})
	if res["status"] != "streaming" {
		t.Fatalf("submit: %v", res)
	}
	waitType(t, c, from, sid, "message.complete")
	if n := len(recv.Spans()); n != 0 {
		t.Logf("%d spans exported before exit", n)
	}
	if err := c.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	waitTurnTree(t, recv, srv)
}

// hermes acp continues session/prompt's _meta.traceparent.
func TestACPTraceMeta(t *testing.T) {
	recv := otlptest.New(t)
	home, work := t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	env := append(otelEnv(recv), "HERMES_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY=test-key", "HERMES_MODEL=openai:fake-agent")
	cmd := hermesCmd(t, work, env, "acp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	cl := &acpClient{}
	cc := sdk.NewClientSideConnection(cl, stdin, stdout)
	cc.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := tctx(t)
	if _, err := cc.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := cc.NewSession(ctx, sdk.NewSessionRequest{Cwd: work, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.Text("ok"))
	r, err := cc.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("hi")},
		Meta: map[string]any{"traceparent": callerParent, "tracestate": "vendor=x"}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v\nstderr: %s", r, err, stderr.String())
	}
	waitTurnTree(t, recv, srv)
}

// The command logger writes JSON lines off a terminal, and a turn's lines carry its session,
// turn and trace ids (the trace id of the exported turn span).
func TestLogLinesCarryTurnIDs(t *testing.T) {
	recv := otlptest.New(t)
	home, work := t.TempDir(), t.TempDir()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("logged"))
	env := append(otelEnv(recv), "HERMES_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY=test-key", "HERMES_MODEL=openai:fake-agent",
		"HERMES_LOG_LEVEL=debug")
	r := hermes(t, work, env, "chat", "-q", "hi")
	if r.code != 0 {
		t.Fatalf("chat: %d %s %s", r.code, r.stdout, r.err)
	}
	var ended map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.err))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if m["msg"] == "turn ended" {
			ended = m
		}
	}
	if ended == nil {
		t.Fatalf("no JSON \"turn ended\" line in stderr:\n%s", r.err)
	}
	for _, k := range []string{"session_id", "turn_id", "trace_id"} {
		if s, _ := ended[k].(string); s == "" {
			t.Errorf("turn line lacks %s: %v", k, ended)
		}
	}
	spans := recv.WaitFor(t, 60*time.Second, "turn span", func(ss []otlptest.Span) bool {
		return len(otlptest.Named(ss, "invoke_agent hermes")) > 0
	})
	if tid := otlptest.Named(spans, "invoke_agent hermes")[0].TraceID; ended["trace_id"] != tid {
		t.Errorf("log trace_id %v, span's %s", ended["trace_id"], tid)
	}
}
