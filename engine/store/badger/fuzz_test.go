package badgerstore

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// FuzzDecodeRow feeds arbitrary stored bytes to the row decoder: it must never panic, and a row
// it accepts must survive another encode/decode unchanged.
func FuzzDecodeRow(f *testing.F) {
	good, _ := encodeRow(store.Row{ID: 7, SessionID: "s", Role: "assistant", Content: "hi <&>",
		ToolCalls: json.RawMessage(`[{"id":"c1"}]`), Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Active: true})
	f.Add(encodeUint64(7), good)
	f.Add(encodeUint64(1), []byte(`{"role":"user","content":"x","time":"2025-01-01T00:00:00Z"}`))
	f.Add([]byte{1, 2, 3}, []byte(`{`))
	f.Add(encodeUint64(0), []byte(`{"tool_calls":null,"time":"not a time"}`))
	f.Fuzz(func(t *testing.T, idBytes, val []byte) {
		prefix := rowPrefix(false, "s")
		key := append(bytes.Clone(prefix), idBytes...)
		r, err := decodeRow(prefix, key, val, "s", false)
		if err != nil {
			return
		}
		if r.SessionID != "s" || !r.Active {
			t.Fatalf("decoded row does not follow its key: %+v", r)
		}
		again, err := encodeRow(r)
		if err != nil {
			t.Fatalf("re-encoding a decoded row: %v", err)
		}
		r2, err := decodeRow(prefix, key, again, "s", false)
		if err != nil {
			t.Fatalf("decoding a re-encoded row: %v", err)
		}
		if !r.Time.Equal(r2.Time) {
			t.Fatalf("time changed: %v -> %v", r.Time, r2.Time)
		}
		r.Time, r2.Time = time.Time{}, time.Time{}
		if len(r.ToolCalls) > 0 {
			var a, b any
			_ = json.Unmarshal(r.ToolCalls, &a)
			_ = json.Unmarshal(r2.ToolCalls, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("tool calls changed: %s -> %s", r.ToolCalls, r2.ToolCalls)
			}
			r.ToolCalls, r2.ToolCalls = nil, nil
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("row changed on a round trip:\n%+v\n%+v", r, r2)
		}
	})
}

// FuzzDecodeSession: arbitrary session bytes never panic, and an accepted record always carries
// the id of the key it was read from, decoded as encoding/json decodes it.
func FuzzDecodeSession(f *testing.F) {
	good, _ := encodeSession(store.Session{ID: "a", Title: "t", Meta: map[string]string{"k": "v"}, Version: 3})
	f.Add("a", good)
	f.Add("a", []byte(`{"id":"b"}`))
	f.Add("x", []byte(`null`))
	f.Add("s1", []byte(`{"id":"s1","created_at":"2025-03-01T10:00:00+02:00","usage":{"cost_usd":1e-3},"meta":{"a":"b"},"meta":{"c":"d"}}`))
	f.Fuzz(func(t *testing.T, id string, val []byte) {
		agree(t, val)
		s, err := decodeSession(sessionKey(id), val)
		if err == nil && s.ID != id {
			t.Fatalf("session under key %q decoded with id %q", id, s.ID)
		}
	})
}

// FuzzRowKeys checks the key layout: a row key decodes back to its id, and one valid session's
// row prefix never covers another session's rows.
func FuzzRowKeys(f *testing.F) {
	f.Add("a", "ab", uint64(1))
	f.Add("s1", "s", uint64(0x2f2f2f2f2f2f2f2f)) // id bytes that spell "////////"
	f.Add("x", "x", ^uint64(0))
	f.Fuzz(func(t *testing.T, sid, other string, id uint64) {
		if validateSessionID(sid) != nil {
			return
		}
		key := rowKey(false, sid, id)
		got, err := rowIDFromKey(rowPrefix(false, sid), key)
		if err != nil || got != id {
			t.Fatalf("row key of %q/%d decodes to %d, %v", sid, id, got, err)
		}
		if validateSessionID(other) == nil && other != sid && bytes.HasPrefix(key, rowPrefix(false, other)) {
			t.Fatalf("row of session %q falls under session %q's prefix", sid, other)
		}
	})
}

// FuzzParseFormat: the format marker parser accepts exactly positive decimal integers.
func FuzzParseFormat(f *testing.F) {
	f.Add([]byte("1"))
	f.Add([]byte("999"))
	f.Add([]byte("-1"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseFormat(b)
		if err == nil && v < 1 {
			t.Fatalf("parseFormat(%q) = %d", b, v)
		}
	})
}
