package httpapi_test

import (
	"testing"

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
