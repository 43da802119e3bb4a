package ids

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	good := []string{"a", "20260101_120000_abcd1234", "api-0123abcd", "my session", "café", "日本語", "a.b", strings.Repeat("x", MaxLen)}
	for _, id := range good {
		if err := Check(id); err != nil {
			t.Errorf("Check(%q) = %v, want nil", id, err)
		}
	}
	bad := []string{"", "a\xffb", "\xc3", strings.Repeat("x", MaxLen+1), "a/b", `a\b`, "a\nb", "a\x00", "a\x7f", "a\u0085", "a\u202eb", "a\u2028", "\ufeffa", "a\u200bb", "a\u2066"}
	for _, id := range bad {
		err := Check(id)
		if err == nil {
			t.Errorf("Check(%q) = nil, want an error", id)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, does not match ErrInvalid", id, err)
		}
		if len(id) > 1 && strings.Contains(err.Error(), id) {
			t.Errorf("Check(%q) echoes the id: %v", id, err)
		}
	}
}

func TestCheckRPC(t *testing.T) {
	t.Parallel()
	good := []string{`1`, `0`, `-3`, `1.5e3`, `"a"`, `""`, `"a\"b"`, `"\u00e9"`, "\"\u00e9<>&\"", `"\ud800"`}
	for _, raw := range good {
		if err := CheckRPC([]byte(raw)); err != nil {
			t.Errorf("CheckRPC(%s) = %v, want nil", raw, err)
		}
	}
	bad := []string{``, `null`, `true`, `{}`, `[]`, "\"a\xff\"", `"a`, `01`, `1.`, `-`, `1e`, `"\x"`, `"\u12"`, "\"a\nb\"", `"` + strings.Repeat("x", MaxRPCIDLen) + `"`}
	for _, raw := range bad {
		if err := CheckRPC([]byte(raw)); err == nil {
			t.Errorf("CheckRPC(%q) = nil, want an error", raw)
		}
	}
}

func TestCheckCursor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"0": 0, "7": 7, " 42 ": 42, "007": 7} {
		got, err := CheckCursor(in)
		if err != nil || got != want {
			t.Errorf("CheckCursor(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "-1", "1.5", "1e3", "+3", "0x10", "99999999999999999999", "3 4"} {
		if _, err := CheckCursor(in); err == nil {
			t.Errorf("CheckCursor(%q) = nil error, want a refusal", in)
		}
	}
}

// FuzzCheck: an accepted id is valid UTF-8, in bounds, and survives a JSON round trip
// unchanged (the poisoned-listing defect was an id JSON could not carry).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a", "a\xff", "a/b", "é", "\u202e", strings.Repeat("y", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if Check(id) != nil {
			return
		}
		if !utf8.ValidString(id) || id == "" || len(id) > MaxLen || strings.ContainsAny(id, "/\\") {
			t.Fatalf("accepted %q", id)
		}
		b, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		var back string
		if err := json.Unmarshal(b, &back); err != nil || back != id {
			t.Fatalf("%q does not survive JSON: %q, %v", id, back, err)
		}
	})
}

// FuzzCheckRPC: whatever CheckRPC accepts, encoding/json accepts as a string or a number.
func FuzzCheckRPC(f *testing.F) {
	for _, s := range []string{`1`, `"a"`, `"\u00e9"`, `-0.5e+3`, "\"\xff\"", `"\`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if CheckRPC(raw) != nil {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil || dec.More() {
			t.Fatalf("accepted %q, which is not one JSON value: %v", raw, err)
		}
		switch v.(type) {
		case string, json.Number:
		default:
			t.Fatalf("accepted %q, a %T", raw, v)
		}
	})
}

func FuzzCheckCursor(f *testing.F) {
	for _, s := range []string{"1", " 2", "x", "-1", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := CheckCursor(s)
		if err == nil && n < 0 {
			t.Fatalf("CheckCursor(%q) = %d", s, n)
		}
	})
}
