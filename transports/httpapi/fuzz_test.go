package httpapi

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// FuzzChatRequest feeds arbitrary bodies through the chat request decoder: it must never
// panic, and every refusal must be a 400 envelope (never a 500).
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":null}],"stream":"0","stream_options":{"include_usage":"1"}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
		`{"messages":"x"}`, `[]`, `null`, ``, `{"stream":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req chatRequest
		err := wire.DecodeJSON(body, &req)
		if err == nil {
			for i, m := range req.Messages {
				if _, err = flatten(m.Content, i); err != nil {
					break
				}
			}
		}
		if err != nil {
			var ae *wire.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Message == "" {
				t.Fatalf("%q: %v", body, err)
			}
		}
	})
}

// FuzzResponsesInput feeds arbitrary input values through the Responses/runs input parser:
// it must never panic, refusals are 400s, and an accepted input has a non-empty prompt.
func FuzzResponsesInput(f *testing.F) {
	for _, s := range []string{
		`"hi"`, `[{"role":"user","content":"hi"}]`,
		`[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]}]`,
		`[{"type":"function_call_output","call_id":"c","output":"x"},{"role":"user","content":"go"}]`,
		`[{"type":"item_reference","id":"x"}]`, `5`, `[]`, `null`, `[{"role":"developer","content":null}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, prompt, err := parseInput(raw, time.Time{})
		if err != nil {
			var ae *wire.Error
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		if strings.TrimSpace(prompt) == "" {
			t.Fatalf("%q: accepted with an empty prompt", raw)
		}
	})
}
