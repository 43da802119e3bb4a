package engine_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/model/replay"
)

// fullTurn drives the acceptance turn: streamed text, a terminal call that needs approval, the
// approval answered, the tool run, a steer delivered at the boundary, the final answer.
func fullTurn(t *testing.T, h *harness) {
	writeFile(t, filepath.Join(h.cwd, "build", "out.o"), "obj")
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "remove the build directory"})
	if err != nil || adm.Status != engine.AdmitStarted || adm.UserRowID == 0 {
		t.Fatalf("submit: %+v %v", adm, err)
	}
	var deltas []string
	for {
		ev, err := sub.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == engine.EvMessageDelta {
			deltas = append(deltas, ev.Text)
		}
		if ev.Type == engine.EvRequestOpen {
			req := ev.Data.(engine.Request)
			if req.Kind != engine.KindApproval || req.Payload["command"] != "rm -r build" {
				t.Fatalf("request: %+v", req)
			}
			if keys, _ := req.Payload["pattern_keys"].([]string); !slices.Contains(keys, "recursive delete") {
				t.Fatalf("pattern keys: %v", req.Payload["pattern_keys"])
			}
			if _, err := os.Stat(filepath.Join(h.cwd, "build")); err != nil {
				t.Fatal("the command ran before it was approved")
			}
			if _, err := s.Steer("also list what is left"); err != nil {
				t.Fatal(err)
			}
			if err := s.Answer(req.ID, map[string]any{"choice": "once"}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if strings.Join(deltas, "") != "I'll remove it." {
		t.Fatalf("text streamed before the approval request: %q", deltas)
	}
	tc := next(t, sub, engine.EvToolComplete).Data.(engine.ToolComplete)
	if tc.Name != "terminal" || tc.Result.IsError || tc.Blocked {
		t.Fatalf("tool: %+v", tc)
	}
	sd := next(t, sub, engine.EvSteerDelivered).Data.(engine.SteerDelivered)
	if sd.Text != "also list what is left" || sd.Iteration != 1 {
		t.Fatalf("steer: %+v", sd)
	}
	out := next(t, sub, engine.EvMessageComplete).Data.(engine.Outcome)
	if out.Status != engine.StatusCompleted || !out.Completed || out.Partial || out.Interrupted ||
		out.ExitReason != "text_response(finish_reason=stop)" || out.Text != "Removed build/. Nothing else is left." || out.PendingSteer != "" {
		t.Fatalf("outcome: %+v", out)
	}
	deltas = nil
	for _, ev := range mustEvents(t, s) {
		if ev.Type == engine.EvMessageDelta {
			deltas = append(deltas, ev.Text)
		}
	}
	if strings.Join(deltas, "") != "I'll remove it.Removed build/. Nothing else is left." {
		t.Fatalf("deltas: %q", deltas)
	}
	if out.APICalls != 2 || out.Usage.TotalTokens == 0 {
		t.Fatalf("usage: %+v", out)
	}
	if _, err := os.Stat(filepath.Join(h.cwd, "build")); !os.IsNotExist(err) {
		t.Fatalf("build dir still there: %v", err)
	}
	rows := mustRows(t, s)
	var roles []string
	for i, r := range rows {
		roles = append(roles, r.Role)
		if i > 0 && r.ID <= rows[i-1].ID {
			t.Fatalf("row ids not increasing: %+v", rows)
		}
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" {
		t.Fatalf("roles: %v", roles)
	}
	if !strings.Contains(rows[2].Content, engine.SteerOpen+"\nalso list what is left\n"+engine.SteerClose) || rows[2].DisplayKind != "steer" {
		t.Fatalf("steer not in tool row: %q", rows[2].Content)
	}
	if rows[0].ID != adm.UserRowID {
		t.Fatalf("user row id %d != admission %d", rows[0].ID, adm.UserRowID)
	}
	if u := s.Usage(); u.APICalls != 2 || u.ToolCalls != 1 || u.InputTokens == 0 {
		t.Fatalf("session usage: %+v", u)
	}
}

func enqueueFullTurn(srv *openaitest.Server) {
	srv.Enqueue(
		openaitest.Response{Text: []string{"I'll ", "remove it."}, Calls: []openaitest.Call{{Name: "terminal", Args: args(map[string]any{"command": "rm -r build"})}}},
		openaitest.Text("Removed build/.", " Nothing else is left."),
	)
}

func TestFullTurnLive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	enqueueFullTurn(h.srv)
	fullTurn(t, h)
	msgs := h.lastRequestMessages()
	last := msgs[len(msgs)-1]
	if last["role"] != "tool" || !strings.Contains(last["content"].(string), "also list what is left") {
		t.Fatalf("the model did not receive the steer in the tool result: %v", last)
	}
}

// TestFullTurnFromCassette records the turn from the live wire, then drives the same turn from
// the cassette alone.
func TestFullTurnFromCassette(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t)
	enqueueFullTurn(srv)
	rec := replay.NewRecorder(http.DefaultTransport)
	h := newHarness(t, func(c *engine.Config) {
		c.Providers["openai"] = openai.New(openai.Config{BaseURL: srv.URL(), HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1})
	})
	fullTurn(t, h)
	path := filepath.Join(t.TempDir(), "turn.cassette.json")
	if err := rec.Save(path); err != nil {
		t.Fatal(err)
	}
	cas, err := replay.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, func(c *engine.Config) {
		c.Providers = map[string]model.Provider{"replay": replay.New(cas)}
		c.DefaultModel = "replay:turn"
	})
	fullTurn(t, h2)
}

func TestPendingSteerAfterLastBoundary(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"hello ", "world"}, FaultAt: 2, Gate: g})
	s := h.create()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	<-g.Reached()
	r, err := s.Steer("  actually, be brief  ")
	if err != nil || r.ID == "" || r.TurnID != adm.TurnID {
		t.Fatalf("steer: %+v %v", r, err)
	}
	if _, err := s.Steer("and polite"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Steer("   "); !errors.Is(err, engine.ErrEmptySteer) {
		t.Fatalf("empty steer: %v", err)
	}
	g.Release()
	out, _ := s.Wait(ctxT(t), adm.TurnID)
	if out.Status != engine.StatusCompleted || out.Text != "hello world" || out.PendingSteer != "actually, be brief\nand polite" {
		t.Fatalf("outcome: %+v", out)
	}
	if _, err := s.Steer("too late"); !errors.Is(err, engine.ErrNotRunning) {
		t.Fatalf("steer while idle: %v", err)
	}
}

func TestIterationBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) { c.MaxIterations = 2 })
	call := openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo again"}`}}
	h.srv.Enqueue(openaitest.ToolCalls(call), openaitest.ToolCalls(call), openaitest.Text("I ran echo twice; stopping here."))
	s := h.create()
	out := h.run(s, "loop forever")
	if out.Status != engine.StatusFailed || out.Completed || out.ExitReason != "max_iterations_reached(2/2)" || out.Text != "I ran echo twice; stopping here." {
		t.Fatalf("outcome: %+v", out)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("requests: %d", len(reqs))
	}
	if strings.Contains(string(reqs[2].Body), `"tools"`) {
		t.Fatal("the summary call offered tools")
	}
	msgs := h.lastRequestMessages()
	if msgs[len(msgs)-1]["role"] != "user" || !strings.Contains(msgs[len(msgs)-1]["content"].(string), "maximum number") {
		t.Fatalf("summary prompt: %v", msgs[len(msgs)-1])
	}
	// The session stays usable.
	h.srv.Enqueue(openaitest.Text("ok"))
	if out := h.run(s, "again"); out.Status != engine.StatusCompleted {
		t.Fatalf("after budget: %+v", out)
	}
}

func TestInterruptDuringModelCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := openaitest.NewGate()
	h.srv.Enqueue(openaitest.Response{Text: []string{"partial ", "answer"}, FaultAt: 2, Gate: g})
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "hi"})
	next(t, sub, engine.EvMessageDelta)
	if !s.Interrupt("") {
		t.Fatal("nothing to interrupt")
	}
	out, _ := s.Wait(ctxT(t), adm.TurnID)
	g.Release()
	if out.Status != engine.StatusCancelled || !out.Interrupted || out.ExitReason != "interrupted_during_api_call" || !out.Partial || out.Text != "partial " {
		t.Fatalf("outcome: %+v", out)
	}
	if s.Interrupt("") {
		t.Fatal("interrupt reported a turn while idle")
	}
}

func TestInterruptDuringTool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"sleep 30"}`}}))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	adm, _ := s.Submit(ctxT(t), engine.Prompt{Text: "wait"})
	next(t, sub, engine.EvToolStart)
	s.Interrupt("")
	out, _ := s.Wait(ctxT(t), adm.TurnID)
	if out.Status != engine.StatusCancelled || out.ExitReason != "interrupted_by_user" {
		t.Fatalf("outcome: %+v", out)
	}
	rows := mustRows(t, s)
	if rows[len(rows)-1].Role != "tool" {
		t.Fatalf("every tool call must have a result row: %+v", rows)
	}
}

func TestBadToolInputKeepsSessionUsable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(
		openaitest.ToolCalls(
			openaitest.Call{Name: "read_file", Args: []string{`{"path": 5}`}},
			openaitest.Call{Name: "terminal", Args: []string{`{"command": `}},
			openaitest.Call{Name: "no_such_tool", Args: []string{`{}`}},
		),
		openaitest.Text("recovered"),
	)
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	out := h.run(s, "go")
	if out.Status != engine.StatusCompleted || out.Text != "recovered" {
		t.Fatalf("outcome: %+v", out)
	}
	var results []string
	for ev, err := range s.Events(ctxT(t), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == engine.EvToolComplete {
			tc := ev.Data.(engine.ToolComplete)
			if !tc.Result.IsError {
				t.Fatalf("%s should have failed: %+v", tc.Name, tc.Result)
			}
			results = append(results, tc.Result.Content)
		}
		if ev.Type == engine.EvMessageComplete {
			break
		}
	}
	if len(results) != 3 || !strings.Contains(results[0], "path") || !strings.Contains(results[1], "JSON") || !strings.Contains(results[2], "Unknown tool") {
		t.Fatalf("results: %q", results)
	}
}

func TestHardlineNeverRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -rf /"}`}}), openaitest.Text("ok"))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	h.run(s, "go")
	tc := next(t, sub, engine.EvToolComplete).Data.(engine.ToolComplete)
	if !tc.Blocked || !strings.Contains(tc.Result.Content, "BLOCKED (hardline)") {
		t.Fatalf("hardline: %+v", tc)
	}
	if len(s.OpenRequests()) != 0 {
		t.Fatal("a hardline command must not ask")
	}
}

func TestProviderErrorsKeepSessionUsable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *engine.Config) {
		c.Providers["dead"] = openai.New(openai.Config{BaseURL: "http://127.0.0.1:1/v1", MaxRetries: -1})
	})
	s := h.create()
	h.srv.Enqueue(openaitest.HTTPError(401, openaitest.APIError{Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key"}))
	out := h.run(s, "hi")
	if out.Status != engine.StatusFailed || !strings.Contains(out.Error, "invalid_api_key") || !strings.HasPrefix(out.ExitReason, "provider_error(") {
		t.Fatalf("401 outcome: %+v", out)
	}
	if _, err := s.SetModel(ctxT(t), "dead:m"); err != nil {
		t.Fatal(err)
	}
	out = h.run(s, "hi")
	if out.Status != engine.StatusFailed || out.Error == "" {
		t.Fatalf("unreachable outcome: %+v", out)
	}
	if _, err := s.SetModel(ctxT(t), "nope:m"); !errors.Is(err, model.ErrUnknownProvider) {
		t.Fatalf("unknown provider: %v", err)
	}
	if s.Record().Model != "dead:m" {
		t.Fatalf("model changed by a failed switch: %s", s.Record().Model)
	}
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "/model openai:other"})
	if err != nil || adm.Status != engine.AdmitCommand || s.Record().Model != "openai:other" {
		t.Fatalf("/model: %+v %v %s", adm, err, s.Record().Model)
	}
	h.srv.Enqueue(openaitest.Text("back"))
	if out := h.run(s, "hi"); out.Status != engine.StatusCompleted || out.Model != "openai:other" {
		t.Fatalf("after recovery: %+v", out)
	}
	if _, err := h.eng.Create(ctxT(t), engine.CreateOptions{Model: "nope:x"}); !errors.Is(err, model.ErrUnknownProvider) {
		t.Fatalf("create with unknown provider: %v", err)
	}
	if _, err := s.Submit(ctxT(t), engine.Prompt{Text: "  "}); !errors.Is(err, engine.ErrEmptyPrompt) {
		t.Fatalf("empty prompt: %v", err)
	}
}

func TestMalformedCassetteFailsTurnClearly(t *testing.T) {
	t.Parallel()
	_, err := replay.Parse([]byte(`{"version":1,"interactions":[{"request":{}}`), "broken.json")
	if err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Fatalf("malformed cassette: %v", err)
	}
	cas, err := replay.Parse([]byte(`{"version":1,"provider":"openai","interactions":[{"request":{},"response":{"status":200,"headers":{"content-type":"text/event-stream"},"body":["data: {not json}\n\n"]}}]}`), "bad-chunk.json")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *engine.Config) { c.Providers["replay"] = replay.New(cas) })
	s, err := h.eng.Create(ctxT(t), engine.CreateOptions{Model: "replay:bad-chunk"})
	if err != nil {
		t.Fatal(err)
	}
	out := h.run(s, "hi")
	if out.Status != engine.StatusFailed || out.Error == "" {
		t.Fatalf("outcome: %+v", out)
	}
	out = h.run(s, "again") // cassette exhausted: a clear error, not a hang
	if out.Status != engine.StatusFailed || !strings.Contains(out.Error, "bad-chunk") {
		t.Fatalf("exhausted: %+v", out)
	}
}

func TestContextCancelOfSubmitterDoesNotKillTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Enqueue(openaitest.Text("fine"))
	s := h.create()
	ctx, cancel := context.WithCancel(context.Background())
	adm, err := s.Submit(ctx, engine.Prompt{Text: "hi"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := s.Wait(ctxT(t), adm.TurnID); out.Status != engine.StatusCompleted {
		t.Fatalf("outcome: %+v", out)
	}
}

func TestImageAttachmentSentAsContentPart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	png := filepath.Join(h.cwd, "shot.png")
	writeFile(t, png, "\x89PNG\r\n\x1a\n0000")
	h.srv.Enqueue(openaitest.Text("a cat"))
	s := h.create()
	adm, err := s.Submit(ctxT(t), engine.Prompt{Text: "what is this?", Images: []string{png}})
	if err != nil {
		t.Fatal(err)
	}
	s.Wait(ctxT(t), adm.TurnID)
	msgs := h.lastRequestMessages()
	parts, ok := msgs[1]["content"].([]any)
	if !ok || len(parts) != 2 {
		t.Fatalf("content parts: %v", msgs[1])
	}
	img := parts[1].(map[string]any)
	if img["type"] != "image_url" || !strings.HasPrefix(img["image_url"].(map[string]any)["url"].(string), "data:image/png;base64,") {
		t.Fatalf("image part: %v", img)
	}
	if rows := mustRows(t, s); len(rows[0].Attachments) != 1 {
		t.Fatalf("attachments not stored: %+v", rows[0])
	}
}
