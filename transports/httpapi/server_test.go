package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/engine/tool/danger"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
)

const testKey = "test-key-0123456789abcdef"

// target is a real server on 127.0.0.1 in front of an engine on a real badger directory whose
// model is the fake OpenAI server.
type target struct {
	t    *testing.T
	base string
	fake *openaitest.Server
	eng  *engine.Engine
	cwd  string
	srv  *httpapi.Server
	// shutdown stops the server once (the test's own call and the cleanup share it).
	shutdown func() error
}

func dangerCheck(cmd string) tool.Verdict {
	r := danger.Check(cmd, danger.Options{})
	v := tool.Verdict{Blocked: r.Hardline, Reason: r.Reason, Command: cmd}
	for _, m := range r.Matches {
		v.Patterns = append(v.Patterns, m.Key)
	}
	return v
}

func newTarget(t testing.TB, mut func(*httpapi.Options)) *target {
	return newTargetWith(t, nil, mut)
}

// newTargetWith uses prov as the "openai" provider instead of the fake server when not nil.
func newTargetWith(t testing.TB, prov model.Provider, mut func(*httpapi.Options)) *target {
	fake := openaitest.New(t)
	if prov == nil {
		prov = openai.New(openai.Config{BaseURL: fake.URL(), MaxRetries: -1})
	}
	st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	eng, err := engine.New(engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"openai": prov},
		DefaultModel: "openai:fake-agent",
		Tools:        tool.NewRegistry(builtin.Defaults(dangerCheck)...),
		Cwd:          cwd,
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(eng, gateway.Options{})
	opts := httpapi.Options{APIKey: testKey, Version: "test", CORSOrigins: []string{"https://ui.example"},
		Models: func() []string { return []string{"openai:fake-agent", "openai:other"} }}
	if mut != nil {
		mut(&opts)
	}
	srv, err := httpapi.New(eng, gw, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	shutdown := sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		<-served
		return err
	})
	t.Cleanup(func() {
		if err := shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		gw.Close()
		eng.Close()
		st.Close()
	})
	tg := &target{base: "http://" + ln.Addr().String(), fake: fake, eng: eng, cwd: cwd, srv: srv, shutdown: shutdown}
	if tt, ok := t.(*testing.T); ok {
		tg.t = tt
	}
	return tg
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (tg *target) do(t testing.TB, method, path, body string, hdr map[string]string) resp {
	t.Helper()
	req, err := http.NewRequest(method, tg.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

// envelope checks the four-key OpenAI error object and returns it.
func envelope(t *testing.T, r resp, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content-type %q", ct)
	}
	var env struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := env.Error[k]; !ok {
			t.Fatalf("error object lacks %q: %s", k, r.body)
		}
	}
	if msg, _ := env.Error["message"].(string); msg == "" {
		t.Fatalf("empty message: %s", r.body)
	}
	if env.Error["code"] != code {
		t.Fatalf("code %v, want %q: %s", env.Error["code"], code, r.body)
	}
	return env.Error
}

func TestErrorsAndHeaders(t *testing.T) {
	tg := newTarget(t, nil)
	chat := "/v1/chat/completions"
	t.Run("401", func(t *testing.T) {
		envelope(t, tg.do(t, "GET", "/v1/models", "", map[string]string{"Authorization": "Bearer wrong"}), 401, "invalid_api_key")
		envelope(t, tg.do(t, "GET", "/v1/models", "", map[string]string{"Authorization": ""}), 401, "invalid_api_key")
	})
	t.Run("404", func(t *testing.T) {
		e := envelope(t, tg.do(t, "GET", "/v1/nope", "", nil), 404, "not_found")
		if !strings.Contains(e["message"].(string), "/v1/nope") {
			t.Fatalf("message %v", e["message"])
		}
		envelope(t, tg.do(t, "POST", chat, `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, nil), 404, "model_not_found")
		envelope(t, tg.do(t, "GET", "/v1/models/openai:nope", "", nil), 404, "model_not_found")
	})
	t.Run("413", func(t *testing.T) {
		// Announce a body over the limit and send none: the server must refuse on the header
		// alone (a client still writing 10 MB would see the refusal as a reset instead).
		r := raw(t, tg, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testKey+
			"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(10<<20+1)+"\r\n\r\n")
		envelope(t, r, 413, "body_too_large")
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("413 without security headers: %v", r.header)
		}
	})
	t.Run("400", func(t *testing.T) {
		for _, c := range []struct{ body, code, param string }{
			{`{"model":`, "invalid_json", ""},
			{``, "invalid_json", ""},
			{`{"model":"openai:fake-agent","messages":"hi"}`, "invalid_type", "messages"},
			{`{"model":"openai:fake-agent","messages":[{"role":"user","content":"hi"}],"stream":"maybe"}`, "invalid_type", "stream"},
			{`{"model":42,"messages":[{"role":"user","content":"hi"}]}`, "invalid_type", "model"},
			{`{"model":"openai:fake-agent","messages":[]}`, "missing_messages", "messages"},
			{`{"model":"openai:fake-agent","messages":[{"role":"user","content":5}]}`, "invalid_type", "messages[0].content"},
			{`{"model":"openai:fake-agent","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "unsupported_content_type", "messages[0].content"},
			{`{"model":"openai:fake-agent","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, "no_user_message", "messages"},
			{`{"model":"openai:fake-agent","messages":[{"role":"user","content":"hi"}],"n":2}`, "unsupported_value", "n"},
		} {
			e := envelope(t, tg.do(t, "POST", chat, c.body, nil), 400, c.code)
			if c.param != "" && e["param"] != c.param {
				t.Errorf("%s: param %v, want %s", c.body, e["param"], c.param)
			}
		}
	})
	t.Run("security headers", func(t *testing.T) {
		r := tg.do(t, "GET", "/health", "", nil)
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"} {
			if r.header.Get(k) != v {
				t.Errorf("%s = %q", k, r.header.Get(k))
			}
		}
		if h := tg.do(t, "GET", "/v1/health", "", map[string]string{"Authorization": ""}); h.status != 200 || !strings.Contains(string(h.body), `"ok"`) {
			t.Errorf("/v1/health %d %s", h.status, h.body)
		}
		if !strings.HasPrefix(r.header.Get("X-Request-Id"), "req_") {
			t.Errorf("x-request-id %q", r.header.Get("X-Request-Id"))
		}
	})
	t.Run("cors", func(t *testing.T) {
		r := tg.do(t, "OPTIONS", "/v1/models", "", map[string]string{"Origin": "https://ui.example", "Authorization": "", "Access-Control-Request-Method": "GET"})
		if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "https://ui.example" || !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Authorization") {
			t.Fatalf("preflight %d %v", r.status, r.header)
		}
		r = tg.do(t, "GET", "/v1/models", "", map[string]string{"Origin": "https://ui.example"})
		if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "https://ui.example" || r.header.Get("Vary") != "Origin" {
			t.Fatalf("simple %d %v", r.status, r.header)
		}
		envelope(t, tg.do(t, "GET", "/v1/models", "", map[string]string{"Origin": "https://evil.example"}), 403, "origin_not_allowed")
		envelope(t, tg.do(t, "OPTIONS", "/v1/models", "", map[string]string{"Origin": "https://evil.example"}), 403, "origin_not_allowed")
	})
	t.Run("session header", func(t *testing.T) {
		body := `{"model":"openai:fake-agent","messages":[{"role":"user","content":"hi"}]}`
		for _, bad := range []string{"../etc", "a/b", strings.Repeat("x", 257)} {
			envelope(t, tg.do(t, "POST", chat, body, map[string]string{"X-Hermes-Session-Id": bad}), 400, "invalid_session_id")
		}
		envelope(t, tg.do(t, "POST", chat, body, map[string]string{"X-Hermes-Session-Key": strings.Repeat("k", 300)}), 400, "invalid_session_key")
		// net/http refuses to send control characters in a header, so speak HTTP by hand.
		for _, h := range []string{"X-Hermes-Session-Id: a\rb", "X-Hermes-Session-Id: a\x00b", "X-Hermes-Session-Key: a\x01b", "X-Hermes-Session-Id: a\x7fb"} {
			r := rawRequest(t, tg, h, body)
			if r.status != 400 || (!bytes.Contains(r.body, []byte("malformed_request")) && !bytes.Contains(r.body, []byte("invalid_session"))) {
				t.Errorf("%q: %d %s", h, r.status, r.body)
			}
			if bytes.Contains(r.body, []byte(testKey)) {
				t.Errorf("the error echoes the API key: %s", r.body)
			}
		}
		if n := tg.fake.Pending(); n != 0 || len(tg.fake.Requests()) != 0 {
			t.Fatalf("a refused request reached the model")
		}
	})
}

// rawRequest sends a chat request with one hand-written header line.
func rawRequest(t *testing.T, tg *target, line, body string) resp {
	t.Helper()
	return raw(t, tg, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testKey+"\r\nContent-Type: application/json\r\n"+
		line+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
}

// raw writes a hand-made request and reads the response.
func raw(t *testing.T, tg *target, req string) resp {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(tg.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

func TestModelsAndCapabilities(t *testing.T) {
	tg := newTarget(t, nil)
	r := tg.do(t, "GET", "/v1/models", "", nil)
	var list struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 || list.Object != "list" {
		t.Fatalf("%d %s %v", r.status, r.body, err)
	}
	if len(list.Data) != 3 || list.Data[0]["id"] != "hermes-agent" || list.Data[1]["id"] != "openai:fake-agent" || list.Data[2]["id"] != "openai:other" || list.Data[1]["object"] != "model" || list.Data[1]["owned_by"] != "openai" {
		t.Fatalf("models %s", r.body)
	}
	if _, ok := list.Data[0]["created"].(float64); !ok {
		t.Fatalf("created %s", r.body)
	}
	r = tg.do(t, "GET", "/v1/models/openai:other", "", nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"id":"openai:other"`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = tg.do(t, "GET", "/v1/capabilities", "", nil)
	var caps struct {
		Features  map[string]any            `json:"features"`
		Endpoints map[string]map[string]any `json:"endpoints"`
	}
	if err := json.Unmarshal(r.body, &caps); err != nil {
		t.Fatal(err)
	}
	if caps.Features["chat_completions_streaming"] != true || caps.Features["responses_api"] != true || caps.Features["run_unknown_resolution"] != true || caps.Features["session_continuity_header"] != "X-Hermes-Session-Id" {
		t.Fatalf("features %s", r.body)
	}
	// Every advertised endpoint answers (not 404).
	for name, ep := range caps.Endpoints {
		if ep["method"] != "GET" || name == "websocket" || strings.Contains(ep["path"].(string), "{") {
			continue
		}
		if r := tg.do(t, "GET", ep["path"].(string), "", nil); r.status != 200 {
			t.Errorf("%s %v: %d", name, ep, r.status)
		}
	}
}
