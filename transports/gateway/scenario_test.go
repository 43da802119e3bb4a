package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// The gateway's behaviours, in process: a gateway over an engine from enginetest (a real
// badger store, the fake OpenAI server behind the real client, the built-in tools), each
// client connected over a pair of pipes with newline framing, as stdio does. A target serves
// its connections either as stdio ones or as WebSocket ones (ws: server→client requests need
// the client's opt-in, gateway.ready announces heartbeats); the WebSocket transport itself and
// the subprocess are tested in internal/cli.

// target is one gateway under test.
type target struct {
	ws  bool
	srv *openaitest.Server
	eng *engine.Engine
	cwd string
	gw  *gateway.Server
}

// newTarget builds a gateway whose approvals time out after 1.5s, with the product's busy
// setting (config.set busy) and a cli.exec that answers "version"; edit, if set, adjusts the
// engine's configuration and the gateway's options first.
func newTarget(t *testing.T, ws bool, edit func(*engine.Config, *gateway.Options)) *target {
	t.Helper()
	busy := policy.NewBusySetting(policy.Interrupt)
	opts := gateway.Options{
		Version: "test", BusyMode: busy.Mode, SetBusyMode: busy.Set, Home: t.TempDir(),
		CLIAllow: []string{"version"},
		CLI: func(_ context.Context, argv []string) (string, int, error) {
			return "hermes test (" + strings.Join(argv, " ") + ")\n", 0, nil
		},
	}
	h := enginetest.New(t, enginetest.Options{Configure: func(c *engine.Config) {
		c.ApprovalTimeout = 1500 * time.Millisecond
		c.Policy.Busy, c.Fallback.Busy = busy, busy
		if edit != nil {
			edit(c, &opts)
		}
	}})
	gw := gateway.New(h.Engine, opts)
	t.Cleanup(gw.Close) // before the engine closes
	return &target{ws: ws, srv: h.Server, eng: h.Engine, cwd: h.Cwd, gw: gw}
}

// dial connects a client over pipes; cleanup closes it and waits for its connection to end.
func (tg *target) dial(t *testing.T) *gwclient.Client {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tg.gw.Serve(context.Background(), jsonrpc.NewLineFramer(sr, sw, closers{sr, sw}, 0), tg.ws, nil)
	}()
	c := gwclient.New(jsonrpc.NewLineFramer(cr, cw, closers{cr, cw}, 64<<20))
	t.Cleanup(func() {
		c.Close()
		<-c.Done()
		<-done
	})
	return c
}

// both runs a behaviour with stdio connections and with WebSocket ones.
func both(t *testing.T, f func(t *testing.T, tg *target)) {
	t.Run("stdio", func(t *testing.T) { t.Parallel(); f(t, newTarget(t, false, nil)) })
	t.Run("ws", func(t *testing.T) { t.Parallel(); f(t, newTarget(t, true, nil)) })
}

func tctx(t *testing.T) context.Context { return enginetest.Context(t) }

// open dials, waits for gateway.ready and (for a WebSocket connection) opts in to server
// requests.
func open(t *testing.T, tg *target, serverRequests bool) *gwclient.Client {
	t.Helper()
	c := tg.dial(t)
	if _, _, err := c.WaitType(tctx(t), 0, "", "gateway.ready"); err != nil {
		t.Fatal(err)
	}
	if serverRequests {
		call(t, c, "client.capabilities", map[string]any{"server_requests": true})
	}
	return c
}

func call(t *testing.T, c *gwclient.Client, method string, params any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := c.CallInto(tctx(t), method, params, &out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return out
}

func callErr(t *testing.T, c *gwclient.Client, method string, params any) (int, error) {
	t.Helper()
	_, err := c.Call(tctx(t), method, params)
	if err == nil {
		t.Fatalf("%s %v: want an error", method, params)
	}
	return gwclient.Code(err), err
}

func create(t *testing.T, c *gwclient.Client) string {
	t.Helper()
	return call(t, c, "session.create", map[string]any{})["session_id"].(string)
}

func waitType(t *testing.T, c *gwclient.Client, from int, sid, typ string) (gwclient.Event, int) {
	t.Helper()
	e, i, err := c.WaitType(tctx(t), from, sid, typ)
	if err != nil {
		t.Fatalf("waiting for %s: %v", typ, err)
	}
	return e, i
}

func payload(t *testing.T, e gwclient.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := e.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// turn submits and waits for the turn's message.complete.
func turn(t *testing.T, c *gwclient.Client, sid, text string) map[string]any {
	t.Helper()
	from := len(c.Events())
	res := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": text})
	if res["status"] != "streaming" {
		t.Fatalf("submit: %v", res)
	}
	e, _ := waitType(t, c, from, sid, "message.complete")
	return payload(t, e)
}

var hex8 = regexp.MustCompile(`^[0-9a-f]{8}$`)

func TestGatewayReadyAndBadInput(t *testing.T) { // behaviours 1-4
	both(t, func(t *testing.T, tg *target) {
		c := tg.dial(t)
		e, i := waitType(t, c, 0, "", "gateway.ready")
		p := payload(t, e)
		if i != 0 || p["skin"] == nil || p["replay_epoch"] == "" || (p["heartbeat"] == true) != tg.ws {
			t.Fatalf("ready: %d %v", i, p)
		}
		if f := c.Frames(); f[0] != "event:gateway.ready" {
			t.Fatalf("first frame: %v", f)
		}
		for _, bad := range []string{`{not json`, `[1]`, `{"jsonrpc":"2.0","id":1}`} {
			c.Raw([]byte(bad))
			o, err := c.WaitOrphan(tctx(t))
			if err != nil || o.Err == nil {
				t.Fatalf("%s: %v %v", bad, o, err)
			}
			if bad == `{not json` && (o.Err.Code != -32700 || o.Err.Message != "parse error" || o.ID != "") {
				t.Fatalf("parse error: %+v", o)
			}
		}
		if code, _ := callErr(t, c, "no.such.method", nil); code != -32601 {
			t.Fatalf("unknown method: %d", code)
		}
		c.Raw([]byte(`{"jsonrpc":"2.0","id":"p1","method":"ping","params":[1,2]}`))
		if o, _ := c.WaitOrphan(tctx(t)); o.Err == nil || o.Err.Code != -32602 {
			t.Fatalf("array params: %+v", o)
		}
		if code, _ := callErr(t, c, "session.create", map[string]any{"bogus": 1}); code != 4000 {
			t.Fatalf("unknown key: %d", code)
		}
		if code, _ := callErr(t, c, "session.create", map[string]any{"title": 5}); code != -32602 {
			t.Fatalf("wrong type: %d", code)
		}
		for _, m := range []string{"prompt.submit", "session.interrupt", "session.history", "session.usage", "session.steer", "session.events.since"} {
			p := map[string]any{"session_id": "deadbeef"}
			if m == "prompt.submit" || m == "session.steer" {
				p["text"] = "x"
			}
			if code, _ := callErr(t, c, m, p); code != 4001 {
				t.Fatalf("%s unknown session: %d", m, code)
			}
		}
		if p := call(t, c, "ping", nil); p["pong"] != true {
			t.Fatalf("ping after bad input: %v", p)
		}
	})
}

func TestGatewayCreateAndTurn(t *testing.T) { // behaviours 5-7
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		res := call(t, c, "session.create", map[string]any{"cols": 100})
		sid, _ := res["session_id"].(string)
		info, _ := res["info"].(map[string]any)
		if !hex8.MatchString(sid) || res["stored_session_id"] == "" || info["lazy"] != true || len(res["messages"].([]any)) != 0 {
			t.Fatalf("create: %v", res)
		}
		if l := call(t, c, "session.list", nil)["sessions"].([]any); len(l) != 0 {
			t.Fatalf("a lazy session was stored: %v", l)
		}
		tg.srv.Enqueue(openaitest.Text("Hel", "lo"))
		from := len(c.Events())
		sub := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "hi"})
		subID := c.LastCallID()
		if sub["status"] != "streaming" {
			t.Fatalf("submit: %v", sub)
		}
		e, _ := waitType(t, c, from, sid, "message.complete")
		p := payload(t, e)
		if p["text"] != "Hello" || p["status"] != "complete" || p["usage"] == nil {
			t.Fatalf("complete: %v", p)
		}
		var types []string
		for _, ev := range c.Events()[from:] {
			if ev.SessionID == sid && strings.HasPrefix(ev.Type, "message.") {
				types = append(types, ev.Type)
			}
		}
		if strings.Join(types, ",") != "message.start,message.delta,message.delta,message.complete" {
			t.Fatalf("event order: %v", types)
		}
		frames := c.Frames()
		if ri, si := slices.Index(frames, "response:"+subID), slices.Index(frames, "event:message.start"); ri < 0 || si < ri {
			t.Fatalf("the submit response must precede message.start: %v", frames)
		}
		if l := call(t, c, "session.list", nil)["sessions"].([]any); len(l) != 1 {
			t.Fatalf("stored after the first prompt: %v", l)
		}
		// A tool turn: tool.start then tool.complete with the same id, inside the turn.
		tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo hi"}`}}), openaitest.Text("done"))
		from = len(c.Events())
		turn(t, c, sid, "run echo")
		var seq []string
		var ids []string
		for _, ev := range c.Events()[from:] {
			switch ev.Type {
			case "message.start", "message.complete":
				seq = append(seq, ev.Type)
			case "tool.start", "tool.complete":
				seq = append(seq, ev.Type)
				ids = append(ids, payload(t, ev)["tool_id"].(string))
			}
		}
		if strings.Join(seq, ",") != "message.start,tool.start,tool.complete,message.complete" || ids[0] != ids[1] || ids[0] == "" {
			t.Fatalf("tool events: %v %v", seq, ids)
		}
		var last uint64
		for _, ev := range c.Events() {
			if ev.SessionID == sid {
				if ev.Seq <= last {
					t.Fatalf("seq not increasing: %d after %d", ev.Seq, last)
				}
				last = ev.Seq
			}
		}
	})
}

func TestGatewayBusyModes(t *testing.T) { // behaviours 8-11
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		// interrupt (default)
		g := openaitest.NewGate()
		tg.srv.Enqueue(openaitest.Response{Text: []string{"slow"}, FaultAt: 1, Gate: g}, openaitest.Text("second"))
		from := len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "first"})
		<-g.Reached()
		if r := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "next"}); r["status"] != "queued" {
			t.Fatalf("interrupt mode: %v", r)
		}
		e, i := waitType(t, c, from, sid, "message.complete")
		g.Release()
		if payload(t, e)["status"] != "interrupted" {
			t.Fatalf("first turn: %v", payload(t, e))
		}
		e, _ = waitType(t, c, i+1, sid, "message.complete")
		if payload(t, e)["text"] != "second" {
			t.Fatalf("queued turn: %v", payload(t, e))
		}
		// queue
		call(t, c, "config.set", map[string]any{"key": "busy", "value": "queue"})
		g = openaitest.NewGate()
		tg.srv.Enqueue(openaitest.Response{Text: []string{"one"}, FaultAt: 1, Gate: g}, openaitest.Text("two"))
		from = len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "a"})
		<-g.Reached()
		for _, x := range []string{"b", "c"} {
			if r := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": x}); r["status"] != "queued" {
				t.Fatalf("queue mode: %v", r)
			}
		}
		g.Release()
		e, i = waitType(t, c, from, sid, "message.complete")
		if payload(t, e)["status"] != "complete" {
			t.Fatalf("queue mode must not interrupt: %v", payload(t, e))
		}
		waitType(t, c, i+1, sid, "message.complete")
		body := string(tg.srv.Requests()[len(tg.srv.Requests())-1].Body)
		if !strings.Contains(body, `"content":"b\n\nc"`) {
			t.Fatalf("merged follow-up: %s", body)
		}
		// steer
		call(t, c, "config.set", map[string]any{"key": "busy", "value": "steer"})
		g = openaitest.NewGate()
		tg.srv.Enqueue(openaitest.Response{Calls: []openaitest.Call{{Name: "terminal", Args: []string{`{"command":"echo x"}`}}}, FaultAt: 1, Gate: g}, openaitest.Text("ok"))
		from = len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "work"})
		<-g.Reached()
		if r := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "use printf"}); r["status"] != "steered" {
			t.Fatalf("steer mode: %v", r)
		}
		g.Release()
		waitType(t, c, from, sid, "message.complete")
		body = string(tg.srv.Requests()[len(tg.srv.Requests())-1].Body)
		if !strings.Contains(body, "OUT-OF-BAND USER MESSAGE") || !strings.Contains(body, "use printf") {
			t.Fatalf("steer not in the next tool result: %s", body)
		}
		// interrupt discards the queue, denies the approval, cancels the request; other sessions untouched
		call(t, c, "config.set", map[string]any{"key": "busy", "value": "queue"})
		other := create(t, c)
		tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("after"))
		from = len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "clean"})
		req, err := c.WaitRequest(tctx(t))
		if err != nil || req.Method != "approval" || !strings.HasPrefix(req.ID, "srq-") {
			t.Fatalf("approval request: %+v %v", req, err)
		}
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "queued one"})
		if r := call(t, c, "session.interrupt", map[string]any{"session_id": sid}); r["status"] != "interrupted" {
			t.Fatalf("interrupt: %v", r)
		}
		e, _ = waitType(t, c, from, sid, "request.cancel")
		if p := payload(t, e); p["id"] != req.ID || p["reason"] != "interrupted" {
			t.Fatalf("request.cancel: %v", p)
		}
		e, i = waitType(t, c, from, sid, "message.complete")
		if payload(t, e)["status"] != "interrupted" {
			t.Fatalf("interrupted turn: %v", payload(t, e))
		}
		if _, err := os.Stat(filepath.Join(tg.cwd, "build")); err == nil {
			t.Fatal("unexpected build dir")
		}
		// The queue was dropped: the session is idle with nothing queued (the status call is
		// answered only after every event emitted before it reached this client).
		if st := call(t, c, "session.status", map[string]any{"session_id": sid}); st["status"] != "idle" || strings.Contains(st["output"].(string), "Queued") {
			t.Fatalf("the queued prompt survived the interrupt: %v", st)
		}
		for _, ev := range c.Events()[i+1:] {
			if ev.SessionID == sid && ev.Type == "message.start" {
				t.Fatal("the queued prompt ran after an interrupt")
			}
		}
		if st := call(t, c, "session.status", map[string]any{"session_id": other}); st["status"] != "idle" {
			t.Fatalf("other session touched: %v", st)
		}
		req.Answer(map[string]any{"choice": "once"}) // too late: ignored
	})
}

func rowIDs(t *testing.T, c *gwclient.Client, sid string) (users []float64, all []map[string]any) {
	t.Helper()
	h := call(t, c, "session.history", map[string]any{"session_id": sid})
	for _, m := range h["messages"].([]any) {
		mm := m.(map[string]any)
		all = append(all, mm)
		if mm["role"] == "user" {
			users = append(users, mm["row_id"].(float64))
		}
	}
	return
}

func TestGatewayRewind(t *testing.T) { // behaviours 12-17
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		for _, a := range []string{"A1", "A2"} {
			tg.srv.Enqueue(openaitest.Text(a))
			turn(t, c, sid, "Q"+a[1:])
		}
		users, before := rowIDs(t, c, sid)
		sub := func(extra map[string]any) (int, error) {
			p := map[string]any{"session_id": sid, "text": "edited"}
			for k, v := range extra {
				p[k] = v
			}
			return callErr(t, c, "prompt.submit", p)
		}
		check := func(want int, extra map[string]any) {
			t.Helper()
			if code, err := sub(extra); code != want {
				t.Fatalf("%v: got %d (%v) want %d", extra, code, err, want)
			}
		}
		check(4029, map[string]any{"truncate_before_row_id": users[1]})
		check(4004, map[string]any{"confirm_truncate": true})
		check(4004, map[string]any{"truncate_before_row_id": true, "confirm_truncate": true})
		check(4004, map[string]any{"truncate_before_row_id": 1.5, "confirm_truncate": true})
		code, err := sub(map[string]any{"truncate_before_row_id": 999999, "confirm_truncate": true})
		if code != 4018 || !strings.Contains(fmt.Sprint(err), "no longer") {
			t.Fatalf("stale: %d %v", code, err)
		}
		check(4030, map[string]any{"truncate_before_row_id": users[1], "truncate_before_user_ordinal": 0, "confirm_truncate": true})
		check(4004, map[string]any{"truncate_before_user_ordinal": 1, "confirm_truncate": true})
		check(4028, map[string]any{"truncate_before_row_id": users[0], "confirm_truncate": true})
		if _, after := rowIDs(t, c, sid); len(after) != len(before) {
			t.Fatal("a refused rewind changed the transcript")
		}
		// 4009 while running, then after interrupt the same submit lands
		g := openaitest.NewGate()
		tg.srv.Enqueue(openaitest.Response{Text: []string{"x"}, FaultAt: 1, Gate: g})
		from := len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "Q3"})
		<-g.Reached()
		check(4009, map[string]any{"truncate_before_row_id": users[1], "confirm_truncate": true})
		if code, _ := callErr(t, c, "session.compress", map[string]any{"session_id": sid}); code != 4009 {
			t.Fatalf("compress while running: %d", code)
		}
		if code, _ := callErr(t, c, "command.dispatch", map[string]any{"session_id": sid, "name": "undo"}); code != 4009 {
			t.Fatalf("undo while running: %d", code)
		}
		call(t, c, "session.interrupt", map[string]any{"session_id": sid})
		waitType(t, c, from, sid, "message.complete")
		g.Release()
		tg.srv.Enqueue(openaitest.Text("A2'"))
		users, _ = rowIDs(t, c, sid)
		from = len(c.Events())
		r := call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "Q2 edited", "truncate_before_row_id": users[1], "confirm_truncate": true})
		surv, _ := r["survivor_user_row_ids"].([]any)
		if r["status"] != "streaming" || len(surv) != 1 || surv[0].(float64) == users[0] {
			t.Fatalf("rewind: %v (old %v)", r, users)
		}
		waitType(t, c, from, sid, "message.complete")
		// empty truncate with consent → survivors []
		tg.srv.Enqueue(openaitest.Text("fresh"))
		users, _ = rowIDs(t, c, sid)
		from = len(c.Events())
		r = call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "restart", "truncate_before_row_id": users[0], "confirm_truncate": true, "confirm_empty_truncate": true})
		if s, ok := r["survivor_user_row_ids"].([]any); !ok || len(s) != 0 {
			t.Fatalf("empty rewind: %v", r)
		}
		waitType(t, c, from, sid, "message.complete")
	})
}

func TestGatewaySteerAndRequests(t *testing.T) { // behaviours 18-21
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		ready := c.Events()[0]
		sid := create(t, c)
		if code, _ := callErr(t, c, "session.steer", map[string]any{"session_id": sid, "text": "  "}); code != 4002 {
			t.Fatalf("blank steer: %d", code)
		}
		if r := call(t, c, "session.steer", map[string]any{"session_id": sid, "text": "be brief"}); r["status"] != "queued" || r["text"] != "be brief" {
			t.Fatalf("steer: %v", r)
		}
		// an approval that nobody answers times out: exactly one request.cancel{reason:timeout}
		tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"git reset --hard"}`}}), openaitest.Text("gave up"))
		from := len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "reset"})
		req, err := c.WaitRequest(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		p := req.Params
		if p["session_id"] != sid || p["command"] != "git reset --hard" || !slices.Contains(toStrings(p["choices"]), "once") {
			t.Fatalf("approval params: %v", p)
		}
		since := call(t, c, "session.events.since", map[string]any{"session_id": sid, "last_seen": 0})
		if reqs := since["open_requests"].([]any); len(reqs) != 1 || reqs[0].(map[string]any)["id"] != req.ID {
			t.Fatalf("open_requests: %v", since["open_requests"])
		}
		if in, _ := since["inflight"].(map[string]any); in == nil || in["user"] != "reset" {
			t.Fatalf("inflight while waiting on the approval: %v", since["inflight"])
		}
		if since["epoch"] != payload(t, ready)["replay_epoch"] || since["truncated"] != false {
			t.Fatalf("events.since: %v", since)
		}
		var lastSeq float64
		for _, e := range since["events"].([]any) {
			s := e.(map[string]any)["seq"].(float64)
			if s <= lastSeq {
				t.Fatalf("replay out of order")
			}
			lastSeq = s
		}
		if since["latest_seq"].(float64) < lastSeq {
			t.Fatalf("latest_seq %v vs %v", since["latest_seq"], lastSeq)
		}
		e, _ := waitType(t, c, from, sid, "request.cancel")
		if pl := payload(t, e); pl["reason"] != "timeout" || pl["id"] != req.ID {
			t.Fatalf("timeout cancel: %v", pl)
		}
		req.Answer(map[string]any{"choice": "once"}) // ignored
		end, _ := waitType(t, c, from, sid, "message.complete")
		n := 0
		for _, ev := range c.Events()[from:] {
			if ev.Type == "request.cancel" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("request.cancel count %d", n)
		}
		if pl := payload(t, end); pl["pending_steer"] != "be brief" && !strings.Contains(string(tg.srv.Requests()[len(tg.srv.Requests())-1].Body), "be brief") {
			t.Fatalf("the held steer was neither delivered nor returned: %v", pl)
		}
	})
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}

func TestGatewayServerRequestGate(t *testing.T) { // behaviour 19
	t.Parallel()
	tg := newTarget(t, true, nil)
	old := open(t, tg, false) // never advertises server requests
	sid := create(t, old)
	tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("ok"))
	os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755)
	from := len(old.Events())
	call(t, old, "prompt.submit", map[string]any{"session_id": sid, "text": "clean"})
	e, _ := waitType(t, old, from, sid, "tool.complete")
	if pl := payload(t, e); pl["is_error"] != true || !strings.Contains(fmt.Sprint(pl["result_text"]), "withdrawn") {
		t.Fatalf("the approval must be withdrawn at once: %v", pl)
	}
	for _, f := range old.Frames() {
		if f == "request:approval" {
			t.Fatal("a non-advertising client received an approval frame")
		}
	}
	waitType(t, old, from, sid, "message.complete")
	// An advertising client gets the request and its answer lets the command run.
	c := open(t, tg, true)
	sid = create(t, c)
	tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("removed"))
	from = len(c.Events())
	call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "clean"})
	req, err := c.WaitRequest(tctx(t))
	if err != nil || req.Method != "approval" {
		t.Fatal(req, err)
	}
	req.Answer(map[string]any{"choice": "once"})
	waitType(t, c, from, sid, "message.complete")
	if _, err := os.Stat(filepath.Join(tg.cwd, "build")); !os.IsNotExist(err) {
		t.Fatal("the approved command did not run")
	}
}

func TestGatewayMultiClientReconnect(t *testing.T) { // behaviour 22 + acceptance
	t.Parallel()
	tg := newTarget(t, true, func(c *engine.Config, _ *gateway.Options) { c.ApprovalTimeout = 30 * time.Second })
	a := open(t, tg, true)
	sid := create(t, a)
	b := open(t, tg, true)
	snap := call(t, b, "session.activate", map[string]any{"session_id": sid})
	if snap["session_id"] != sid {
		t.Fatalf("activate: %v", snap)
	}
	tg.srv.Enqueue(openaitest.Text("x", "y", "z"))
	fromA, fromB := len(a.Events()), len(b.Events())
	turn(t, a, sid, "hello")
	waitType(t, b, fromB, sid, "message.complete")
	seqs := func(c *gwclient.Client, from int) []string {
		var out []string
		for _, e := range c.Events()[from:] {
			if e.SessionID == sid {
				out = append(out, fmt.Sprintf("%d:%s", e.Seq, e.Type))
				if e.Type == "message.complete" {
					break
				}
			}
		}
		return out
	}
	if sa, sb := seqs(a, fromA), seqs(b, fromB); !slices.Equal(sa, sb) {
		t.Fatalf("clients saw different events:\n%v\n%v", sa, sb)
	}
	// b leaves mid-turn while an approval is open; a keeps receiving; b reconnects and answers.
	os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755)
	tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("cleaned"))
	fromA = len(a.Events())
	call(t, a, "prompt.submit", map[string]any{"session_id": sid, "text": "clean"})
	if _, err := a.WaitRequest(tctx(t)); err != nil { // a sees the request but leaves it to b
		t.Fatal(err)
	}
	if _, err := b.WaitRequest(tctx(t)); err != nil {
		t.Fatal(err)
	}
	var lastSeen uint64
	for _, e := range b.Events() {
		if e.SessionID == sid {
			lastSeen = e.Seq
		}
	}
	b.Close()
	<-b.Done()
	b2 := open(t, tg, true)
	since := call(t, b2, "session.events.since", map[string]any{"session_id": sid, "last_seen": lastSeen})
	reqs := since["open_requests"].([]any)
	if len(reqs) != 1 {
		t.Fatalf("open requests after reconnect: %v", since)
	}
	rid := reqs[0].(map[string]any)["id"].(string)
	for _, e := range since["events"].([]any) {
		if uint64(e.(map[string]any)["seq"].(float64)) <= lastSeen {
			t.Fatalf("replayed an event already seen: %v", e)
		}
	}
	if r := call(t, b2, "request.answer", map[string]any{"id": rid, "result": map[string]any{"choice": "once"}}); r["status"] != "ok" {
		t.Fatalf("answer after reconnect: %v", r)
	}
	e, _ := waitType(t, a, fromA, sid, "message.complete")
	if payload(t, e)["text"] != "cleaned" {
		t.Fatalf("turn: %v", payload(t, e))
	}
	waitType(t, b2, 0, sid, "message.complete")
	if _, err := os.Stat(filepath.Join(tg.cwd, "build")); !os.IsNotExist(err) {
		t.Fatal("the command approved after reconnect did not run")
	}
	if r := call(t, a, "request.answer", map[string]any{"id": rid, "result": map[string]any{"choice": "once"}}); r["status"] != "expired" {
		t.Fatalf("answer to a settled request: %v", r)
	}
}

func TestGatewayHugeFrameKeepsConnection(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, false, nil)
	c := open(t, tg, false)
	big := []byte(`{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"` + strings.Repeat("a", 50<<20) + `"}}`)
	go c.Raw(big)
	o, err := c.WaitOrphan(tctx(t))
	if err != nil || o.Err == nil || !strings.Contains(o.Err.Message, "too large") {
		t.Fatalf("huge frame: %+v %v", o, err)
	}
	if p := call(t, c, "ping", nil); p["pong"] != true {
		t.Fatal("connection lost after a huge frame")
	}
}

// endSignal is a framer that reports when the gateway has read the end of its input.
type endSignal struct {
	jsonrpc.Framer
	once sync.Once
	eof  chan struct{}
}

func (f *endSignal) Read(ctx context.Context) ([]byte, error) {
	b, err := f.Framer.Read(ctx)
	if err != nil {
		f.once.Do(func() { close(f.eof) })
	}
	return b, err
}

// rawConn is a stdio connection driven frame by frame, as `printf '…' | hermes gateway` does.
type rawConn struct {
	in     *io.PipeWriter      // the gateway's input; closing it is the client's EOF
	frames chan map[string]any // everything the gateway wrote, closed when its output ends
	eof    chan struct{}       // the gateway has read the end of its input
	served chan struct{}       // Serve has returned
}

func (tg *target) raw(t *testing.T) *rawConn {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	f := &endSignal{Framer: jsonrpc.NewLineFramer(sr, sw, closers{sr, sw}, 0), eof: make(chan struct{})}
	rc := &rawConn{in: cw, frames: make(chan map[string]any, 256), eof: f.eof, served: make(chan struct{})}
	go func() {
		defer close(rc.served)
		tg.gw.Serve(context.Background(), f, tg.ws, nil)
	}()
	go func() {
		defer close(rc.frames)
		br := bufio.NewReader(cr)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]any
			if !utf8.Valid(line) || json.Unmarshal(line, &m) != nil { // not JSON (RFC 8259 §8.1)
				m = map[string]any{"unparsable": string(line)}
			}
			rc.frames <- m
		}
	}()
	t.Cleanup(func() {
		cw.Close()
		cr.Close()
		<-rc.served
	})
	return rc
}

func (rc *rawConn) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(rc.in, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// answer waits for the response with id (a JSON number), skipping everything else.
func (rc *rawConn) answer(t *testing.T, id float64) map[string]any {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-rc.frames:
			if !ok {
				t.Fatalf("the output ended before the answer to %v", id)
			}
			if _, isNote := m["method"]; !isNote && m["id"] == id {
				return m
			}
		case <-timeout:
			t.Fatalf("no answer to %v", id)
		}
	}
}

// rest reads what the gateway writes until its output ends, and returns its answers by id.
func (rc *rawConn) rest(t *testing.T) map[float64]map[string]any {
	t.Helper()
	got := map[float64]map[string]any{}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-rc.frames:
			if !ok {
				return got
			}
			if u, bad := m["unparsable"]; bad {
				t.Fatalf("a frame that is not JSON: %q", u)
			}
			if id, isAnswer := m["id"].(float64); isAnswer && m["method"] == nil {
				if got[id] != nil {
					t.Fatalf("answered twice: %v and %v", got[id], m)
				}
				got[id] = m
			}
		case <-timeout:
			t.Fatalf("the output never ended; answers so far: %v", got)
		}
	}
}

func rpcCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// TestGatewayAnswersWhatWasReadBeforeEOF: a client that writes its requests and closes its
// input at once gets every answer: the async requests still running when the end of input is
// read (a slow cli.exec, session.list, a session.list with a bad limit) as well as the inline
// ping; their work is not cancelled by the end of input. Then the connection ends.
func TestGatewayAnswersWhatWasReadBeforeEOF(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var cliCancelled atomic.Bool
	tg := newTarget(t, false, func(_ *engine.Config, o *gateway.Options) {
		o.CLI = func(ctx context.Context, argv []string) (string, int, error) {
			select {
			case <-release:
				return "hermes test\n", 0, nil
			case <-ctx.Done():
				cliCancelled.Store(true)
				return "", 0, ctx.Err()
			}
		}
	})
	rc := tg.raw(t)
	rc.send(t,
		`{"jsonrpc":"2.0","id":1,"method":"cli.exec","params":{"argv":["version"]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session.list","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session.list","params":{"limit":"x"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	)
	rc.in.Close()
	<-rc.eof
	time.Sleep(100 * time.Millisecond) // time for a connection ending at EOF to cancel cli.exec
	close(release)
	got := rc.rest(t)
	if r, _ := got[1]["result"].(map[string]any); r == nil || !strings.Contains(fmt.Sprint(r["output"]), "hermes test") {
		t.Errorf("cli.exec: %v (cancelled by the end of input: %v)", got[1], cliCancelled.Load())
	}
	if r, _ := got[2]["result"].(map[string]any); r == nil || r["sessions"] == nil {
		t.Errorf("session.list: %v", got[2])
	}
	if rpcCode(got[3]) != jsonrpc.CodeInvalidParams {
		t.Errorf("session.list with a bad limit: %v", got[3])
	}
	if r, _ := got[4]["result"].(map[string]any); r["pong"] != true {
		t.Errorf("ping: %v", got[4])
	}
	if len(got) != 4 {
		t.Errorf("answers: %v", got)
	}
	select {
	case <-rc.served:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection did not end once everything was answered")
	}
}

// TestGatewayIDNotUTF8: a request whose id is a string that is not valid UTF-8 is refused
// -32600 with id null (echoing it would make the answer invalid JSON); the connection goes on.
func TestGatewayIDNotUTF8(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, false, nil)
	rc := tg.raw(t)
	rc.send(t, "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}", `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	timeout := time.After(20 * time.Second)
	for refused := false; !refused; {
		select {
		case m, ok := <-rc.frames:
			if !ok {
				t.Fatal("the output ended")
			}
			if u, bad := m["unparsable"]; bad {
				t.Fatalf("a frame that is not JSON: %q", u)
			}
			if m["method"] != nil {
				continue
			}
			if id, has := m["id"]; !has || id != nil || rpcCode(m) != -32600 {
				t.Fatalf("want -32600 with id null first, got %v", m)
			}
			refused = true
		case <-timeout:
			t.Fatal("no answer to the bad id")
		}
	}
	if r, _ := rc.answer(t, 2)["result"].(map[string]any); r["pong"] != true {
		t.Fatalf("ping after the bad id: %v", r)
	}
}

// TestGatewayEOFWithTurnRunning: the end of input with a turn running (waiting on an approval
// nobody will give) ends the connection at once: the turn is not a request, so it does not
// hold the connection (or `hermes gateway`) open; its approval stays open for a reconnect.
func TestGatewayEOFWithTurnRunning(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, false, func(c *engine.Config, _ *gateway.Options) { c.ApprovalTimeout = time.Minute })
	rc := tg.raw(t)
	rc.send(t, `{"jsonrpc":"2.0","id":1,"method":"session.create","params":{}}`)
	sid := rc.answer(t, 1)["result"].(map[string]any)["session_id"].(string)
	os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755)
	tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}), openaitest.Text("done"))
	rc.send(t, `{"jsonrpc":"2.0","id":2,"method":"prompt.submit","params":{"session_id":"`+sid+`","text":"clean"}}`)
	if r, _ := rc.answer(t, 2)["result"].(map[string]any); r["status"] != "streaming" {
		t.Fatalf("submit: %v", r)
	}
	timeout := time.After(20 * time.Second)
	for asked := false; !asked; {
		select {
		case m := <-rc.frames:
			asked = m["method"] == "approval"
		case <-timeout:
			t.Fatal("no approval request")
		}
	}
	rc.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	rc.in.Close()
	start := time.Now()
	got := rc.rest(t)
	if r, _ := got[3]["result"].(map[string]any); r["pong"] != true {
		t.Errorf("ping: %v", got[3])
	}
	<-rc.served
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the connection took %v to end after the end of input", d)
	}
	c := open(t, tg, false)
	since := call(t, c, "session.events.since", map[string]any{"session_id": sid, "last_seen": 0})
	if reqs, _ := since["open_requests"].([]any); len(reqs) != 1 {
		t.Fatalf("the approval did not stay open for a reconnect: %v", since["open_requests"])
	}
}

func TestGatewayMethodsCatalogue(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		if caps := call(t, c, "gateway.capabilities", nil); caps["per_session_exclusive_submit"] != true {
			t.Fatal(caps)
		}
		cat := call(t, c, "commands.catalog", nil)["commands"].([]any)
		var names []string
		for _, x := range cat {
			names = append(names, x.(map[string]any)["name"].(string))
		}
		for _, want := range []string{"model", "title", "compress", "steer", "queue", "retry", "undo", "branch", "status", "usage"} {
			if !slices.Contains(names, want) {
				t.Fatalf("catalog lacks /%s", want)
			}
		}
		if r := call(t, c, "command.resolve", map[string]any{"text": "/model openai:x"}); r["found"] != true || r["arg"] != "openai:x" {
			t.Fatal(r)
		}
		if r := call(t, c, "command.dispatch", map[string]any{"session_id": sid, "name": "model", "arg": "openai:gpt-4.1-mini"}); r["type"] != "exec" {
			t.Fatal(r)
		}
		if r := call(t, c, "config.get", map[string]any{"key": "model", "session_id": sid}); r["value"] != "openai:gpt-4.1-mini" {
			t.Fatal(r)
		}
		// model validation: a provider with a fixed list refuses unknown names with suggestions
		code, err := callErr(t, c, "session.create", map[string]any{"model": "nope:x"})
		if code != -32602 || !strings.Contains(err.Error(), "unknown model provider") {
			t.Fatal(code, err)
		}
		if r := call(t, c, "session.title", map[string]any{"session_id": sid, "title": "Demo"}); r["pending"] != false { // stored at birth: applied at once
			t.Fatal(r)
		}
		if code, _ := callErr(t, c, "session.title", map[string]any{"session_id": sid, "title": " "}); code != 4021 {
			t.Fatal(code)
		}
		tg.srv.Enqueue(openaitest.Text("hi"))
		turn(t, c, sid, "hello")
		if code, _ := callErr(t, c, "session.title", map[string]any{"session_id": create(t, c), "title": "Demo"}); code != 4022 {
			t.Fatal("duplicate title", code)
		}
		br := call(t, c, "session.branch", map[string]any{"session_id": sid})
		if br["title"] != "Demo #2" || br["parent"] == "" || br["message_count"].(float64) != 2 {
			t.Fatalf("branch: %v", br)
		}
		if code, _ := callErr(t, c, "session.branch", map[string]any{"session_id": create(t, c)}); code != 4008 {
			t.Fatal("branch of empty", code)
		}
		if u := call(t, c, "session.usage", map[string]any{"session_id": sid}); u["calls"].(float64) != 1 {
			t.Fatal(u)
		}
		if r := call(t, c, "cli.exec", map[string]any{"argv": []string{"version"}}); !strings.HasPrefix(r["output"].(string), "hermes ") {
			t.Fatal(r)
		}
		if code, _ := callErr(t, c, "cli.exec", map[string]any{"argv": []string{"rm", "-rf", "/"}}); code != 4003 {
			t.Fatal("cli allow-list", code)
		}
		if code, _ := callErr(t, c, "cli.exec", map[string]any{"argv": "version"}); code != 4003 {
			t.Fatal("argv type", code)
		}
		if r := call(t, c, "clipboard.paste", map[string]any{"session_id": sid}); r["attached"] != false || r["message"] == "" {
			t.Fatal(r)
		}
		png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
		if r := call(t, c, "clipboard.paste", map[string]any{"session_id": sid, "content_base64": png}); r["attached"] != true || r["count"].(float64) != 1 {
			t.Fatal(r)
		}
		if code, _ := callErr(t, c, "image.attach", map[string]any{"session_id": sid, "path": "missing.png"}); code != 4016 {
			t.Fatal(code)
		}
		if r := call(t, c, "terminal.resize", map[string]any{"session_id": sid, "cols": 120}); r["cols"].(float64) != 120 {
			t.Fatal(r)
		}
		if code, _ := callErr(t, c, "process.stop", map[string]any{"session_id": sid, "process_id": "proc_9"}); code != 4044 {
			t.Fatal(code)
		}
		tg.srv.Enqueue(openaitest.Text("side answer")) // before the call: the side turn starts at once
		bg := call(t, c, "prompt.background", map[string]any{"session_id": sid, "text": "side question"})
		e, _ := waitType(t, c, 0, sid, "background.complete")
		if p := payload(t, e); p["task_id"] != bg["task_id"] || p["text"] != "side answer" {
			t.Fatalf("background: %v", p)
		}
		if r := call(t, c, "spawn_tree.save", map[string]any{"session_id": sid}); r["path"] == "" {
			t.Fatal(r)
		} else if l := call(t, c, "spawn_tree.list", map[string]any{"session_id": sid})["entries"].([]any); len(l) != 1 {
			t.Fatal(l)
		} else if snap := call(t, c, "spawn_tree.load", map[string]any{"path": r["path"]}); snap["tree"] == nil {
			t.Fatal(snap)
		}
		if r := call(t, c, "delegation.status", map[string]any{"session_id": sid}); r["active"].(float64) != 0 {
			t.Fatal(r)
		}
		if r := call(t, c, "subagent.interrupt", map[string]any{"subagent_id": "nope"}); r["found"] != false {
			t.Fatal(r)
		}
		if code, _ := callErr(t, c, "subagent.steer", map[string]any{"text": "x"}); code != 4000 {
			t.Fatal(code)
		}
		for _, m := range []string{"reload.mcp", "reload.env", "session.active_list"} {
			call(t, c, m, nil)
		}
		if r := call(t, c, "session.close", map[string]any{"session_id": sid}); r["closed"] != true {
			t.Fatal(r)
		}
		if code, _ := callErr(t, c, "session.usage", map[string]any{"session_id": sid}); code != 4001 {
			t.Fatal(code)
		}
		res := call(t, c, "session.resume", map[string]any{"session_id": "Demo"})
		if res["message_count"].(float64) != 2 {
			t.Fatalf("resume by title: %v", res)
		}
		if code, _ := callErr(t, c, "session.resume", map[string]any{"session_id": "nothing-here"}); code != 4007 {
			t.Fatal(code)
		}
		if code, _ := callErr(t, c, "session.resume", map[string]any{}); code != 4006 {
			t.Fatal(code)
		}
	})
}

func TestGatewayBatchClarifyLock(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		tg.srv.Enqueue(openaitest.ToolCalls(openaitest.Call{Name: "clarify", Args: []string{`{"questions":[{"question":"Which DB?","choices":["pg","sqlite"]},{"question":"Port?"}]}`}}), openaitest.Text("thanks"))
		from := len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "set it up"})
		req, err := c.WaitRequest(tctx(t))
		if err != nil || req.Method != "clarify" || len(req.Params["questions"].([]any)) != 2 {
			t.Fatalf("batch clarify: %+v %v", req, err)
		}
		if code, _ := callErr(t, c, "clarify.lock", map[string]any{"request_id": req.ID, "question_id": "q9", "answer": "x"}); code != 4002 {
			t.Fatal("unknown qid", code)
		}
		if r := call(t, c, "clarify.lock", map[string]any{"request_id": req.ID, "question_id": "q1", "answer": "pg"}); r["status"] != "ok" || len(r["remaining"].([]any)) != 1 {
			t.Fatal(r)
		}
		if r := call(t, c, "clarify.lock", map[string]any{"request_id": req.ID, "question_id": "q2", "answer": 5432}); r["status"] != "ok" || len(r["remaining"].([]any)) != 0 {
			t.Fatal(r)
		}
		e, _ := waitType(t, c, from, sid, "tool.complete")
		if rt := payload(t, e)["result_text"].(string); !strings.Contains(rt, `"q1":"pg"`) || !strings.Contains(rt, `"q2":"5432"`) {
			t.Fatalf("answers: %s", rt)
		}
		if r := call(t, c, "clarify.lock", map[string]any{"request_id": req.ID, "question_id": "q1", "answer": "x"}); r["status"] != "expired" {
			t.Fatal(r)
		}
		waitType(t, c, from, sid, "message.complete")
	})
}

func TestGatewayOrphanReap(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, true, func(_ *engine.Config, o *gateway.Options) { o.OrphanGrace = 150 * time.Millisecond })
	a := open(t, tg, true)
	gone := create(t, a)
	kept := create(t, a)
	a.Close()
	<-a.Done()
	b := open(t, tg, true)
	call(t, b, "session.activate", map[string]any{"session_id": kept}) // re-attached within the grace
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := b.Call(tctx(t), "session.status", map[string]any{"session_id": gone})
		if gwclient.Code(err) == 4001 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an orphaned idle session was never reaped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // past the grace: the re-attached one must still be live
	if st := call(t, b, "session.status", map[string]any{"session_id": kept}); st["status"] != "idle" {
		t.Fatal(st)
	}
}

func TestGatewayEventsSinceGeneration(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, true, nil)
	c := open(t, tg, true)
	sid := create(t, c)
	tg.srv.Enqueue(openaitest.Text("hi"))
	turn(t, c, sid, "hello")
	since := call(t, c, "session.events.since", map[string]any{"session_id": sid, "last_seen": 2})
	gen, _ := since["replay_generation"].(string)
	if gen == "" || since["truncated"] != false {
		t.Fatalf("same generation: %v", since)
	}
	stale := call(t, c, "session.events.since", map[string]any{"session_id": sid, "last_seen": 2, "replay_generation": "000000000000"})
	if stale["truncated"] != true || len(stale["events"].([]any)) == 0 {
		t.Fatalf("a cursor from another generation must be reported truncated: %v", stale)
	}
	future := call(t, c, "session.events.since", map[string]any{"session_id": sid, "last_seen": 1 << 40})
	if future["truncated"] != true {
		t.Fatalf("a cursor past the end must be reported truncated: %v", future)
	}
}

// TestGatewayUndoRetry: /undo archives the last user turn and prefills its text; /retry
// archives it and hands it back to send; with no user turn both are refused (4018).
func TestGatewayUndoRetry(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		if code, _ := callErr(t, c, "command.dispatch", map[string]any{"session_id": sid, "name": "undo"}); code != 4018 {
			t.Fatalf("undo of an empty session: %d", code)
		}
		for _, a := range []string{"A1", "A2"} {
			tg.srv.Enqueue(openaitest.Text(a))
			turn(t, c, sid, "Q"+a[1:])
		}
		r := call(t, c, "command.dispatch", map[string]any{"session_id": sid, "name": "undo"})
		if r["type"] != "prefill" || r["text"] != "Q2" || r["removed"] != float64(2) {
			t.Fatalf("undo: %v", r)
		}
		r = call(t, c, "command.dispatch", map[string]any{"session_id": sid, "name": "retry"})
		if r["type"] != "send" || r["message"] != "Q1" {
			t.Fatalf("retry: %v", r)
		}
		if _, all := rowIDs(t, c, sid); len(all) != 0 {
			t.Fatalf("transcript after undo and retry: %v", all)
		}
	})
}

// TestGatewayDeletedSession: a session deleted through the engine (as the HTTP API's DELETE
// does) is neither listed nor resumable, by id or by title.
func TestGatewayDeletedSession(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		var stored, rids []string
		for _, title := range []string{"gone", "kept"} {
			res := call(t, c, "session.create", map[string]any{"title": title, "messages": []map[string]any{{"role": "user", "content": "hello"}}})
			stored = append(stored, res["stored_session_id"].(string))
			rids = append(rids, res["session_id"].(string))
		}
		if err := tg.eng.Delete(tctx(t), stored[0]); err != nil {
			t.Fatal(err)
		}
		// Its runtime id is no longer served: not listed, not activated (by a new client either),
		// no history, no title.
		other := open(t, tg, true)
		for _, cl := range []*gwclient.Client{other, c} {
			active := call(t, cl, "session.active_list", nil)["sessions"].([]any)
			if len(active) != 1 || active[0].(map[string]any)["session_key"] != stored[1] {
				t.Fatalf("active list after delete: %v", active)
			}
			for _, m := range []struct {
				method string
				params map[string]any
			}{
				{"session.activate", map[string]any{"session_id": rids[0]}},
				{"session.history", map[string]any{"session_id": rids[0]}},
				{"session.title", map[string]any{"session_id": rids[0], "title": "taken?"}},
			} {
				if code, err := callErr(t, cl, m.method, m.params); code != 4007 {
					t.Fatalf("%s of the deleted session's runtime id: %v", m.method, err)
				}
			}
		}
		if code, err := callErr(t, c, "session.history", map[string]any{"session_id": "nosuch"}); code != 4001 {
			t.Fatalf("history of an unknown runtime id: %v", err)
		}
		for _, ref := range []string{stored[0], "gone"} {
			if code, _ := callErr(t, c, "session.resume", map[string]any{"session_id": ref}); code != 4007 {
				t.Fatalf("resume of the deleted session by %q: %d", ref, code)
			}
		}
		// Neither its title nor the one tried on it is held.
		if res := call(t, other, "session.create", map[string]any{"title": "gone"}); res["session_id"] == "" {
			t.Fatalf("create under the deleted session's title: %v", res)
		}
		if res := call(t, c, "session.resume", map[string]any{"session_id": "gone"}); res["resumed"] == stored[0] {
			t.Fatalf("resume by the title now names the new session: %v", res)
		}
		if res := call(t, other, "session.create", map[string]any{"title": "taken?"}); res["session_id"] == "" {
			t.Fatalf("create under the title tried on the deleted session: %v", res)
		}
		// Listed: the kept session and the two titled just now (stored at birth), not the deleted.
		list := call(t, c, "session.list", nil)["sessions"].([]any)
		listed := map[string]string{}
		for _, s := range list {
			listed[s.(map[string]any)["id"].(string)] = s.(map[string]any)["title"].(string)
		}
		if _, gone := listed[stored[0]]; gone || len(list) != 3 || listed[stored[1]] != "kept" {
			t.Fatalf("list after delete: %v", list)
		}
		if res := call(t, c, "session.resume", map[string]any{"session_id": "kept"}); res["message_count"] != float64(1) {
			t.Fatalf("resume of the kept session: %v", res)
		}
	})
}

// rewindGate holds the store's Rewind until released, after signalling that it was reached.
type rewindGate struct {
	store.Store
	reached, release chan struct{}
}

func (g *rewindGate) Rewind(ctx context.Context, id string, f store.Fence, before uint64, extra []store.Row) (store.RewindResult, error) {
	if g.reached != nil {
		close(g.reached)
		g.reached = nil
		<-g.release
	}
	return g.Store.Rewind(ctx, id, f, before, extra)
}

// TestGatewayUndoHoldsTheTurn: /undo used to check that no turn ran and then rewind, so a
// prompt from another client could start a turn in between and lose its prompt row to the
// rewind. Now a prompt sent while the undo is writing is queued behind it and runs after.
func TestGatewayUndoHoldsTheTurn(t *testing.T) {
	t.Parallel()
	g := &rewindGate{}
	tg := newTarget(t, false, func(c *engine.Config, _ *gateway.Options) { g.Store = c.Store; c.Store = g })
	a, b := open(t, tg, true), open(t, tg, true)
	sid := create(t, a)
	tg.srv.Enqueue(openaitest.Text("A1"), openaitest.Text("A2"))
	turn(t, a, sid, "Q1")
	call(t, b, "session.activate", map[string]any{"session_id": sid})

	g.reached, g.release = make(chan struct{}), make(chan struct{})
	reached := g.reached
	undone := make(chan map[string]any, 1)
	go func() {
		var r map[string]any
		if err := a.CallInto(tctx(t), "command.dispatch", map[string]any{"session_id": sid, "name": "undo"}, &r); err != nil {
			t.Error(err)
		}
		undone <- r
	}()
	<-reached
	from := len(b.Events())
	if r := call(t, b, "prompt.submit", map[string]any{"session_id": sid, "text": "Q2"}); r["status"] != "queued" {
		t.Fatalf("a prompt during the undo: %v; it must wait for the undo", r)
	}
	close(g.release)
	if r := <-undone; r["type"] != "prefill" || r["text"] != "Q1" {
		t.Fatalf("undo: %v", r)
	}
	e, _ := waitType(t, b, from, sid, "message.complete")
	if p := payload(t, e); p["text"] != "A2" {
		t.Fatalf("the queued turn: %v", p)
	}
	_, all := rowIDs(t, b, sid)
	if len(all) != 2 || all[0]["role"] != "user" || all[0]["text"] != "Q2" {
		t.Fatalf("transcript after the undo and the queued turn: %v", all)
	}
}
