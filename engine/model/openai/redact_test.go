package openai_test

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/redact"
)

// TestErrorsDoNotEchoURLSecrets: a transport error names the endpoint without the user info
// or the key query parameter of the base URL, and an invalid base URL is quoted the same way.
func TestErrorsDoNotEchoURLSecrets(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var b backoffLog
	c := openai.New(openai.Config{BaseURL: "http://tokenuser:hunter2pw@" + addr + "/v1?key=query-secret-99", Backoff: b.hook})
	_, err = collect(c.Stream(t.Context(), userRequest("hi")))
	if !errors.Is(err, openai.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, addr) {
		t.Errorf("the error should still name the address: %s", msg)
	}
	for _, s := range []string{"tokenuser", "hunter2pw", "query-secret-99"} {
		if strings.Contains(msg, s) {
			t.Errorf("the error holds %q: %s", s, msg)
		}
	}

	c = openai.New(openai.Config{BaseURL: "ftp://tokenuser:hunter2pw@example.test/v1?key=query-secret-99"})
	_, err = collect(c.Stream(t.Context(), userRequest("hi")))
	if err == nil || !strings.Contains(err.Error(), "invalid base URL") {
		t.Fatalf("err = %v", err)
	}
	for _, s := range []string{"tokenuser", "hunter2pw", "query-secret-99"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the invalid base URL error holds %q: %s", s, err)
		}
	}
}

// TestRejectedKeyIsNotEchoed: an endpoint that quotes the key it rejected does not get it into
// the error the client reports.
func TestRejectedKeyIsNotEchoed(t *testing.T) {
	t.Parallel()
	const key = "sk-rejected-key-value-1234567890"
	redact.Register(key)
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.HTTPError(http.StatusUnauthorized, openaitest.APIError{Message: "Incorrect API key provided: " + key, Type: "invalid_request_error"}))
	c := openai.New(openai.Config{BaseURL: srv.URL(), APIKey: key, MaxRetries: -1})
	_, err := collect(c.Stream(t.Context(), userRequest("hi")))
	var me *model.Error
	if !errors.As(err, &me) || me.Status != http.StatusUnauthorized {
		t.Fatalf("err = %v, want a 401 model.Error", err)
	}
	if strings.Contains(err.Error(), key) || !strings.Contains(me.Message, "Incorrect API key provided") {
		t.Errorf("error message %q", me.Message)
	}
}
