package browserctl_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	fiberws "github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/httpapi/browserctl"
)

// The broker over a real engine (enginetest: the fake model behind the real client, the
// goroutine-leak check) and real controller WebSockets on 127.0.0.1. The HTTP routes and
// their error envelope are tested with the server in package httpapi.

func TestMain(m *testing.M) {
	// fasthttp starts a process-wide goroutine (the Date header's clock) with the first
	// response header it writes, and never stops it: start it here, outside every test's
	// goroutine-leak check.
	var h fasthttp.ResponseHeader
	h.AppendBytes(nil)
	os.Exit(m.Run())
}

type rig struct {
	h   *enginetest.Harness
	b   *browserctl.Broker
	url string // ws://127.0.0.1:port/ws
}

// newRig serves the broker's controller connections at /ws?principal=...&id=..., the
// principal taken from the query (the server authenticates it; this test trusts it).
func newRig(t *testing.T, cfg browserctl.Config) *rig {
	t.Helper()
	h := enginetest.New(t, enginetest.Options{Memory: true})
	ctx, cancel := context.WithCancel(context.Background())
	b, err := browserctl.New(ctx, h.Engine, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	// The worker pool's cleaner sleeps this long between rounds, and ends only after one.
	app.Server().MaxIdleWorkerDuration = 50 * time.Millisecond
	app.Get("/ws", func(c *fiber.Ctx) error {
		ctl, err := b.Claim(c.Query("principal"), c.Query("id"))
		if err != nil {
			var r *browserctl.Refusal
			if !errors.As(err, &r) {
				t.Errorf("claim: %v is not a refusal", err)
				return err
			}
			return c.Status(r.Status).SendString(r.Code)
		}
		c.Locals("ctl", ctl)
		return c.Next()
	}, fiberws.New(func(conn *fiberws.Conn) {
		b.Serve(conn.Locals("ctl").(*browserctl.Controller), conn)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = app.Listener(ln)
	}()
	t.Cleanup(func() { // after the controllers' cleanups, before the engine's
		cancel()
		_ = app.ShutdownWithTimeout(30 * time.Second)
		<-served
	})
	return &rig{h: h, b: b, url: "ws://" + ln.Addr().String() + "/ws"}
}

// controller is a browser extension stand-in: it records the frames it receives and answers
// each command with answer (nothing when answer returns nil).
type controller struct {
	conn     *websocket.Conn
	frames   chan map[string]any
	done     chan struct{}
	closeErr error
}

func (r *rig) dial(principal, id string) (*websocket.Conn, int, error) {
	conn, res, err := websocket.DefaultDialer.Dial(r.url+"?principal="+principal+"&id="+id, nil)
	status := 0
	if res != nil {
		status = res.StatusCode
		res.Body.Close()
	}
	return conn, status, err
}

func (r *rig) connect(t *testing.T, principal, id string, answer func(cmd map[string]any, conn *websocket.Conn) map[string]any) *controller {
	t.Helper()
	conn, status, err := r.dial(principal, id)
	if err != nil {
		t.Fatalf("dial: %v (%d)", err, status)
	}
	var ready map[string]any
	if err := conn.ReadJSON(&ready); err != nil || ready["type"] != "browser.controller.ready" || ready["controller_id"] != id {
		t.Fatalf("ready frame %v %v", ready, err)
	}
	c := &controller{conn: conn, frames: make(chan map[string]any, 64), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			var m map[string]any
			if err := conn.ReadJSON(&m); err != nil {
				c.closeErr = err
				return
			}
			c.frames <- m
			if m["type"] != "browser.controller.command" || answer == nil {
				continue
			}
			if rep := answer(m, conn); rep != nil {
				rep["type"], rep["command_id"] = "browser.controller.result", m["command_id"]
				if conn.WriteJSON(rep) != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-c.done
	})
	return c
}

// received drains the frames delivered so far.
func (c *controller) received() []map[string]any {
	var out []map[string]any
	for {
		select {
		case m := <-c.frames:
			out = append(out, m)
		default:
			return out
		}
	}
}

func register(t *testing.T, b *browserctl.Broker, principal string, caps ...string) string {
	t.Helper()
	ctl, err := b.Register(principal, caps)
	if err != nil {
		t.Fatal(err)
	}
	return ctl.ID()
}

func browserCall(args string) openaitest.Response {
	return openaitest.ToolCalls(openaitest.Call{Name: "browser", Args: []string{args}})
}

// turn runs prompt on sess, owned by principal unless it is "", and returns the turn's tool
// results.
func (r *rig) turn(t *testing.T, sess *engine.Session, principal, prompt string) []string {
	t.Helper()
	ctx := enginetest.Context(t)
	var turnID string
	start := func() (string, error) {
		adm, err := sess.Submit(ctx, engine.Prompt{Text: prompt})
		turnID = adm.TurnID
		return adm.TurnID, err
	}
	var err error
	if principal == "" {
		_, err = start()
	} else {
		err = r.b.Bind(principal, sess.ID(), start)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Wait(ctx, turnID); err != nil {
		t.Fatal(err)
	}
	r.b.Unbind(sess.ID(), turnID)
	rows, err := sess.History(ctx, engine.RowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, row := range rows {
		if row.Role == "tool" && row.TurnID == turnID {
			out = append(out, row.Content)
		}
	}
	return out
}

func TestCommandsReachTheTurnOwnersControllerOnly(t *testing.T) {
	t.Parallel()
	r := newRig(t, browserctl.Config{Capabilities: []string{"navigate", "snapshot", "click"}})
	a := r.connect(t, "key_a", register(t, r.b, "key_a", "navigate", "snapshot"), func(cmd map[string]any, _ *websocket.Conn) map[string]any {
		return map[string]any{"ok": true, "content": "A did " + cmd["action"].(string)}
	})
	b := r.connect(t, "key_b", register(t, r.b, "key_b", "snapshot"), func(map[string]any, *websocket.Conn) map[string]any {
		return map[string]any{"ok": false, "error": "B failed", "content": map[string]any{"why": "x"}}
	})
	sess := r.h.Create()

	r.h.Server.Enqueue(browserCall(`{"action":"navigate","url":"https://example.com/"}`), browserCall(`{"action":"click","ref":"e1"}`), openaitest.Text("done"))
	res := r.turn(t, sess, "key_a", "open")
	if len(res) != 2 || res[0] != "A did navigate" || !strings.Contains(res[1], "not allowed") || !strings.Contains(res[1], "navigate, snapshot") {
		t.Fatalf("A's turn: tool results %q", res)
	}
	if got := a.received(); len(got) != 1 || got[0]["action"] != "navigate" || got[0]["session_id"] != sess.ID() {
		t.Fatalf("A received %v", got)
	}
	if got := b.received(); len(got) != 0 {
		t.Fatalf("B received A's command: %v", got)
	}

	// B's turn on the same session: B's controller fails the action, with its content.
	r.h.Server.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("ok"))
	if res := r.turn(t, sess, "key_b", "look"); len(res) != 1 || !strings.Contains(res[0], "B failed") || !strings.Contains(res[0], `{"why":"x"}`) {
		t.Fatalf("B's turn: tool results %q", res)
	}
	if got := a.received(); len(got) != 0 {
		t.Fatalf("A received B's command: %v", got)
	}
	if got := b.received(); len(got) != 1 || got[0]["action"] != "snapshot" {
		t.Fatalf("B received %v", got)
	}

	// A turn nobody bound is refused without contacting anyone.
	r.h.Server.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("ok"))
	if res := r.turn(t, sess, "", "again"); len(res) != 1 || !strings.Contains(res[0], "no browser controller") {
		t.Fatalf("unowned turn: tool results %q", res)
	}
	if got := append(a.received(), b.received()...); len(got) != 0 {
		t.Fatalf("a controller was contacted for an unowned turn: %v", got)
	}
}

// A turn a gateway prompt starts is owned until it ends: the next turn, started without an
// owner, reaches nobody.
func TestGatewayTurnOwnership(t *testing.T) {
	t.Parallel()
	r := newRig(t, browserctl.Config{})
	a := r.connect(t, "key_a", register(t, r.b, "key_a", "snapshot"), func(map[string]any, *websocket.Conn) map[string]any {
		return map[string]any{"ok": true, "content": "page"}
	})
	sess := r.h.Create()
	ctx := enginetest.Context(t)
	r.h.Server.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("ok"))
	adm, err := r.b.BindGateway("key_a", sess, func() (engine.Admission, error) { return sess.Submit(ctx, engine.Prompt{Text: "look"}) })
	if err != nil || adm.Status != engine.AdmitStarted {
		t.Fatalf("%+v %v", adm, err)
	}
	if _, err := sess.Wait(ctx, adm.TurnID); err != nil {
		t.Fatal(err)
	}
	if got := a.received(); len(got) != 1 || got[0]["action"] != "snapshot" {
		t.Fatalf("the owner's controller received %v", got)
	}
	r.h.Server.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("ok"))
	if res := r.turn(t, sess, "", "again"); len(res) != 1 || !strings.Contains(res[0], "no browser controller") {
		t.Fatalf("a later turn: tool results %q", res)
	}
	if got := a.received(); len(got) != 0 {
		t.Fatalf("the controller was contacted for a later turn: %v", got)
	}
}

// A controller that disconnects with a command pending fails it at once; it may connect again.
func TestControllerGoneFailsThePendingCommand(t *testing.T) {
	t.Parallel()
	r := newRig(t, browserctl.Config{})
	id := register(t, r.b, "key_a", "screenshot")
	r.connect(t, "key_a", id, func(_ map[string]any, conn *websocket.Conn) map[string]any {
		conn.Close() // leave without answering
		return nil
	})
	sess := r.h.Create()
	r.h.Server.Enqueue(browserCall(`{"action":"screenshot"}`), openaitest.Text("gave up"))
	if res := r.turn(t, sess, "key_a", "shoot"); len(res) != 1 || !strings.Contains(res[0], "disconnected") {
		t.Fatalf("tool results %q", res)
	}
	// Connected again (the first connection's handler has ended once the claim succeeds).
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, status, err := r.dial("key_a", id)
		if err == nil {
			conn.Close()
			break
		}
		if status != 409 || time.Now().After(deadline) {
			t.Fatalf("reconnect: %v (%d)", err, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRegistrationAndClaimRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, browserctl.Config{Capabilities: []string{"navigate", "snapshot"}})
	for _, c := range []struct {
		caps        []string
		param, code string
	}{
		{nil, "capabilities", "missing_capabilities"},
		{[]string{"navigate", "click"}, "capabilities[1]", "invalid_capability"},
		{[]string{"warp"}, "capabilities[0]", "invalid_capability"},
	} {
		_, err := r.b.Register("key_a", c.caps)
		var rf *browserctl.Refusal
		if !errors.As(err, &rf) || rf.Status != 400 || rf.Param != c.param || rf.Code != c.code || !strings.Contains(rf.Message, "navigate, snapshot") {
			t.Fatalf("register %v: %#v", c.caps, err)
		}
	}
	ctl, err := r.b.Register("key_a", []string{"snapshot", "navigate", "snapshot"})
	if err != nil || strings.Join(ctl.Capabilities(), ",") != "snapshot,navigate" || !strings.HasPrefix(ctl.ID(), "bc_") {
		t.Fatalf("register: %v %v", ctl, err)
	}
	// Another principal's controller is not found, like an unknown one.
	for _, c := range []struct{ principal, id string }{{"key_b", ctl.ID()}, {"key_a", "bc_nope"}, {"key_a", ""}} {
		if _, status, err := r.dial(c.principal, c.id); err == nil || status != 404 {
			t.Fatalf("claim %v: %v (%d)", c, err, status)
		}
	}
	r.connect(t, "key_a", ctl.ID(), nil)
	if _, status, err := r.dial("key_a", ctl.ID()); err == nil || status != 409 {
		t.Fatalf("a second connection: %v (%d)", err, status)
	}
	if st := r.b.Status(); st["controllers"] != 1 || st["connected"] != 1 {
		t.Fatalf("status %v", st)
	}
}

func TestReRegistrationReplaces(t *testing.T) {
	t.Parallel()
	r := newRig(t, browserctl.Config{})
	first := register(t, r.b, "key_a", "navigate")
	old := r.connect(t, "key_a", first, nil)
	second := register(t, r.b, "key_a", "navigate")
	<-old.done
	var ce *websocket.CloseError
	if !errors.As(old.closeErr, &ce) || ce.Code != browserctl.CloseControllerReplaced {
		t.Fatalf("the replaced controller ended with %v", old.closeErr)
	}
	if _, status, err := r.dial("key_a", first); err == nil || status != 404 {
		t.Fatalf("the replaced controller reconnected: %v (%d)", err, status)
	}
	r.connect(t, "key_a", second, nil)
}

func TestNewRefusesABadConfiguration(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, enginetest.Options{Memory: true})
	if _, err := browserctl.New(context.Background(), h.Engine, browserctl.Config{Capabilities: []string{"navigate", "teleport"}}); err == nil || !strings.Contains(err.Error(), `"teleport"`) {
		t.Fatalf("unknown capability: %v", err)
	}
	if _, err := browserctl.New(context.Background(), h.Engine, browserctl.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := browserctl.New(context.Background(), h.Engine, browserctl.Config{}); err == nil || !strings.Contains(err.Error(), "already has") {
		t.Fatalf("a second browser tool: %v", err)
	}
}
