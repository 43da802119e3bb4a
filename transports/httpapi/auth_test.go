package httpapi_test

import (
	"net"
	"testing"
	"time"

	"github.com/hermes-go/hermes/transports/httpapi"
)

// The Bearer scheme's name is case-insensitive (RFC 9110 §11.1): "bearer <key>" and "BEARER
// <key>" authenticate; another scheme, a bare key or an empty token do not.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	tg := newTarget(t, nil)
	for auth, want := range map[string]int{
		"Bearer " + testKey:     200,
		"bearer " + testKey:     200,
		"BEARER  " + testKey:    200,
		"Basic " + testKey:      401,
		testKey:                 401,
		"Bearer":                401,
		"Bearer ":               401,
		"Bearer not-" + testKey: 401,
	} {
		if r := tg.do(t, "GET", "/v1/models", "", map[string]string{"Authorization": auth}); r.status != want {
			t.Errorf("Authorization %q: %d, want %d", auth, r.status, want)
		}
	}
	for h, want := range map[string]string{"bearer k": "k", "Bearer  k ": "k", "Bearerk": "", "Token k": "", "": ""} {
		if got := httpapi.BearerToken(h); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", h, got, want)
		}
	}
}

// A Shutdown that comes before Serve got going (a SIGTERM right after start) still ends it:
// Serve returns at once instead of accepting forever.
func TestServeAfterShutdownReturns(t *testing.T) {
	tg := newTarget(t, nil)
	if err := tg.shutdown(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tg.srv.Serve(ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		ln.Close()
		t.Fatal("Serve after Shutdown kept accepting")
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after Serve returned")
	}
}
