package httpapi_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/dashboard"
	"github.com/hermes-go/hermes/transports/httpapi"
)

func uiTarget(t *testing.T, on bool) *target {
	return newTarget(t, func(o *httpapi.Options) {
		o.UI = on
		o.ExtraKeys = []httpapi.NamedKey{{Name: "ci", Key: secondKey}}
	})
}

func TestDashboardOff(t *testing.T) {
	tg := uiTarget(t, false)
	for _, auth := range []string{"", "Bearer " + testKey} {
		for _, p := range []string{"/ui", "/ui/", "/ui/app.js"} {
			envelope(t, tg.do(t, "GET", p, "", map[string]string{"Authorization": auth}), 404, "not_found")
		}
	}
	// Without the dashboard, the server's own origin is as foreign as any other.
	r := tg.do(t, "POST", "/api/sessions", `{}`, map[string]string{"Origin": tg.base})
	envelope(t, r, 403, "origin_not_allowed")
}

func TestDashboardFiles(t *testing.T) {
	tg := uiTarget(t, true)
	for _, c := range []struct{ path, ctype, contains string }{
		{"/ui", "text/html", `<script type="module" src="/ui/app.js">`},
		{"/ui/", "text/html", `id="login-form"`},
		{"/ui/app.js", "text/javascript", "session.resume"},
		{"/ui/api.js", "text/javascript", dashboard.KeyProtocolPrefix},
		{"/ui/charts.js", "text/javascript", "createElementNS"},
		{"/ui/style.css", "text/css", "#transcript"},
	} {
		r := tg.do(t, "GET", c.path, "", map[string]string{"Authorization": ""}) // no key: the page loads before the login
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), c.ctype) || !strings.Contains(string(r.body), c.contains) {
			t.Fatalf("GET %s: %d %q\n%.300s", c.path, r.status, r.header.Get("Content-Type"), r.body)
		}
		csp := r.header.Get("Content-Security-Policy")
		if csp != dashboard.CSP || r.header.Get("X-Frame-Options") != "DENY" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s headers: %v", c.path, r.header)
		}
	}
	for _, p := range []string{"/ui/nope.js", "/ui/static/app.js", "/ui/..%2fdashboard.go", "/ui/%2e%2e/dashboard.go"} {
		envelope(t, tg.do(t, "GET", p, "", map[string]string{"Authorization": ""}), 404, "not_found")
	}
	// No inline script or style anywhere: the CSP would block it.
	page := string(tg.do(t, "GET", "/ui/", "", nil).body)
	if regexp.MustCompile(`<script>|<style|\sstyle=|\son[a-z]+=`).MatchString(page) {
		t.Fatalf("inline script or style in the page:\n%s", page)
	}
	for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "connect-src 'self'", "default-src 'none'"} {
		if !strings.Contains(dashboard.CSP, want) || strings.Contains(dashboard.CSP, "unsafe") {
			t.Fatalf("CSP %q lacks %q or allows unsafe sources", dashboard.CSP, want)
		}
	}
	// The API stays authenticated, and the page's own origin is accepted (same-origin POSTs carry it).
	envelope(t, tg.do(t, "GET", "/api/sessions", "", map[string]string{"Authorization": ""}), 401, "invalid_api_key")
	if r := tg.do(t, "POST", "/api/sessions", `{}`, map[string]string{"Origin": tg.base}); r.status != 201 {
		t.Fatalf("same-origin create: %d %s", r.status, r.body)
	}
	envelope(t, tg.do(t, "POST", "/api/sessions", `{}`, map[string]string{"Origin": "http://evil.example"}), 403, "origin_not_allowed")
}

// dialWS opens /api/ws offering protos as subprotocols.
func dialWS(t *testing.T, tg *target, protos ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, Subprotocols: protos}
	h := http.Header{"Origin": {tg.base}}
	return d.Dial("ws"+strings.TrimPrefix(tg.base, "http")+"/api/ws", h)
}

func TestDashboardWebSocketKeyProtocol(t *testing.T) {
	tg := uiTarget(t, true)
	enc := func(k string) string {
		return dashboard.KeyProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(k))
	}
	c, res, err := dialWS(t, tg, dashboard.WSProtocol, enc(testKey))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if got := res.Header.Get("Sec-WebSocket-Protocol"); got != dashboard.WSProtocol {
		t.Fatalf("selected subprotocol %q, want %q (never the key)", got, dashboard.WSProtocol)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, msg, err := c.ReadMessage()
	if err != nil || !strings.Contains(string(msg), "gateway.ready") {
		t.Fatalf("first frame %s, %v", msg, err)
	}

	for _, bad := range [][]string{
		{dashboard.WSProtocol, enc("not-a-key-0123456789")},
		{dashboard.WSProtocol, dashboard.KeyProtocolPrefix + "%%%"},
		{dashboard.WSProtocol},
	} {
		c, _, err := dialWS(t, tg, bad...)
		if err != nil {
			t.Fatalf("dial %v: %v", bad, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, _, err = c.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != httpapi.CloseBadCredential {
			t.Fatalf("%v: want close %d, got %v", bad, httpapi.CloseBadCredential, err)
		}
		c.Close()
	}
}

func TestRunsList(t *testing.T) {
	tg := uiTarget(t, false) // the list is part of the API, dashboard or not
	tg.fake.Enqueue(openaitest.Text("one"), openaitest.Text("two"))
	first := startRun(t, tg, `{"input":"first"}`)
	waitRun(t, tg, testKey, first, "completed")
	second := startRun(t, tg, `{"input":"second"}`)
	waitRun(t, tg, testKey, second, "completed")

	type list struct {
		Data []struct {
			RunID      string         `json:"run_id"`
			Status     string         `json:"status"`
			Output     string         `json:"output"`
			DurationMS *int64         `json:"duration_ms"`
			Usage      map[string]any `json:"usage"`
		} `json:"data"`
		Total   int  `json:"total"`
		HasMore bool `json:"has_more"`
	}
	l := decodeAs[list](t, tg.do(t, "GET", "/v1/runs", "", nil), 200)
	if l.Total != 2 || len(l.Data) != 2 || l.Data[0].RunID != second || l.Data[1].RunID != first || l.HasMore {
		t.Fatalf("list %+v", l)
	}
	if d := l.Data[1]; d.Status != "completed" || d.Output != "one" || d.DurationMS == nil || *d.DurationMS < 0 || d.Usage["total_tokens"] == nil {
		t.Fatalf("entry %+v", d)
	}
	l = decodeAs[list](t, tg.do(t, "GET", "/v1/runs?limit=1", "", nil), 200)
	if len(l.Data) != 1 || l.Data[0].RunID != second || !l.HasMore || l.Total != 2 {
		t.Fatalf("limit=1: %+v", l)
	}
	l = decodeAs[list](t, tg.do(t, "GET", "/v1/runs?status=running,queued", "", nil), 200)
	if len(l.Data) != 0 || l.Total != 0 {
		t.Fatalf("status filter: %+v", l)
	}
	envelope(t, tg.do(t, "GET", "/v1/runs?status=done", "", nil), 400, "invalid_value")
	envelope(t, tg.do(t, "GET", "/v1/runs?limit=x", "", nil), 400, "invalid_value")
	envelope(t, tg.do(t, "GET", "/v1/runs", "", map[string]string{"Authorization": ""}), 401, "invalid_api_key")
	// Another key sees none of them.
	l = decodeAs[list](t, tg.as(t, secondKey, "GET", "/v1/runs", ""), 200)
	if len(l.Data) != 0 || l.Total != 0 {
		t.Fatalf("another key's list: %+v", l)
	}
	caps := decodeAs[map[string]any](t, tg.do(t, "GET", "/v1/capabilities", "", nil), 200)
	if ep := caps["endpoints"].(map[string]any)["runs_list"].(map[string]any); ep["method"] != "GET" || ep["path"] != "/v1/runs" {
		t.Fatalf("capabilities %v", ep)
	}
}

// waitRun polls the run until it has status want (30 s at most).
func waitRun(t *testing.T, tg *target, key, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := decodeAs[map[string]any](t, tg.as(t, key, "GET", "/v1/runs/"+id, ""), 200)
		if st["status"] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %v, want %s", id, st["status"], want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
