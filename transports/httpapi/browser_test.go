package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/transports/httpapi"
)

const otherKey = "other-key-0123456789abcdef"

func browserTarget(t *testing.T, mut func(*httpapi.BrowserControl)) *target {
	return newTarget(t, func(o *httpapi.Options) {
		o.ExtraKeys = []httpapi.NamedKey{{Key: otherKey}}
		o.BrowserControl = httpapi.BrowserControl{Enabled: true, Capabilities: []string{"navigate", "snapshot", "click", "screenshot"}}
		if mut != nil {
			mut(&o.BrowserControl)
		}
	})
}

// testController is a browser extension stand-in on a real WebSocket: it records every frame
// it receives and answers commands with answer (no answer when answer returns ok=nil).
type testController struct {
	conn     *websocket.Conn
	frames   chan map[string]any // every frame after ready
	done     chan struct{}       // closed when the read loop ends
	closeErr error
}

func register(t *testing.T, tg *target, key, body string) string {
	t.Helper()
	r := tg.do(t, "POST", "/v1/browser-control/register", body, map[string]string{"Authorization": "Bearer " + key})
	reg := decodeAs[map[string]any](t, r, 201)
	if reg["object"] != "hermes.browser_control.controller" || !strings.HasPrefix(reg["controller_id"].(string), "bc_") || strings.Contains(string(r.body), key) {
		t.Fatalf("registration %s", r.body)
	}
	return reg["controller_id"].(string)
}

func dialController(t *testing.T, tg *target, key, id string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(tg.base, "http")+"/v1/browser-control/ws?controller_id="+id, h)
}

// connect dials, checks the ready frame and starts the read loop, which answers commands with
// answer. The loop ends when the socket closes; the test's cleanup closes it and waits.
func connect(t *testing.T, tg *target, key, id string, answer func(cmd map[string]any) map[string]any) *testController {
	t.Helper()
	conn, res, err := dialController(t, tg, key, id)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	var ready map[string]any
	if err := conn.ReadJSON(&ready); err != nil || ready["type"] != "browser.controller.ready" || ready["controller_id"] != id {
		t.Fatalf("ready frame %v %v", ready, err)
	}
	tc := &testController{conn: conn, frames: make(chan map[string]any, 64), done: make(chan struct{})}
	go func() {
		defer close(tc.done)
		for {
			var m map[string]any
			if err := conn.ReadJSON(&m); err != nil {
				tc.closeErr = err
				return
			}
			tc.frames <- m
			if m["type"] == "browser.controller.command" && answer != nil {
				if rep := answer(m); rep != nil {
					rep["type"] = "browser.controller.result"
					rep["command_id"] = m["command_id"]
					if err := conn.WriteJSON(rep); err != nil {
						return
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-tc.done
	})
	return tc
}

// received drains what the controller has been sent so far (the read loop has delivered every
// frame written before the turn that caused them ended).
func (tc *testController) received() []map[string]any {
	var out []map[string]any
	for {
		select {
		case m := <-tc.frames:
			out = append(out, m)
		default:
			return out
		}
	}
}

func browserCall(args string) openaitest.Response {
	return openaitest.ToolCalls(openaitest.Call{Name: "browser", Args: []string{args}})
}

// toolResults returns the tool rows of a session, in order.
func toolResults(t *testing.T, tg *target, id string) []string {
	t.Helper()
	rows, err := tg.eng.Store().Rows(context.Background(), id, store.RowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if r.Role == "tool" {
			out = append(out, r.Content)
		}
	}
	return out
}

func TestBrowserControlForwardsOnlyToTheOwner(t *testing.T) {
	t.Parallel()
	tg := browserTarget(t, nil)
	idA := register(t, tg, testKey, `{"capabilities":["navigate","snapshot"]}`)
	idB := register(t, tg, otherKey, `{"capabilities":["navigate","snapshot","click"]}`)
	// Each principal's controller connects; one principal cannot take the other's.
	if _, res, err := dialController(t, tg, otherKey, idA); err == nil || res == nil || res.StatusCode != 404 {
		t.Fatalf("principal B connected as A's controller: %v %v", err, res)
	}
	a := connect(t, tg, testKey, idA, func(cmd map[string]any) map[string]any {
		return map[string]any{"ok": true, "content": "A did " + cmd["action"].(string) + " " + cmd["arguments"].(map[string]any)["url"].(string)}
	})
	b := connect(t, tg, otherKey, idB, func(cmd map[string]any) map[string]any {
		return map[string]any{"ok": true, "content": map[string]any{"title": "B page"}}
	})
	if _, res, err := dialController(t, tg, testKey, idA); err == nil || res == nil || res.StatusCode != 409 {
		t.Fatalf("a second connection for the same controller: %v %v", err, res)
	}

	// Principal A's turn: navigate reaches A's controller; click is outside A's allow-list
	// and is refused without contacting anyone.
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"br-a"}`, nil), 201)
	tg.fake.Enqueue(
		browserCall(`{"action":"navigate","url":"https://example.com/"}`),
		browserCall(`{"action":"click","ref":"e1"}`),
		openaitest.Text("done"),
	)
	out := decodeAs[map[string]any](t, tg.do(t, "POST", "/api/sessions/br-a/chat", `{"input":"open example"}`, nil), 200)
	if out["completed"] != true {
		t.Fatalf("turn %+v", out)
	}
	res := toolResults(t, tg, "br-a")
	if len(res) != 2 || res[0] != "A did navigate https://example.com/" || !strings.Contains(res[1], "not allowed") || !strings.Contains(res[1], "click") {
		t.Fatalf("tool results %q", res)
	}
	gotA := a.received()
	if len(gotA) != 1 || gotA[0]["action"] != "navigate" || gotA[0]["session_id"] != "br-a" {
		t.Fatalf("A received %v", gotA)
	}
	if gotB := b.received(); len(gotB) != 0 {
		t.Fatalf("another principal's controller received %v", gotB)
	}

	// Principal B's turn, through chat completions: B's controller answers, A sees nothing.
	tg.fake.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("ok"))
	r := tg.do(t, "POST", "/v1/chat/completions", `{"model":"openai:fake-agent","messages":[{"role":"user","content":"snap"}]}`,
		map[string]string{"Authorization": "Bearer " + otherKey, "X-Hermes-Session-Id": "br-b"})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if res := toolResults(t, tg, "br-b"); len(res) != 1 || res[0] != `{"title":"B page"}` {
		t.Fatalf("B's tool results %q", res)
	}
	if gotB := b.received(); len(gotB) != 1 || gotB[0]["action"] != "snapshot" {
		t.Fatalf("B received %v", gotB)
	}
	if gotA := a.received(); len(gotA) != 0 {
		t.Fatalf("A received B's command: %v", gotA)
	}
}

// A run (/v1/runs) is owned by the principal that admitted it: its turn's browser calls reach
// that principal's controller, and another principal's controller sees nothing.
func TestBrowserControlRunIsOwnedByItsPrincipal(t *testing.T) {
	t.Parallel()
	tg := browserTarget(t, nil)
	idA := register(t, tg, testKey, `{"capabilities":["snapshot"]}`)
	idB := register(t, tg, otherKey, `{"capabilities":["snapshot"]}`)
	a := connect(t, tg, testKey, idA, func(map[string]any) map[string]any { return map[string]any{"ok": true, "content": "A page"} })
	b := connect(t, tg, otherKey, idB, func(map[string]any) map[string]any { return map[string]any{"ok": true, "content": "B page"} })
	tg.fake.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("seen"))
	r := tg.do(t, "POST", "/v1/runs", `{"input":"look","session_id":"br-run"}`, nil)
	if r.status != 202 {
		t.Fatalf("POST /v1/runs: %d %s", r.status, r.body)
	}
	id, _ := decode(t, r)["run_id"].(string)
	evs := allEvents(t, tg, id, "")
	if names := eventNames(evs); len(names) == 0 || names[len(names)-1] != "run.completed" {
		t.Fatalf("run events %v", names)
	}
	if res := toolResults(t, tg, "br-run"); len(res) != 1 || res[0] != "A page" {
		t.Fatalf("tool results %q", res)
	}
	if got := a.received(); len(got) != 1 || got[0]["session_id"] != "br-run" {
		t.Fatalf("the owner's controller received %v", got)
	}
	if got := b.received(); len(got) != 0 {
		t.Fatalf("another principal's controller received %v", got)
	}
}

func TestBrowserControlTurnWithoutAnOwnerIsRefused(t *testing.T) {
	t.Parallel()
	tg := browserTarget(t, nil)
	id := register(t, tg, testKey, `{"capabilities":["snapshot"]}`)
	a := connect(t, tg, testKey, id, func(map[string]any) map[string]any { return map[string]any{"ok": true, "content": "x"} })
	// A turn started directly on the engine (as the WebSocket gateway or a queued follow-up
	// would) belongs to no API principal: nobody's browser is driven.
	sess, err := tg.eng.Create(context.Background(), engine.CreateOptions{ID: "direct"})
	if err != nil {
		t.Fatal(err)
	}
	tg.fake.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("ok"))
	adm, err := sess.Submit(context.Background(), engine.Prompt{Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Wait(context.Background(), adm.TurnID); err != nil {
		t.Fatal(err)
	}
	if res := toolResults(t, tg, "direct"); len(res) != 1 || !strings.Contains(res[0], "no browser controller") {
		t.Fatalf("tool results %q", res)
	}
	if got := a.received(); len(got) != 0 {
		t.Fatalf("the controller was contacted: %v", got)
	}
}

func TestBrowserControlTimeoutCancelsTheCommand(t *testing.T) {
	t.Parallel()
	tg := browserTarget(t, func(bc *httpapi.BrowserControl) { bc.Timeout = 300 * time.Millisecond })
	id := register(t, tg, testKey, `{"capabilities":["screenshot"]}`)
	a := connect(t, tg, testKey, id, func(map[string]any) map[string]any { return nil }) // never answers
	decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"slow"}`, nil), 201)
	tg.fake.Enqueue(browserCall(`{"action":"screenshot"}`), openaitest.Text("gave up"))
	decodeAs[map[string]any](t, tg.do(t, "POST", "/api/sessions/slow/chat", `{"input":"shoot"}`, nil), 200)
	if res := toolResults(t, tg, "slow"); len(res) != 1 || !strings.Contains(res[0], "did not answer in time") {
		t.Fatalf("tool results %q", res)
	}
	// The controller got the command, then its cancellation.
	var got []map[string]any
	for len(got) < 2 {
		got = append(got, <-a.frames)
	}
	if got[0]["type"] != "browser.controller.command" || got[1]["type"] != "browser.controller.cancel" || got[1]["command_id"] != got[0]["command_id"] || got[1]["reason"] != "timeout" {
		t.Fatalf("frames %v", got)
	}
	// A late answer is refused, not delivered anywhere.
	if err := a.conn.WriteJSON(map[string]any{"type": "browser.controller.result", "command_id": got[0]["command_id"], "ok": true, "content": "late"}); err != nil {
		t.Fatal(err)
	}
	if m := <-a.frames; m["type"] != "browser.controller.error" || m["command_id"] != got[0]["command_id"] {
		t.Fatalf("late answer reply %v", m)
	}
}

func TestBrowserControlReRegistrationReplaces(t *testing.T) {
	t.Parallel()
	tg := browserTarget(t, nil)
	first := register(t, tg, testKey, `{"capabilities":["navigate"]}`)
	old := connect(t, tg, testKey, first, nil)
	second := register(t, tg, testKey, `{"capabilities":["navigate"]}`)
	<-old.done
	var ce *websocket.CloseError
	if !errors.As(old.closeErr, &ce) || ce.Code != httpapi.CloseControllerReplaced {
		t.Fatalf("old controller ended with %v", old.closeErr)
	}
	if _, res, err := dialController(t, tg, testKey, first); err == nil || res.StatusCode != 404 {
		t.Fatalf("the replaced controller reconnected: %v %v", err, res)
	}
	connect(t, tg, testKey, second, nil)
	h := decodeAs[map[string]any](t, tg.do(t, "GET", "/health/detailed", "", nil), 200)
	if bc := h["browser_control"].(map[string]any); bc["enabled"] != true || bc["controllers"] != float64(1) || bc["connected"] != float64(1) {
		t.Fatalf("health %v", h["browser_control"])
	}
}

func TestBrowserControlBadInput(t *testing.T) {
	t.Parallel()
	tg := browserTarget(t, nil)
	for _, c := range []struct{ body, code string }{
		{`{`, "invalid_json"},
		{``, "invalid_json"},
		{`{}`, "missing_capabilities"},
		{`{"capabilities":[]}`, "missing_capabilities"},
		{`{"capabilities":"navigate"}`, "invalid_type"},
		{`{"capabilities":[1]}`, "invalid_type"},
		{`{"capabilities":["format_disk"]}`, "invalid_capability"},
		{`{"capabilities":["console"]}`, "invalid_capability"}, // a real action, outside the server's allow-list
	} {
		envelope(t, tg.do(t, "POST", "/v1/browser-control/register", c.body, nil), 400, c.code)
	}
	envelope(t, tg.do(t, "POST", "/v1/browser-control/register", `{"capabilities":["navigate"]}`, map[string]string{"Authorization": ""}), 401, "invalid_api_key")
	envelope(t, tg.do(t, "GET", "/v1/browser-control/ws", "", nil), 426, "upgrade_required")
	if _, res, err := dialController(t, tg, "", "bc_x"); err == nil || res.StatusCode != 401 {
		t.Fatalf("unauthenticated dial: %v %v", err, res)
	}
	if _, res, err := dialController(t, tg, testKey, "bc_unknown"); err == nil || res.StatusCode != 404 {
		t.Fatalf("unknown controller: %v %v", err, res)
	}
	// A malformed frame is answered with an error; the connection stays usable.
	id := register(t, tg, testKey, `{"capabilities":["navigate"]}`)
	a := connect(t, tg, testKey, id, nil)
	for _, frame := range []string{`not json`, `{"type":"browser.controller.result"}`, `{"type":"hello"}`} {
		if err := a.conn.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		if m := <-a.frames; m["type"] != "browser.controller.error" {
			t.Fatalf("%s: %v", frame, m)
		}
	}
}

func TestBrowserControlDisabled(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	envelope(t, tg.do(t, "POST", "/v1/browser-control/register", `{"capabilities":["navigate"]}`, nil), 404, "browser_control_disabled")
	envelope(t, tg.do(t, "GET", "/v1/browser-control/ws", "", nil), 404, "browser_control_disabled")
	caps := decodeAs[struct {
		Features  map[string]any `json:"features"`
		Endpoints map[string]any `json:"endpoints"`
	}](t, tg.do(t, "GET", "/v1/capabilities", "", nil), 200)
	if caps.Features["browser_control"] != false || caps.Endpoints["browser_control_register"] != nil {
		t.Fatalf("capabilities advertise disabled browser control: %v", caps)
	}
	if _, err := tg.eng.Tools().Get("browser"); err == nil {
		t.Fatal("the browser tool is offered while browser control is off")
	}
	on := browserTarget(t, nil)
	caps = decodeAs[struct {
		Features  map[string]any `json:"features"`
		Endpoints map[string]any `json:"endpoints"`
	}](t, on.do(t, "GET", "/v1/capabilities", "", nil), 200)
	if caps.Features["browser_control"] != true || caps.Endpoints["browser_control_register"] == nil {
		t.Fatalf("capabilities with browser control on: %v", caps)
	}
}
