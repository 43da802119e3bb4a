package badgerstore

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hermes-go/hermes/engine/store"
)

// Session records stay JSON on disk (every store written so far, and any build, reads them),
// but listing 10,000 sessions spent most of its time in encoding/json's reflection. The records
// this store writes are flat objects with known keys, so unmarshalSession reads them with a
// direct scanner and falls back to encoding/json for anything it does not recognise (an escape
// in a string, an unknown or repeated key, a null, a number outside JSON's strict grammar, …).
// Whatever the scanner accepts, it decodes exactly as encoding/json would (TestSessionCodecAgrees
// and FuzzDecodeSession compare the two).
func unmarshalSession(val []byte, s *store.Session) error {
	if fast, ok := scanSession(val); ok {
		*s = fast
		return nil
	}
	*s = store.Session{}
	return json.Unmarshal(val, s)
}

// sessionScanner reads one JSON text; ok turns false at the first thing the fast path does not
// handle, and every method is then a no-op.
type sessionScanner struct {
	b  []byte
	i  int
	ok bool
}

func (p *sessionScanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte consumes c (after white space) or fails.
func (p *sessionScanner) byte(c byte) {
	p.ws()
	if !p.ok || p.i >= len(p.b) || p.b[p.i] != c {
		p.ok = false
		return
	}
	p.i++
}

// peek returns the next byte after white space, or 0 at the end.
func (p *sessionScanner) peek() byte {
	p.ws()
	if !p.ok || p.i >= len(p.b) {
		return 0
	}
	return p.b[p.i]
}

// raw returns a string's bytes without its quotes: no escapes, no control bytes, valid UTF-8.
func (p *sessionScanner) raw() []byte {
	p.byte('"')
	if !p.ok {
		return nil
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				p.ok = false
				return nil
			}
			return s
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	p.ok = false
	return nil
}

func (p *sessionScanner) str() string { return string(p.raw()) }

// number returns a token of JSON's number grammar.
func (p *sessionScanner) number() []byte {
	p.ws()
	if !p.ok {
		return nil
	}
	b, i := p.b, p.i
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		p.ok = false
		return nil
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			p.ok = false
			return nil
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			p.ok = false
			return nil
		}
	}
	tok := b[p.i:i]
	p.i = i
	return tok
}

func (p *sessionScanner) int() int64 {
	tok := p.number()
	if !p.ok {
		return 0
	}
	v, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil {
		p.ok = false
	}
	return v
}

func (p *sessionScanner) uint() uint64 {
	tok := p.number()
	if !p.ok {
		return 0
	}
	v, err := strconv.ParseUint(string(tok), 10, 64)
	if err != nil {
		p.ok = false
	}
	return v
}

func (p *sessionScanner) float() float64 {
	tok := p.number()
	if !p.ok {
		return 0
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		p.ok = false
	}
	return v
}

func (p *sessionScanner) time() time.Time {
	p.ws()
	start := p.i
	p.raw()
	var t time.Time
	if !p.ok {
		return t
	}
	// The quoted text goes to time's own JSON decoding, as encoding/json would pass it.
	if err := t.UnmarshalJSON(p.b[start:p.i]); err != nil {
		p.ok = false
	}
	return t
}

// object calls member for each key of an object. A repeated key is decoded as encoding/json
// does: the last value of a field wins, a repeated object merges into the first.
func (p *sessionScanner) object(member func(key []byte)) {
	p.byte('{')
	if p.peek() == '}' {
		p.i++
		return
	}
	for p.ok {
		key := p.raw()
		p.byte(':')
		if !p.ok {
			return
		}
		member(key)
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return
		default:
			p.ok = false
		}
	}
}

// scanSession is the fast path of unmarshalSession.
func scanSession(val []byte) (store.Session, bool) {
	p := &sessionScanner{b: val, ok: true}
	var s store.Session
	p.object(func(key []byte) {
		switch string(key) {
		case "id":
			s.ID = p.str()
		case "title":
			s.Title = p.str()
		case "source":
			s.Source = p.str()
		case "model":
			s.Model = p.str()
		case "cwd":
			s.Cwd = p.str()
		case "parent_id":
			s.ParentID = p.str()
		case "parent_kind":
			s.ParentKind = p.str()
		case "fork_row_id":
			s.ForkRowID = p.uint()
		case "created_at":
			s.CreatedAt = p.time()
		case "updated_at":
			s.UpdatedAt = p.time()
		case "ended_at":
			s.EndedAt = p.time()
		case "end_reason":
			s.EndReason = p.str()
		case "usage":
			p.object(func(key []byte) {
				u := &s.Usage
				switch string(key) {
				case "input_tokens":
					u.InputTokens = p.int()
				case "output_tokens":
					u.OutputTokens = p.int()
				case "cached_tokens":
					u.CachedTokens = p.int()
				case "cache_write_tokens":
					u.CacheWriteTokens = p.int()
				case "reasoning_tokens":
					u.ReasoningTokens = p.int()
				case "api_calls":
					u.APICalls = p.int()
				case "tool_calls":
					u.ToolCalls = p.int()
				case "cost_usd":
					u.CostUSD = p.float()
				default:
					p.ok = false
				}
			})
		case "row_count":
			s.RowCount = p.int()
		case "rewinds":
			s.Rewinds = p.int()
		case "meta":
			if s.Meta == nil {
				s.Meta = map[string]string{}
			}
			p.object(func(key []byte) { s.Meta[string(key)] = p.str() })
		case "principal":
			s.Principal = p.str()
		case "version":
			s.Version = p.uint()
		default:
			p.ok = false
		}
	})
	p.ws()
	if !p.ok || p.i != len(p.b) {
		return store.Session{}, false
	}
	return s, true
}
