// Package ids decides which identifiers Hermes accepts from outside: session ids, run and
// response ids, request ids, idempotency and session keys, JSON-RPC ids and SSE cursors. It is
// the one rule every edge (HTTP headers and paths, gateway and ACP params, JSON-RPC ids) and
// every store applies, so an identifier that one layer accepts can never be refused, or
// silently rewritten, by another. It imports only the standard library, so the engine, the
// stores, the transports and the script modules may all use it.
package ids

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxLen bounds an identifier, in bytes.
const MaxLen = 256

// MaxRPCIDLen bounds a JSON-RPC id as it appears on the wire (quotes and escapes included).
const MaxRPCIDLen = 1024

// ErrInvalid is wrapped by every refusal, so transports map it to their invalid-params error
// with errors.Is.
var ErrInvalid = errors.New("invalid identifier")

// Error is a refused identifier: what was wrong, never the identifier itself (it may be
// unprintable, or too long to be worth echoing).
type Error struct {
	Reason string
}

func (e *Error) Error() string { return ErrInvalid.Error() + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Unwrap() error { return ErrInvalid }

// Check reports whether id may name a record. An identifier is 1..MaxLen bytes of valid UTF-8
// with no control characters (C0, DEL, C1), no '/' or '\' (they separate key segments and
// paths), and no invisible characters that make two different ids look alike in a log or a
// listing (line and paragraph separators, bidirectional overrides and isolates, zero-width
// characters, the byte order mark).
func Check(id string) error {
	if id == "" {
		return &Error{Reason: "empty"}
	}
	if len(id) > MaxLen {
		return &Error{Reason: "longer than " + strconv.Itoa(MaxLen) + " bytes"}
	}
	for i, r := range id {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(id[i:]); size <= 1 {
				return &Error{Reason: "not valid UTF-8"}
			}
		}
		switch {
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return &Error{Reason: "contains a control character"}
		case r == '/' || r == '\\':
			return &Error{Reason: `contains '/' or '\'`}
		case invisible(r):
			return &Error{Reason: "contains an invisible or direction-changing character"}
		}
	}
	return nil
}

// Valid is Check without the reason.
func Valid(id string) bool { return Check(id) == nil }

func invisible(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200f: // zero-width space, joiners, LRM, RLM
		return true
	case r >= 0x2028 && r <= 0x202e: // line/paragraph separators, bidi embeddings and overrides
		return true
	case r >= 0x2060 && r <= 0x2069: // word joiner, invisible operators, bidi isolates
		return true
	case r == 0xfeff || r == 0x061c || r == 0x180e:
		return true
	}
	return false
}

// CheckRPC reports whether raw, a JSON-RPC request id exactly as it appeared on the wire, is
// one a connection answers under: a JSON string or number of at most MaxRPCIDLen bytes whose
// bytes are valid UTF-8. (null is left to the caller: JSON-RPC allows it but discourages it.)
// The id is opaque otherwise: it never reaches the engine, and responses echo it byte for
// byte.
func CheckRPC(raw []byte) error {
	if len(raw) == 0 {
		return &Error{Reason: "empty"}
	}
	if len(raw) > MaxRPCIDLen {
		return &Error{Reason: "id longer than " + strconv.Itoa(MaxRPCIDLen) + " bytes"}
	}
	if !utf8.Valid(raw) {
		return &Error{Reason: "id is not valid UTF-8"}
	}
	switch c := raw[0]; {
	case c == '"':
		if !validJSONString(raw) {
			return &Error{Reason: "id is not a well-formed JSON string"}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if !validJSONNumber(raw) {
			return &Error{Reason: "id is not a well-formed JSON number"}
		}
	default:
		return &Error{Reason: "id must be a string or a number"}
	}
	return nil
}

// validJSONString checks one complete JSON string token (RFC 8259 §7), raw UTF-8 already
// checked.
func validJSONString(b []byte) bool {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return false
	}
	for i := 1; i < len(b)-1; i++ {
		c := b[i]
		switch {
		case c == '"' || c < 0x20:
			return false
		case c == '\\':
			i++
			if i >= len(b)-1 {
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 > len(b)-2 {
					return false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// validJSONNumber checks one complete JSON number token.
func validJSONNumber(b []byte) bool {
	i := 0
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// CheckCursor parses an event cursor (an SSE Last-Event-ID): a decimal integer, surrounding
// spaces allowed. A cursor that is not one is refused, not read as "from the start":
// replaying a whole stream to a client that asked for its tail silently duplicates everything
// it already has.
func CheckCursor(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 18 {
		return 0, &Error{Reason: "event id must be a decimal integer"}
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, &Error{Reason: "event id must be a decimal integer"}
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, &Error{Reason: "event id must be a decimal integer"}
	}
	return n, nil
}
