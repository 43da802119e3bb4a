package acp_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hermes-go/hermes/transports/acp"
)

// guarded runs the frame guard over in (lines of at most maxLine bytes) and returns the
// lines it passed to the SDK and the answers it wrote itself. Every answer must be valid
// JSON, UTF-8 included.
func guarded(t *testing.T, in string, maxLine int) (passed, replies []string) {
	t.Helper()
	var p, r strings.Builder
	if err := acp.Guard(strings.NewReader(in), &p, &r, maxLine); err != nil {
		t.Fatal(err)
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	replies = split(r.String())
	for _, l := range replies {
		if !utf8.ValidString(l) || !json.Valid([]byte(l)) {
			t.Fatalf("answered with invalid JSON %q", l)
		}
	}
	return split(p.String()), replies
}

// reply decodes one of the guard's answers.
func reply(t *testing.T, line string) (id string, code int, msg string) {
	t.Helper()
	var m struct {
		ID    json.RawMessage
		Error struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.Error.Code == 0 {
		t.Fatalf("not an error answer: %q", line)
	}
	return string(m.ID), m.Error.Code, m.Error.Message
}

// TestIDNotValidUTF8IsAnsweredWithNull: an id with bytes that are not UTF-8 cannot be echoed
// (the answer would not be JSON); the request is invalid and answered with id null.
func TestIDNotValidUTF8IsAnsweredWithNull(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":"` + "\xff" + `","method":"session/list","params":{}}`,
		`{"jsonrpc":"2.0","id":"a` + "\xc3" + `b","method":"session/list"}`,
		`{"jsonrpc":"2.0","id":"` + "\xff" + `"}`,
		`{"jsonrpc":"2.0","id":"` + "\xff" + `","method":"session/prompt","params":{"prompt":"` + strings.Repeat("x", 4096) + `"}}`,
	} {
		passed, replies := guarded(t, line+"\n", 1024)
		if len(passed) != 0 || len(replies) != 1 {
			t.Fatalf("%.60q: passed %q, answered %q", line, passed, replies)
		}
		if id, code, _ := reply(t, replies[0]); id != "null" || code != -32600 {
			t.Errorf("%.60q: answered %s", line, replies[0])
		}
	}
}
