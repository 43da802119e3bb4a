package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/transports/gateway/gwclient"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// /api/ws refuses a missing or wrong key with close code 4401 before any frame, takes the key
// as a query token or a bearer header, and a frame over the WebSocket limit ends only the
// connection that sent it.
func TestGatewayWSAuthAndHugeFrame(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	url := "ws" + strings.TrimPrefix(tg.base, "http") + "/api/ws"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, u := range []string{url + "?token=wrong", url} {
		bad, err := gwclient.DialWS(ctx, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-bad.Done()
		if gwclient.CloseCode(bad.Err()) != httpapi.CloseBadCredential || len(bad.Events()) != 0 {
			t.Fatalf("bad credential must close with 4401 before any frame: %v %v", bad.Err(), bad.Events())
		}
	}
	byQuery, err := gwclient.DialWS(ctx, url+"?token="+testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = byQuery.Close(); <-byQuery.Done() })
	if _, _, err := byQuery.WaitType(ctx, 0, "", "gateway.ready"); err != nil {
		t.Fatal(err)
	}
	c, err := gwclient.DialWS(ctx, url, http.Header{"Authorization": {"Bearer " + testKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); <-c.Done() })
	if _, _, err := c.WaitType(ctx, 0, "", "gateway.ready"); err != nil {
		t.Fatal(err)
	}
	c.Raw([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 50<<20) + `"}}`))
	<-c.Done()
	if p, code := call(t, byQuery, "ping", nil); code != 0 || p["pong"] != true {
		t.Fatalf("the gateway stopped serving others after a huge frame: %v %d", p, code)
	}
}
