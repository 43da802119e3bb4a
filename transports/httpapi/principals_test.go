package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// Keys of the principal tests: the primary key (testKey) is the local owner's, secondKey an
// extra principal, adminKey the admin.
const (
	secondKey = "second-principal-key-0123456789"
	adminKey  = "admin-principal-key-0123456789"
)

func principalsTarget(t *testing.T) *target {
	return newTarget(t, func(o *httpapi.Options) {
		o.ExtraKeys = []httpapi.NamedKey{{Name: "ci", Key: secondKey}}
		o.AdminKey = adminKey
	})
}

// as is do with another key.
func (tg *target) as(t *testing.T, key, method, path, body string) resp {
	t.Helper()
	return tg.do(t, method, path, body, map[string]string{"Authorization": "Bearer " + key})
}

func listedIDs(t *testing.T, r resp) []string {
	t.Helper()
	l := decodeAs[struct {
		Data []map[string]any `json:"data"`
	}](t, r, 200)
	var ids []string
	for _, s := range l.Data {
		ids = append(ids, s["id"].(string))
	}
	return ids
}

func TestPrincipalsSessionsREST(t *testing.T) {
	tg := principalsTarget(t)
	mine := decodeAs[sessionEnv](t, tg.do(t, "POST", "/api/sessions", `{"id":"owner-s1","title":"Private plans","system_prompt":"secret"}`, nil), 201)
	if mine.Session["id"] != "owner-s1" {
		t.Fatalf("create %+v", mine)
	}
	// A session the CLI made (no recorded owner) is the local owner's, i.e. the primary key's.
	cli, err := tg.eng.Create(context.Background(), engine.CreateOptions{ID: "cli-s1", Source: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	_ = cli
	theirs := decodeAs[sessionEnv](t, tg.as(t, secondKey, "POST", "/api/sessions", `{"id":"second-s1"}`), 201)
	if theirs.Session["id"] != "second-s1" {
		t.Fatalf("create %+v", theirs)
	}

	for _, id := range []string{"owner-s1", "cli-s1"} {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/sessions/" + id, ""},
			{"GET", "/api/sessions/" + id + "/messages", ""},
			{"PATCH", "/api/sessions/" + id, `{"title":"taken over"}`},
			{"POST", "/api/sessions/" + id + "/fork", `{}`},
			{"POST", "/api/sessions/" + id + "/chat", `{"message":"hi"}`},
			{"POST", "/api/sessions/" + id + "/chat/stream", `{"message":"hi"}`},
			{"DELETE", "/api/sessions/" + id, ""},
		} {
			e := envelope(t, tg.as(t, secondKey, c.method, c.path, c.body), 404, "session_not_found")
			if strings.Contains(e["message"].(string), "Private") {
				t.Fatalf("%s %s leaks: %v", c.method, c.path, e)
			}
		}
	}
	// Nothing of the above touched the owner's session.
	got := decodeAs[sessionEnv](t, tg.do(t, "GET", "/api/sessions/owner-s1", "", nil), 200)
	if got.Session["title"] != "Private plans" || got.Session["message_count"] != float64(1) || got.Session["status"] == "ended" {
		t.Fatalf("owner's session changed: %+v", got)
	}
	envelope(t, tg.do(t, "GET", "/api/sessions/second-s1", "", nil), 404, "session_not_found")

	if ids := listedIDs(t, tg.as(t, secondKey, "GET", "/api/sessions", "")); !slices.Equal(ids, []string{"second-s1"}) {
		t.Fatalf("second key lists %v", ids)
	}
	if ids := listedIDs(t, tg.do(t, "GET", "/api/sessions", "", nil)); !slices.Contains(ids, "owner-s1") || !slices.Contains(ids, "cli-s1") || slices.Contains(ids, "second-s1") {
		t.Fatalf("primary key lists %v", ids)
	}
	// The admin sees everyone's.
	ids := listedIDs(t, tg.as(t, adminKey, "GET", "/api/sessions", ""))
	for _, id := range []string{"owner-s1", "cli-s1", "second-s1"} {
		if !slices.Contains(ids, id) {
			t.Fatalf("admin lists %v, missing %s", ids, id)
		}
		decodeAs[sessionEnv](t, tg.as(t, adminKey, "GET", "/api/sessions/"+id, ""), 200)
	}

	// A fork belongs to the parent's owner.
	fork := decodeAs[sessionEnv](t, tg.as(t, secondKey, "POST", "/api/sessions/second-s1/fork", `{"id":"second-fork"}`), 201)
	if fork.Session["parent_id"] != "second-s1" {
		t.Fatalf("fork %+v", fork)
	}
	envelope(t, tg.do(t, "GET", "/api/sessions/second-fork", "", nil), 404, "session_not_found")
	decodeAs[sessionEnv](t, tg.as(t, secondKey, "GET", "/api/sessions/second-fork", ""), 200)
	rec, err := tg.eng.Store().GetSession(context.Background(), "second-s1")
	if err != nil || rec.Principal == "" || rec.Principal != mustRecord(t, tg, "second-fork").Principal {
		t.Fatalf("owner not recorded durably: %+v %v", rec, err)
	}
	if strings.Contains(rec.Principal, secondKey) {
		t.Fatalf("the key itself is stored: %q", rec.Principal)
	}
}

func mustRecord(t *testing.T, tg *target, id string) (rec struct{ Principal string }) {
	t.Helper()
	r, err := tg.eng.Store().GetSession(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	rec.Principal = r.Principal
	return rec
}

func userChat(text string) string {
	b, _ := json.Marshal(map[string]any{"model": "fake-agent", "messages": []map[string]any{{"role": "user", "content": text}}})
	return string(b)
}

func TestPrincipalsChatSessionHeader(t *testing.T) {
	tg := principalsTarget(t)
	tg.fake.Enqueue(openaitest.Text("owner answer"), openaitest.Text("second answer"), openaitest.Text("owner again"))
	r := tg.do(t, "POST", "/v1/chat/completions", userChat("remember 42"), map[string]string{"X-Hermes-Session-Id": "chat-owned"})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = tg.do(t, "POST", "/v1/chat/completions", userChat("what did I say?"), map[string]string{"X-Hermes-Session-Id": "chat-owned", "Authorization": "Bearer " + secondKey})
	envelope(t, r, 404, "session_not_found")
	if r.header.Get("X-Hermes-Session-Id") == "chat-owned" {
		t.Fatalf("refusal names the session: %v", r.header)
	}
	msgs := decodeAs[struct {
		Data []map[string]any `json:"data"`
	}](t, tg.do(t, "GET", "/api/sessions/chat-owned/messages", "", nil), 200)
	for _, m := range msgs.Data {
		if strings.Contains(m["content"].(string), "what did I say") {
			t.Fatalf("the other key's prompt reached the session: %v", msgs.Data)
		}
	}
	// Stateless chats (no header) of two principals never share a derived session.
	a := tg.as(t, secondKey, "POST", "/v1/chat/completions", userChat("same opening"))
	b := tg.do(t, "POST", "/v1/chat/completions", userChat("same opening"), nil)
	if a.status != 200 || b.status != 200 {
		t.Fatalf("%d %s / %d %s", a.status, a.body, b.status, b.body)
	}
	sa, sb := a.header.Get("X-Hermes-Session-Id"), b.header.Get("X-Hermes-Session-Id")
	if sa == "" || sa == sb {
		t.Fatalf("derived sessions %q and %q", sa, sb)
	}
	envelope(t, tg.do(t, "GET", "/api/sessions/"+sa, "", nil), 404, "session_not_found")
}

func TestPrincipalsResponses(t *testing.T) {
	tg := principalsTarget(t)
	tg.fake.Enqueue(openaitest.Text("one"), openaitest.Text("two"), openaitest.Text("three"), openaitest.Text("four"))
	first := decode(t, tg.do(t, "POST", "/v1/responses", `{"model":"fake-agent","input":"hello","conversation":"plans"}`, nil))
	id, _ := first["id"].(string)
	if !strings.HasPrefix(id, "resp_") {
		t.Fatalf("response %v", first)
	}
	envelope(t, tg.as(t, secondKey, "GET", "/v1/responses/"+id, ""), 404, "response_not_found")
	envelope(t, tg.as(t, secondKey, "DELETE", "/v1/responses/"+id, ""), 404, "response_not_found")
	// Chaining onto another principal's response is refused exactly like an unknown id.
	unknown := envelope(t, tg.as(t, secondKey, "POST", "/v1/responses", `{"model":"fake-agent","input":"go on","previous_response_id":"resp_doesnotexist"}`), 400, "previous_response_not_found")
	other := envelope(t, tg.as(t, secondKey, "POST", "/v1/responses", `{"model":"fake-agent","input":"go on","previous_response_id":"`+id+`"}`), 400, "previous_response_not_found")
	if strings.ReplaceAll(other["message"].(string), id, "X") != strings.ReplaceAll(unknown["message"].(string), "resp_doesnotexist", "X") {
		t.Fatalf("refusals differ: %v / %v", other, unknown)
	}
	// A conversation name is per principal: the second key's "plans" starts afresh.
	theirs := decode(t, tg.as(t, secondKey, "POST", "/v1/responses", `{"model":"fake-agent","input":"hi","conversation":"plans"}`))
	if theirs["previous_response_id"] != nil || theirs["id"] == id {
		t.Fatalf("second key continued the owner's conversation: %v", theirs)
	}
	mine := decode(t, tg.do(t, "POST", "/v1/responses", `{"model":"fake-agent","input":"and?","conversation":"plans"}`, nil))
	if mine["previous_response_id"] != id {
		t.Fatalf("owner's conversation moved: %v", mine)
	}
	// Still there for its owner; the admin sees it too.
	if got := decode(t, tg.do(t, "GET", "/v1/responses/"+id, "", nil)); got["id"] != id {
		t.Fatalf("get %v", got)
	}
	if got := decode(t, tg.as(t, adminKey, "GET", "/v1/responses/"+id, "")); got["id"] != id {
		t.Fatalf("admin get %v", got)
	}
}

func TestPrincipalsRuns(t *testing.T) {
	tg := principalsTarget(t)
	if err := os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	tg.fake.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}),
		openaitest.Text("kept it"),
	)
	id := startRun(t, tg, `{"input":"clean up","session_id":"run-owned"}`)
	rs := tg.events(t, id, "")
	rs.until("approval.request")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/runs/" + id, ""},
		{"GET", "/v1/runs/" + id + "/events", ""},
		{"POST", "/v1/runs/" + id + "/approval", `{"choice":"once"}`},
		{"POST", "/v1/runs/" + id + "/steer", `{"input":"also this"}`},
		{"POST", "/v1/runs/" + id + "/stop", ""},
	} {
		envelope(t, tg.as(t, secondKey, c.method, c.path, c.body), 404, "run_not_found")
	}
	// A run of the second key into the owner's session is refused before anything is queued.
	envelope(t, tg.as(t, secondKey, "POST", "/v1/runs", `{"input":"me too","session_id":"run-owned"}`), 404, "session_not_found")
	st := decode(t, tg.as(t, adminKey, "GET", "/v1/runs/"+id, ""))
	if st["status"] != "waiting_for_approval" {
		t.Fatalf("admin status %v", st)
	}
	a := decode(t, tg.do(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`, nil))
	if a["resolved"] != float64(1) {
		t.Fatalf("owner's approval %v", a)
	}
	done := rs.until("run.completed")
	if done[len(done)-1].data["output"] != "kept it" {
		t.Fatalf("run.completed %v", done[len(done)-1].data)
	}
	if _, err := os.Stat(filepath.Join(tg.cwd, "build")); err != nil {
		t.Fatalf("the command ran: %v", err)
	}
}

func dialAs(t *testing.T, tg *target, key string) *gwclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+key)
	c, err := gwclient.DialWS(ctx, "ws"+strings.TrimPrefix(tg.base, "http")+"/api/ws", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); <-c.Done() })
	return c
}

func call(t *testing.T, c *gwclient.Client, method string, params any) (map[string]any, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out map[string]any
	err := c.CallInto(ctx, method, params, &out)
	if err != nil {
		if code := gwclient.Code(err); code != 0 {
			return nil, code
		}
		t.Fatalf("%s: %v", method, err)
	}
	return out, 0
}

func listed(res map[string]any) []string {
	var ids []string
	ss, _ := res["sessions"].([]any)
	for _, s := range ss {
		m, _ := s.(map[string]any)
		if id, ok := m["id"].(string); ok {
			ids = append(ids, id)
		}
		if id, ok := m["session_key"].(string); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestPrincipalsWebSocketGateway(t *testing.T) {
	tg := principalsTarget(t)
	if err := os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	tg.fake.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}),
		openaitest.Text("kept it"),
	)
	owner := dialAs(t, tg, testKey)
	if _, code := call(t, owner, "client.capabilities", map[string]any{"server_requests": true}); code != 0 {
		t.Fatalf("capabilities: %d", code)
	}
	created, code := call(t, owner, "session.create", map[string]any{"title": "owner ws"})
	if code != 0 {
		t.Fatalf("session.create: %d", code)
	}
	rid, _ := created["session_id"].(string)
	stored, _ := created["stored_session_id"].(string)
	if _, code := call(t, owner, "prompt.submit", map[string]any{"session_id": rid, "text": "clean up"}); code != 0 {
		t.Fatalf("prompt.submit: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := owner.WaitRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reqID, _ := req.Params["request_id"].(string)
	if req.Method != "approval" || reqID == "" {
		t.Fatalf("request %s %v", req.Method, req.Params)
	}

	second := dialAs(t, tg, secondKey)
	if l, code := call(t, second, "session.list", map[string]any{}); code != 0 || slices.Contains(listed(l), stored) {
		t.Fatalf("second key's session.list: %v %d", l, code)
	}
	if l, code := call(t, second, "session.active_list", map[string]any{}); code != 0 || slices.Contains(listed(l), rid) {
		t.Fatalf("second key's session.active_list: %v %d", l, code)
	}
	_, unknownResume := call(t, second, "session.resume", map[string]any{"session_id": "no-such-session"})
	for _, id := range []string{stored, rid, "owner ws"} {
		if _, code := call(t, second, "session.resume", map[string]any{"session_id": id}); code == 0 || code != unknownResume {
			t.Fatalf("second key resumed %q: code %d, an unknown session gets %d", id, code, unknownResume)
		}
	}
	_, unknownHistory := call(t, second, "session.history", map[string]any{"session_id": "nope"})
	for _, m := range []string{"session.history", "session.activate", "session.status", "session.interrupt", "session.events.since"} {
		if _, code := call(t, second, m, map[string]any{"session_id": rid}); code == 0 || code != unknownHistory {
			t.Fatalf("second key's %s on the owner's session: code %d, unknown gets %d", m, code, unknownHistory)
		}
	}
	if _, code := call(t, second, "prompt.submit", map[string]any{"session_id": rid, "text": "me too"}); code == 0 || code != unknownHistory {
		t.Fatalf("second key's prompt.submit: code %d", code)
	}
	if res, code := call(t, second, "request.answer", map[string]any{"id": reqID, "result": map[string]any{"choice": "once"}}); code != 0 || res["status"] != "expired" {
		t.Fatalf("second key's request.answer: %v %d", res, code)
	}
	if res, code := call(t, second, "approval.respond", map[string]any{"session_id": rid, "choice": "once"}); code == 0 {
		t.Fatalf("second key's approval.respond: %v", res)
	}
	// Process-wide actions are the local owner's and the admin's.
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"cli.exec", map[string]any{"argv": []string{"sessions"}}},
		{"reload.env", map[string]any{}},
		{"reload.mcp", map[string]any{}},
	} {
		if res, code := call(t, second, c.method, c.params); code == 0 {
			t.Fatalf("second key ran %s: %v", c.method, res)
		}
	}

	// The approval is still the owner's to give.
	snap, code := call(t, owner, "session.activate", map[string]any{"session_id": rid, "omit_messages": true})
	if code != 0 {
		t.Fatalf("owner activate: %d", code)
	}
	open, _ := snap["open_requests"].([]any)
	if len(open) != 1 || open[0].(map[string]any)["id"] != reqID {
		t.Fatalf("open requests after the other key's answer: %v", snap["open_requests"])
	}

	// The admin sees and may resume it.
	admin := dialAs(t, tg, adminKey)
	if l, code := call(t, admin, "session.list", map[string]any{}); code != 0 || !slices.Contains(listed(l), stored) {
		t.Fatalf("admin session.list: %v %d", l, code)
	}
	if _, code := call(t, admin, "session.resume", map[string]any{"session_id": stored, "omit_messages": true}); code != 0 {
		t.Fatalf("admin resume: %d", code)
	}

	req.Answer(map[string]any{"choice": "deny"})
	if _, _, err := owner.WaitType(ctx, 0, rid, "message.complete"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tg.cwd, "build")); err != nil {
		t.Fatalf("the command ran: %v", err)
	}
}

func TestPrincipalsKeysCheckedAtStart(t *testing.T) {
	tg := newTarget(t, nil)
	long := "a-key-of-sixteen-or-more"
	cases := []struct {
		name string
		opts httpapi.Options
		want string
	}{
		{"short primary", httpapi.Options{APIKey: "short-primary"}, `"api_key"`},
		{"short extra by position", httpapi.Options{APIKey: testKey, ExtraKeys: []httpapi.NamedKey{{Key: long}, {Key: "zq9"}}}, `"extra_api_keys[1]"`},
		{"short extra by name", httpapi.Options{APIKey: testKey, ExtraKeys: []httpapi.NamedKey{{Name: "ci-bot", Key: "tiny-key"}}}, `"ci-bot"`},
		{"short admin", httpapi.Options{APIKey: testKey, AdminKey: "w8v-adm"}, `"admin_api_key"`},
		{"same key twice", httpapi.Options{APIKey: testKey, ExtraKeys: []httpapi.NamedKey{{Key: testKey}}}, `"extra_api_keys[0]"`},
		{"same name twice", httpapi.Options{APIKey: testKey, ExtraKeys: []httpapi.NamedKey{{Name: "ci", Key: long}, {Name: "ci", Key: long + "2"}}}, `"ci"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := httpapi.New(tg.eng, nil, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an error naming %s", err, c.want)
			}
			for _, k := range append([]httpapi.NamedKey{{Key: c.opts.APIKey}, {Key: c.opts.AdminKey}}, c.opts.ExtraKeys...) {
				if k.Key != "" && strings.Contains(err.Error(), k.Key) {
					t.Fatalf("the error shows a key: %v", err)
				}
			}
		})
	}
}

// unkeyedDerivedID is the session id a stateless chat of the local owner used to get: a plain
// hash of its content, which any principal can compute.
func unkeyedDerivedID(system, firstUser string) string {
	h := sha256.Sum256([]byte(system + "\n" + firstUser))
	return "api-" + hex.EncodeToString(h[:8])
}

// The session id of a stateless chat (no X-Hermes-Session-Id) cannot be computed from the
// conversation by another principal: if it could, the other key would learn by a 409 (or a
// 404 on chat) whether the owner ever had that conversation, and could take the id first so
// that the owner's conversation is refused.
func TestPrincipalsDerivedSessionIDsAreNotGuessable(t *testing.T) {
	tg := principalsTarget(t)
	tg.fake.Enqueue(openaitest.Text("owner answer"), openaitest.Text("second answer"), openaitest.Text("third answer"))
	chat := func(system, user string) string {
		b, _ := json.Marshal(map[string]any{"model": "fake-agent", "messages": []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": user}}})
		return string(b)
	}
	// The second key takes the id a common opening of the owner would have had.
	guess := unkeyedDerivedID("You are helpful.", "hello")
	decodeAs[sessionEnv](t, tg.as(t, secondKey, "POST", "/api/sessions", `{"id":"`+guess+`"}`), 201)
	r := tg.do(t, "POST", "/v1/chat/completions", chat("You are helpful.", "hello"), nil)
	if r.status != 200 {
		t.Fatalf("the owner's stateless chat was refused: %d %s", r.status, r.body)
	}
	// Probing for a conversation of the owner by its content finds nothing.
	sid := r.header.Get("X-Hermes-Session-Id")
	if sid == "" || sid == guess {
		t.Fatalf("derived id %q", sid)
	}
	r = tg.do(t, "POST", "/v1/chat/completions", chat("sys", "my secret plan"), nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if sid := r.header.Get("X-Hermes-Session-Id"); sid == unkeyedDerivedID("sys", "my secret plan") {
		t.Fatalf("the derived id %q is computable from the content", sid)
	}
	decodeAs[sessionEnv](t, tg.as(t, secondKey, "POST", "/api/sessions", `{"id":"`+unkeyedDerivedID("sys", "my secret plan")+`"}`), 201)
	// The same conversation resent still lands in one session for its principal.
	again := tg.do(t, "POST", "/v1/chat/completions", chat("sys", "my secret plan"), nil)
	if again.status != 200 || again.header.Get("X-Hermes-Session-Id") != r.header.Get("X-Hermes-Session-Id") {
		t.Fatalf("resent conversation: %d %s %v", again.status, again.body, again.header)
	}
}

// Asking the gateway for another principal's stored session does not load it: the session
// would stay in memory at the other key's will, and the live count of /health/detailed would
// tell that key the id exists.
func TestPrincipalsResumeDoesNotLoadAnotherPrincipalsSession(t *testing.T) {
	tg := principalsTarget(t)
	now := time.Now().UTC()
	if _, err := tg.eng.Store().CreateSession(context.Background(), store.Session{ID: "owner-cold", Title: "cold plans", Source: "cli", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	liveCount := func() any {
		h := decode(t, tg.as(t, testKey, "GET", "/health/detailed", ""))
		return h["sessions"].(map[string]any)["live"]
	}
	before := liveCount()
	second := dialAs(t, tg, secondKey)
	_, unknown := call(t, second, "session.resume", map[string]any{"session_id": "no-such-session"})
	for _, id := range []string{"owner-cold", "cold plans"} {
		if _, code := call(t, second, "session.resume", map[string]any{"session_id": id}); code == 0 || code != unknown {
			t.Fatalf("second key resumed %q: code %d, unknown gets %d", id, code, unknown)
		}
	}
	if _, live := tg.eng.Peek("owner-cold"); live {
		t.Fatal("the other key's session.resume loaded the owner's session")
	}
	if after := liveCount(); after != before {
		t.Fatalf("live sessions %v, before the other key's resume %v", after, before)
	}
	// The owner and the admin still resume it.
	for _, key := range []string{testKey, adminKey} {
		if _, code := call(t, dialAs(t, tg, key), "session.resume", map[string]any{"session_id": "owner-cold", "omit_messages": true}); code != 0 {
			t.Fatalf("resume with %s: %d", key[:5], code)
		}
	}
}

// With every turn slot taken, a run into another principal's session that has runs queued is
// refused exactly like a run into a session that does not exist (429), not let through to a
// 404 that tells the id exists and has work queued.
func TestPrincipalsRunCapDoesNotTellAnotherPrincipalsQueue(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) {
		o.ExtraKeys = []httpapi.NamedKey{{Name: "ci", Key: secondKey}}
		o.MaxConcurrent = 1
	})
	if err := os.MkdirAll(filepath.Join(tg.cwd, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	tg.fake.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_rm", Name: "terminal", Args: []string{`{"command":"rm -r build"}`}}),
		openaitest.Text("kept it"), openaitest.Text("second"),
	)
	id := startRun(t, tg, `{"input":"clean up","session_id":"run-busy"}`)
	rs := tg.events(t, id, "")
	rs.until("approval.request")
	startRun(t, tg, `{"input":"then this","session_id":"run-busy"}`) // queued behind the first
	unknown := tg.as(t, secondKey, "POST", "/v1/runs", `{"input":"x","session_id":"no-such-session"}`)
	theirs := tg.as(t, secondKey, "POST", "/v1/runs", `{"input":"x","session_id":"run-busy"}`)
	if unknown.status != 429 || theirs.status != unknown.status || string(theirs.body) != string(unknown.body) {
		t.Fatalf("another principal's busy session: %d %s; an unknown one: %d %s", theirs.status, theirs.body, unknown.status, unknown.body)
	}
	decode(t, tg.do(t, "POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`, nil))
	rs.until("run.completed")
}

// A chat or run naming another principal's stored session is refused without loading it.
func TestPrincipalsChatDoesNotLoadAnotherPrincipalsSession(t *testing.T) {
	tg := principalsTarget(t)
	now := time.Now().UTC()
	if _, err := tg.eng.Store().CreateSession(context.Background(), store.Session{ID: "owner-cold", Source: "cli", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	envelope(t, tg.do(t, "POST", "/v1/chat/completions", userChat("hi"), map[string]string{"X-Hermes-Session-Id": "owner-cold", "Authorization": "Bearer " + secondKey}), 404, "session_not_found")
	envelope(t, tg.as(t, secondKey, "POST", "/v1/runs", `{"input":"hi","session_id":"owner-cold"}`), 404, "session_not_found")
	if _, live := tg.eng.Peek("owner-cold"); live {
		t.Fatal("another principal's request loaded the owner's session")
	}
}

// /health/detailed is server-wide (every principal's live sessions and turns, browser
// controllers): an extra key gets the plain health report; the owner and the admin the detail.
func TestPrincipalsHealthDetailedIsTheOperators(t *testing.T) {
	tg := principalsTarget(t)
	plain := decode(t, tg.as(t, secondKey, "GET", "/health/detailed", ""))
	for _, k := range []string{"sessions", "turns", "active_agents", "browser_control", "pid"} {
		if _, ok := plain[k]; ok {
			t.Errorf("an extra key's /health/detailed carries %q: %v", k, plain)
		}
	}
	if plain["status"] != "ok" {
		t.Errorf("an extra key's /health/detailed: %v", plain)
	}
	for _, key := range []string{testKey, adminKey} {
		if d := decode(t, tg.as(t, key, "GET", "/health/detailed", "")); d["sessions"] == nil {
			t.Errorf("%s... gets no detail: %v", key[:5], d)
		}
	}
}
