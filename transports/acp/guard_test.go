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

// TestOversizedNotificationIsNotAnswered: a notification over the frame limit whose params
// hold an "id" is not answered under that id (nor at all); an oversized request is answered
// under its own, top-level id; one whose id cannot be told from its start is answered with
// null.
func TestOversizedNotificationIsNotAnswered(t *testing.T) {
	rw := initialized(t) // a 1 MiB frame limit
	big := strings.Repeat("x", 2<<20)
	rw.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"id":99,"sessionId":"` + big + `"}}`)
	rw.send(`{"jsonrpc":"2.0","method":"session/prompt","params":{"request":{"id":98},"prompt":[{"type":"text","text":"` + big + `"}]},"id":97}`)
	rw.send(`{"jsonrpc":"2.0","id":"p-1","method":"session/prompt","params":{"prompt":[{"type":"text","text":"` + big + `"}]}}`)
	if code, msg := errorOf(t, rw.response(`"p-1"`)); code != -32600 || msg != "message too large" {
		t.Errorf("oversized request: %d %q", code, msg)
	}
	rw.send(`{"jsonrpc":"2.0","id":"` + big + `","method":"session/list","params":{}}`)
	if code, _ := errorOf(t, rw.response("null")); code != -32600 {
		t.Errorf("oversized request with an id longer than the prefix: code %d", code)
	}
	rw.send(`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`)
	if m := rw.response("2"); m["result"] == nil {
		t.Fatalf("session/list: %v", m)
	}
}
