package httpapi_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/hermes-go/hermes/transports/dashboard"
)

// With the dashboard on, a request is same-origin only when its Host names the server by
// address or as localhost: a DNS-rebinding page (Host and Origin both its own name) gets 403
// on the API and on the /api/ws upgrade, while the page's real origins are accepted.
func TestSameOriginNeedsAnAddressHost(t *testing.T) {
	tg := uiTarget(t, true)
	u, err := url.Parse(tg.base)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	post := func(host string) (int, string) {
		req, err := http.NewRequest("POST", tg.base+"/api/sessions", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.nip.example:" + port, "localhost.evil.example:" + port} {
		if code, body := post(host); code != 403 || !strings.Contains(body, "origin_not_allowed") {
			t.Errorf("Host and Origin %q: %d %s, want 403 origin_not_allowed", host, code, body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "app.localhost:" + port} {
		if code, body := post(host); code != 201 {
			t.Errorf("Host and Origin %q: %d %s, want 201", host, code, body)
		}
	}
	// The WebSocket upgrade goes through the same check.
	h := http.Header{"Origin": {"http://evil.example:" + port}, "Host": {"evil.example:" + port}}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, Subprotocols: []string{dashboard.WSProtocol}}
	c, res, err := d.Dial("ws"+strings.TrimPrefix(tg.base, "http")+"/api/ws?token="+testKey, h)
	if err == nil {
		c.Close()
		t.Fatal("a rebinding page opened /api/ws")
	}
	if res == nil || res.StatusCode != 403 {
		t.Fatalf("rebinding upgrade: %v %v", res, err)
	}
}
