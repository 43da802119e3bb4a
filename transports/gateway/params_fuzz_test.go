package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/ids"
)

// FuzzCheckIDParams: the id check never panics, and params it passes hold only *_id strings
// that are identifiers (valid UTF-8 on the wire, so decoding cannot change them).
func FuzzCheckIDParams(f *testing.F) {
	for _, s := range []string{`{"session_id":"a"}`, "{\"session_id\":\"a\xffb\"}", `{"request_id":"a/b","x":1}`, `{"session_id":5}`, `[`, `{"a_id":"\u202e"}`, "{\"SESSION_ID\":\"a\xffb\"}"} {
		f.Add("prompt.submit", []byte(s))
	}
	f.Fuzz(func(t *testing.T, method string, raw []byte) {
		if checkIDParams(method, raw) != nil || method == "session.resume" {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		for k, v := range m {
			var s string
			if !strings.HasSuffix(strings.ToLower(k), "_id") || json.Unmarshal(v, &s) != nil || s == "" {
				continue
			}
			if !utf8.Valid(v) || !ids.Valid(s) {
				t.Fatalf("passed %s = %q", k, v)
			}
		}
	})
}
