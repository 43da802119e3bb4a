package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/acp"
)

// formClient is the test client that also renders elicitation forms (the SDK's client side
// dispatches elicitation/create to it), and the agent's frames as they were on the wire.
type formClient struct {
	*client
	answer func(context.Context, sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error)

	fmu    sync.Mutex
	frames []map[string]any // every frame the agent wrote
}

func (c *formClient) UnstableCreateElicitation(ctx context.Context, p sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
	return c.answer(ctx, p)
}

// sent returns the agent's frames with method m.
func (c *formClient) sent(m string) []map[string]any {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	var out []map[string]any
	for _, f := range c.frames {
		if f["method"] == m {
			out = append(out, f)
		}
	}
	return out
}

// connectForms serves the adapter to a client that advertises forms (or not) in initialize.
func connectForms(t *testing.T, eng *engine.Engine, o acp.Options, forms bool, answer func(context.Context, sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error)) (*sdk.ClientSideConnection, *formClient) {
	t.Helper()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	tapR, tapW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := acp.Serve(context.Background(), eng, c2aR, a2cW, o)
		a2cW.Close()
		done <- err
	}()
	fc := &formClient{client: &client{}, answer: answer}
	// Every agent frame is recorded before the SDK sees it.
	go func() {
		sc := bufio.NewScanner(a2cR)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				fc.fmu.Lock()
				fc.frames = append(fc.frames, m)
				fc.fmu.Unlock()
			}
			line := append(append([]byte(nil), sc.Bytes()...), '\n') // sc.Bytes aliases the scanner's buffer
			if _, err := tapW.Write(line); err != nil {
				break
			}
		}
		tapW.CloseWithError(sc.Err())
		_, _ = io.Copy(io.Discard, a2cR)
	}()
	cc := sdk.NewClientSideConnection(fc, c2aW, tapR)
	cc.SetLogger(quiet)
	t.Cleanup(func() {
		c2aW.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	ctx := testCtx(t)
	caps := sdk.ClientCapabilities{}
	if forms {
		caps.Elicitation = &sdk.ElicitationCapabilities{Form: &sdk.ElicitationFormCapabilities{}}
	}
	if _, err := cc.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber, ClientCapabilities: caps}); err != nil {
		t.Fatal(err)
	}
	return cc, fc
}

func accept(text string) func(context.Context, sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
	return func(context.Context, sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
		r := sdk.NewUnstableCreateElicitationResponseAccept()
		r.Accept.Content = map[string]any{"answer": text}
		return r, nil
	}
}

func clarifyTurn(t *testing.T, cc *sdk.ClientSideConnection, id sdk.SessionId) {
	t.Helper()
	r, err := cc.Prompt(testCtx(t), sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock("create the service")}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", r, err)
	}
}

// A free-text clarify question to a client that renders forms is elicitation/create in form
// mode, scoped to the session and the clarify tool call, with one required text field; the
// accepted text is the model's answer.
func TestFreeTextQuestionIsAnElicitationForm(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngineWith(t, p, "", withClarify)
	var asked []sdk.UnstableCreateElicitationRequest
	var mu sync.Mutex
	cc, fc := connectForms(t, eng, acp.Options{Logger: quiet}, true, func(ctx context.Context, r sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
		mu.Lock()
		asked = append(asked, r)
		mu.Unlock()
		return accept("api-gateway")(ctx, r)
	})
	s, err := cc.NewSession(testCtx(t), sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "q1", Name: "clarify", Args: []string{`{"question":"What should the service be called?"}`}}),
		openaitest.Text("Named it api-gateway."))
	clarifyTurn(t, cc, s.SessionId)
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0].Form == nil || asked[0].Form.Message != "What should the service be called?" {
		t.Fatalf("elicitations %+v", asked)
	}
	frames := fc.sent("elicitation/create")
	if len(frames) != 1 {
		t.Fatalf("%d elicitation/create frames", len(frames))
	}
	params, _ := frames[0]["params"].(map[string]any)
	schema, _ := params["requestedSchema"].(map[string]any)
	field, _ := schema["properties"].(map[string]any)["answer"].(map[string]any)
	if params["sessionId"] != string(s.SessionId) || params["toolCallId"] != "q1" || params["mode"] != "form" ||
		schema["type"] != "object" || field["type"] != "string" || !strings.Contains(string(mustJSON(t, schema["required"])), `"answer"`) {
		t.Fatalf("elicitation/create params %v", params)
	}
	if id, _ := frames[0]["id"].(string); !strings.HasPrefix(id, "hermes-") {
		t.Fatalf("request id %v", frames[0]["id"])
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `"content":"api-gateway"`) {
		t.Fatalf("the model did not get the answer: %.1500s", reqs[len(reqs)-1].Body)
	}
	if len(fc.sent("session/request_permission")) != 0 {
		t.Fatal("a free-text question was also a permission request")
	}
	summarize(fc.take()).assertClosed(t)
}

// Declined or dismissed, the question is withdrawn with what the person did and the model
// proceeds; clarify stays offered (the client can answer the next one). A client that does not
// advertise forms keeps the old behaviour: withdrawn at once, clarify hidden, no form sent.
func TestElicitationDeclineCancelAndNoForms(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forms  bool
		resp   sdk.UnstableCreateElicitationResponse
		reason string
	}{
		{"decline", true, sdk.NewUnstableCreateElicitationResponseDecline(), "the user declined to answer"},
		{"cancel", true, sdk.NewUnstableCreateElicitationResponseCancel(), "the user dismissed the question"},
		{"no forms", false, sdk.UnstableCreateElicitationResponse{}, "the editor cannot answer this question"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, p := fakeProvider(t)
			eng, cwd := newEngineWith(t, p, "", withClarify)
			cc, fc := connectForms(t, eng, acp.Options{Logger: quiet}, tc.forms, func(context.Context, sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
				return tc.resp, nil
			})
			s, err := cc.NewSession(testCtx(t), sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
			if err != nil {
				t.Fatal(err)
			}
			srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "q1", Name: "clarify", Args: []string{`{"question":"Which name?"}`}}),
				openaitest.Text("Named it api."), openaitest.Text("Again."))
			clarifyTurn(t, cc, s.SessionId)
			clarifyTurn(t, cc, s.SessionId)
			reqs := srv.Requests()
			if len(reqs) != 3 || !strings.Contains(string(reqs[1].Body), "request withdrawn: "+tc.reason) {
				t.Fatalf("tool result: %.1500s", reqs[1].Body)
			}
			offered := strings.Contains(string(reqs[2].Body), `"function":{"name":"clarify","description"`)
			if offered != tc.forms {
				t.Fatalf("clarify offered after the question: %v, want %v", offered, tc.forms)
			}
			if n := len(fc.sent("elicitation/create")); n != map[bool]int{true: 1, false: 0}[tc.forms] {
				t.Fatalf("%d elicitation/create frames", n)
			}
		})
	}
}

// A form the person leaves open past approvals.question_timeout is cancelled with
// $/cancel_request naming the elicitation's id, and the question withdrawn.
func TestElicitationTimeoutCancelsTheRequest(t *testing.T) {
	srv, p := fakeProvider(t)
	eng, cwd := newEngineWith(t, p, "", withClarify)
	cc, fc := connectForms(t, eng, acp.Options{Logger: quiet, QuestionTimeout: 300 * time.Millisecond}, true,
		func(ctx context.Context, _ sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
			<-ctx.Done() // the SDK cancels this when $/cancel_request arrives
			return sdk.NewUnstableCreateElicitationResponseCancel(), nil
		})
	s, err := cc.NewSession(testCtx(t), sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "q1", Name: "clarify", Args: []string{`{"question":"Which name?"}`}}),
		openaitest.Text("Named it api."))
	clarifyTurn(t, cc, s.SessionId)
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "request withdrawn: the editor gave no answer") {
		t.Fatalf("tool result: %.1500s", reqs[len(reqs)-1].Body)
	}
	asked := fc.sent("elicitation/create")
	cancels := fc.sent("$/cancel_request")
	if len(asked) != 1 || len(cancels) != 1 || cancels[0]["params"].(map[string]any)["requestId"] != asked[0]["id"] {
		t.Fatalf("elicitation %v, cancels %v", asked, cancels)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
