package redact_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/redact"
)

func TestStringMasks(t *testing.T) {
	redact.Register("registered-secret-value-42")
	cases := []struct {
		in      string
		secrets []string // must be gone
		keep    []string // must survive
	}{
		{in: `Post "https://alice:hunter2pw@api.example.com/v1/chat/completions": dial tcp: refused`,
			secrets: []string{"alice", "hunter2pw"}, keep: []string{"https://***@api.example.com/v1/chat/completions", "dial tcp"}},
		{in: "https://TOKENONLYUSER@host/x", secrets: []string{"TOKENONLYUSER"}, keep: []string{"https://***@host/x"}},
		{in: "GET https://host/v1?key=AIzaabc123&model=gpt&api_key=s3cr3t&sig=zzz9&X-Amz-Signature=abcdef",
			secrets: []string{"AIzaabc123", "s3cr3t", "zzz9", "abcdef"}, keep: []string{"model=gpt", "key=***", "api_key=***", "sig=***", "X-Amz-Signature=***"}},
		{in: "wss://h/p?access_token=tok-1234&session=abc", secrets: []string{"tok-1234"}, keep: []string{"session=abc"}},
		{in: `level=WARN msg=x password="a b c" tokens=1234 client_secret=shh`, secrets: []string{"a b c", "shh"}, keep: []string{"tokens=1234"}},
		{in: `{"Authorization":"Bearer abcdefgh","model":"gpt","x-api-key":"k123456"}`,
			secrets: []string{"abcdefgh", "k123456"}, keep: []string{`"model":"gpt"`}},
		{in: "Authorization: Bearer eyJhbGciOi.payload.sig", secrets: []string{"eyJhbGciOi"}, keep: []string{"Bearer ***"}},
		{in: "key sk-proj-ABCDEFGHIJKLMNOPQRST1234 rejected", secrets: []string{"ABCDEFGHIJKLMNOPQRST1234"}, keep: []string{"rejected"}},
		{in: "hermes key hk-0123456789abcdef0123456789abcdef0123", secrets: []string{"0123456789abcdef0123456789abcdef"}},
		{in: "AWS AKIAABCDEFGHIJKLMNOP in use", secrets: []string{"AKIAABCDEFGHIJKLMNOP"}},
		{in: "echo registered-secret-value-42 and " + url.QueryEscape("registered-secret-value-42"), secrets: []string{"registered-secret-value-42"}},
		{in: "nothing to see: tokens used 42, port=8080", keep: []string{"nothing to see: tokens used 42, port=8080"}},
	}
	for _, c := range cases {
		got := redact.String(c.in)
		for _, s := range c.secrets {
			if strings.Contains(got, s) {
				t.Errorf("String(%q) = %q: still holds %q", c.in, got, s)
			}
		}
		for _, k := range c.keep {
			if !strings.Contains(got, k) {
				t.Errorf("String(%q) = %q: lost %q", c.in, got, k)
			}
		}
		if len(c.secrets) == 0 && got != c.in {
			t.Errorf("String(%q) = %q: want it unchanged", c.in, got)
		}
	}
}

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "X-Api-Key": true, "apiKey": true, "api_key": true, "key": true,
		"access_token": true, "X-Amz-Signature": true, "sig": true, "client_secret": true,
		"password": true, "Cookie": true, "OPENAI_API_KEY": true, "HTTP-Referer": false,
		"model": false, "tokens": false, "session": false, "signal": false, "keyboard": false,
		"X-Title": false, "prompt_tokens": false,
	} {
		if got := redact.SecretName(name); got != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSecretAndValues(t *testing.T) {
	if redact.Secret("") != "" || redact.Secret("x") != redact.Mask {
		t.Fatal("Secret: empty must stay empty, anything else must be the mask")
	}
	got := redact.Values(map[string]string{"HTTP-Referer": "https://me.example", "X-Custom": "v"})
	for k, v := range got {
		if v != redact.Mask {
			t.Errorf("Values: %s = %q", k, v)
		}
	}
	if redact.Values(nil) != nil {
		t.Error("Values(nil) must be nil")
	}
}

func TestHandlerMasksLogLines(t *testing.T) {
	redact.Register("sk-live-provider-key-0042")
	var buf bytes.Buffer
	log := redact.NewLogger(slog.NewTextHandler(&buf, nil))
	log.With("api_key", "plain-value-1").WithGroup("g").Warn("calling https://u:p4ss@host/x?token=t0k",
		"err", errors.New("401 for key sk-live-provider-key-0042"),
		"headers", map[string]string{"Authorization": "Bearer abcdefghij", "X-Api-Key": "xkey-value-9", "X-Title": "Hermes"},
		"response", http.Header{"Set-Cookie": {"sid=cookie-value-8"}},
		"password", "hunter2", "tokens", 12, "session", "s-1",
		slog.Group("inner", "secret", "deep-value"))
	out := buf.String()
	for _, s := range []string{"plain-value-1", "p4ss", "t0k", "sk-live-provider-key-0042", "abcdefghij", "hunter2", "deep-value", "xkey-value-9", "cookie-value-8"} {
		if strings.Contains(out, s) {
			t.Errorf("log line holds %q: %s", s, out)
		}
	}
	for _, k := range []string{"g.tokens=12", "g.session=s-1", "api_key=***", "X-Title:Hermes"} {
		if !strings.Contains(out, k) {
			t.Errorf("log line lost %q: %s", k, out)
		}
	}
}

// FuzzString: String never panics, and a registered secret never survives, whatever surrounds
// it.
func FuzzString(f *testing.F) {
	f.Add("https://user:pass@host/p?key=v", "0123456789secret")
	f.Add(`{"token":"x"}`, "abcdefgh***ijk")
	f.Add("a=b&c=d", "********")
	f.Add("Bearer ", "sk-aaaaaaaaaaaaaaaaaaaaaaaa")
	f.Fuzz(func(t *testing.T, text, secret string) {
		r := &redact.Redactor{}
		r.Register(secret)
		got := r.String(text + secret + text)
		if len(secret) >= 8 && strings.Contains(got, secret) {
			t.Fatalf("secret %q survives in %q", secret, got)
		}
		_ = r.String(text)
		_ = redact.SecretName(text)
	})
}
