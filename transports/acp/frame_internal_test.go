package acp

import (
	"strings"
	"testing"
)

// TestOversizedPrefix: the answer to a frame over the limit is decided from its prefix by
// top-level members only.
func TestOversizedPrefix(t *testing.T) {
	big := strings.Repeat("y", 300)
	for _, tc := range []struct {
		name, in string
		answer   bool
		id       string // "" answers with null
	}{
		{"request", `{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"x":"yyyy`, true, "12"},
		{"id after method", `{"jsonrpc":"2.0","method":"session/prompt","id":"x<1","params":{"x":"`, true, `"x<1"`},
		{"whole", `{"id":"abc","method":"m"}`, true, `"abc"`},
		{"spaced", " {\n \"id\" : -1.5e3 ,\t\"method\":\"m\",\"params\":[" + big, true, "-1.5e3"},
		{"notification", `{"method":"m","params":{"text":"`, false, ""},
		{"notification with an id in params", `{"jsonrpc":"2.0","method":"session/cancel","params":{"id":99,"sessionId":"` + big, false, ""},
		{"id in params, method unknown", `{"params":{"id":99,"sessionId":"` + big, true, ""},
		{"id in a nested string", `{"x":"\"id\":7","params":"` + big, true, ""},
		{"escaped quote before the id", `{"x":"a\"","id":8,"method":"m","params":"` + big, true, "8"},
		{"escaped backslash before the id", `{"x":"a\\","id":9,"method":"m","params":"` + big, true, "9"},
		{"id an object", `{"id":{"nested":1},"method":"m","params":"` + big, true, ""},
		{"id null", `{"id":null,"method":"m","params":"` + big, true, ""},
		{"id true", `{"id":true,"method":"m","params":"` + big, true, ""},
		{"id not UTF-8", "{\"id\":\"\xff\",\"method\":\"m\",\"params\":\"" + big, true, ""},
		{"id over long", `{"id":"` + big + `","method":"m","params":"` + big, true, `"` + big + `"`},
		{"id malformed", `{"id":"a\q","method":"m","params":"` + big, true, ""},
		{"id number cut by the prefix", `{"jsonrpc":"2.0","id":123456`, true, ""},
		{"id string cut by the prefix", `{"jsonrpc":"2.0","id":"abc`, true, ""},
		{"answer from the client", `{"jsonrpc":"2.0","id":0,"result":{"content":"` + big, false, ""},
		{"error from the client", `{"jsonrpc":"2.0","id":"hermes-1","error":{"code":1,"message":"` + big, false, ""},
		{"not an object", `[` + big, true, ""},
		{"garbage", `xyz` + big, true, ""},
		{"last id wins", `{"id":1,"id":2,"method":"m","params":"` + big, true, "2"},
	} {
		id, answer := oversized([]byte(tc.in))
		if answer != tc.answer || string(id) != tc.id {
			t.Errorf("%s: answer %v id %q, want %v %q", tc.name, answer, id, tc.answer, tc.id)
		}
	}
}
