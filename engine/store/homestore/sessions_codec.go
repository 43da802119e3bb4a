package homestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Session listings are the one large answer (hermes sessions reads every session), and JSON
// decoding dominated them: 10,000 sessions took ~90 ms to encode and decode, more than badger
// took to read them. A listing therefore travels as a JSON header frame with Bin set, followed by
// one frame in this compact binary form. sessionFields pins the fields it carries: a test fails
// when store.Session gains a field this codec does not know.
var sessionFields = []string{
	"ID", "Title", "Source", "Model", "Cwd", "ParentID", "ParentKind", "ForkRowID", "CreatedAt",
	"UpdatedAt", "EndedAt", "EndReason", "Usage", "RowCount", "Rewinds", "Meta", "Principal", "Version",
}

// usageFields pins the fields of store.Usage, in order: the narrow form carries all but
// CacheWriteTokens and CostUSD, the wide form all of them.
var usageFields = []string{
	"InputTokens", "OutputTokens", "CachedTokens", "CacheWriteTokens", "ReasoningTokens", "APICalls", "ToolCalls", "CostUSD",
}

var errShortSessions = errors.New("session listing frame ends early")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// encodeSessions appends the binary form of ss to b. The wide form adds the usage fields the
// first form lacked (cache writes and cost) after each session's other fields; the narrow one is
// what a client of an earlier build reads.
func encodeSessions(b []byte, ss []store.Session, wide bool) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for i := range ss {
		s := &ss[i]
		for _, v := range []string{s.ID, s.Title, s.Source, s.Model, s.Cwd, s.ParentID, s.ParentKind, s.EndReason, s.Principal} {
			b = appendString(b, v)
		}
		b = binary.AppendUvarint(b, s.ForkRowID)
		b = binary.AppendUvarint(b, s.Version)
		for _, v := range []int64{s.RowCount, s.Rewinds, s.Usage.InputTokens, s.Usage.OutputTokens, s.Usage.CachedTokens,
			s.Usage.ReasoningTokens, s.Usage.APICalls, s.Usage.ToolCalls} {
			b = binary.AppendVarint(b, v)
		}
		b = appendTime(b, s.CreatedAt)
		b = appendTime(b, s.UpdatedAt)
		b = appendTime(b, s.EndedAt)
		b = binary.AppendUvarint(b, uint64(len(s.Meta)))
		for k, v := range s.Meta {
			b = appendString(appendString(b, k), v)
		}
		if wide {
			b = binary.AppendVarint(b, s.Usage.CacheWriteTokens)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.Usage.CostUSD))
		}
	}
	return b
}

type sessionReader struct {
	b   []byte
	err error
}

func (r *sessionReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *sessionReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *sessionReader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *sessionReader) time() time.Time {
	if len(r.b) == 0 {
		r.fail()
		return time.Time{}
	}
	set := r.b[0]
	r.b = r.b[1:]
	if set == 0 {
		return time.Time{}
	}
	sec := r.varint()
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (r *sessionReader) fail() {
	if r.err == nil {
		r.err = errShortSessions
	}
	r.b = nil
}

// decodeSessions reads what encodeSessions wrote, in the form wide says.
func decodeSessions(b []byte, wide bool) ([]store.Session, error) {
	r := &sessionReader{b: b}
	n := r.uvarint()
	if r.err != nil {
		return nil, r.err
	}
	if n > uint64(len(b)) { // every session takes more than a byte
		return nil, fmt.Errorf("%w: %d sessions in %d bytes", errShortSessions, n, len(b))
	}
	out := make([]store.Session, n)
	for i := range out {
		s := &out[i]
		for _, p := range []*string{&s.ID, &s.Title, &s.Source, &s.Model, &s.Cwd, &s.ParentID, &s.ParentKind, &s.EndReason, &s.Principal} {
			*p = r.string()
		}
		s.ForkRowID = r.uvarint()
		s.Version = r.uvarint()
		for _, p := range []*int64{&s.RowCount, &s.Rewinds, &s.Usage.InputTokens, &s.Usage.OutputTokens, &s.Usage.CachedTokens,
			&s.Usage.ReasoningTokens, &s.Usage.APICalls, &s.Usage.ToolCalls} {
			*p = r.varint()
		}
		s.CreatedAt = r.time()
		s.UpdatedAt = r.time()
		s.EndedAt = r.time()
		if m := r.uvarint(); m > 0 && m <= uint64(len(r.b)) {
			s.Meta = make(map[string]string, m)
			for range m {
				k := r.string()
				s.Meta[k] = r.string()
			}
		} else if m > 0 {
			r.fail()
		}
		if wide {
			s.Usage.CacheWriteTokens = r.varint()
			if len(r.b) < 8 {
				r.fail()
			} else {
				s.Usage.CostUSD = math.Float64frombits(binary.LittleEndian.Uint64(r.b))
				r.b = r.b[8:]
			}
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%d bytes after the session listing", len(r.b))
	}
	return out, nil
}
