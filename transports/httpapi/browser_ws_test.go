package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A turn started with prompt.submit over /api/ws drives the browser controller its key's
// principal registered (a real second WebSocket); another principal's controller is never
// used, and that principal's own /api/ws turn reaches only its own controller.
func TestBrowserControlFromGatewayWebSocket(t *testing.T) {
	t.Parallel()
	tg := browserTarget(t, nil)
	idA := register(t, tg, testKey, `{"capabilities":["navigate","snapshot"]}`)
	idB := register(t, tg, otherKey, `{"capabilities":["snapshot"]}`)
	a := connect(t, tg, testKey, idA, func(cmd map[string]any) map[string]any {
		return map[string]any{"ok": true, "content": "A did " + cmd["action"].(string)}
	})
	b := connect(t, tg, otherKey, idB, func(map[string]any) map[string]any {
		return map[string]any{"ok": true, "content": "B page"}
	})

	gwTurn := func(key, text string) (sid string, done map[string]any, tools []map[string]any) {
		t.Helper()
		c := dialAs(t, tg, key)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		created, code := call(t, c, "session.create", map[string]any{})
		if code != 0 {
			t.Fatalf("session.create: %d", code)
		}
		sid = created["session_id"].(string)
		res, code := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": text})
		if code != 0 || res["status"] != "streaming" {
			t.Fatalf("prompt.submit: %v %d", res, code)
		}
		ev, _, err := c.WaitType(ctx, 0, sid, "message.complete")
		if err != nil {
			t.Fatal(err)
		}
		if err := ev.Decode(&done); err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Events() {
			if e.Type == "tool.complete" {
				var m map[string]any
				_ = e.Decode(&m)
				tools = append(tools, m)
			}
		}
		return sid, done, tools
	}

	tg.fake.Enqueue(browserCall(`{"action":"navigate","url":"https://example.com/"}`), openaitest.Text("navigated"))
	_, done, tools := gwTurn(testKey, "open example")
	if done["status"] != "complete" || len(tools) != 1 || tools[0]["result_text"] != "A did navigate" || tools[0]["is_error"] != false {
		t.Fatalf("principal A's gateway turn: %v %v", done, tools)
	}
	if got := a.received(); len(got) != 1 || got[0]["action"] != "navigate" {
		t.Fatalf("A's controller received %v", got)
	}
	if got := b.received(); len(got) != 0 {
		t.Fatalf("another principal's controller received %v", got)
	}

	// Principal B's gateway turn reaches B's controller only.
	tg.fake.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("seen"))
	_, done, tools = gwTurn(otherKey, "look")
	if done["status"] != "complete" || len(tools) != 1 || tools[0]["result_text"] != "B page" {
		t.Fatalf("principal B's gateway turn: %v %v", done, tools)
	}
	if got := b.received(); len(got) != 1 || got[0]["action"] != "snapshot" {
		t.Fatalf("B's controller received %v", got)
	}
	if got := a.received(); len(got) != 0 {
		t.Fatalf("A's controller received B's command: %v", got)
	}
}

// A principal without a registered controller gets the browser tool's refusal on /api/ws,
// even while another principal's controller is connected.
func TestBrowserControlGatewayWithoutOwnController(t *testing.T) {
	t.Parallel()
	tg := browserTarget(t, nil)
	idB := register(t, tg, otherKey, `{"capabilities":["snapshot"]}`)
	b := connect(t, tg, otherKey, idB, func(map[string]any) map[string]any {
		return map[string]any{"ok": true, "content": "B page"}
	})
	c := dialAs(t, tg, testKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, _ := call(t, c, "session.create", map[string]any{})
	sid := created["session_id"].(string)
	tg.fake.Enqueue(browserCall(`{"action":"snapshot"}`), openaitest.Text("no browser"))
	if res, code := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "look"}); code != 0 || res["status"] != "streaming" {
		t.Fatalf("prompt.submit: %v %d", res, code)
	}
	if _, _, err := c.WaitType(ctx, 0, sid, "message.complete"); err != nil {
		t.Fatal(err)
	}
	var result string
	for _, e := range c.Events() {
		if e.Type == "tool.complete" {
			var m map[string]any
			_ = e.Decode(&m)
			result, _ = m["result_text"].(string)
		}
	}
	if !strings.Contains(result, "register one") {
		t.Fatalf("tool result without a controller: %q", result)
	}
	if got := b.received(); len(got) != 0 {
		t.Fatalf("another principal's controller was used: %v", got)
	}
}
