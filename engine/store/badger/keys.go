package badgerstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4/options"

	"github.com/hermes-go/hermes/engine/store"
)

// Key layout. Every key starts with a short namespace so that one prefix scan touches exactly one
// kind of record, and row keys end in a big-endian row id so that byte order is row-id order.
//
//	meta/format              format version (decimal)
//	meta/seq                 highest row id ever handed out (8 bytes BE)
//	s/<sid>                  session JSON
//	t/<title>                title index: value is the owning session id
//	m/<sid>/<8-byte BE id>   active row JSON
//	a/<sid>/<8-byte BE id>   archived row JSON (moved out of the transcript by a rewind)
//	l/<sid>                  lease JSON
//	kv/<key>                 caller-owned value
//	e/<sid>/<8-byte BE seq>  event JSON (the session's event log)
//
// Session ids never contain '/', so "m/<sid>/" cannot be a prefix of another session's rows.
const (
	// formatVersion is written at creation; a store written by a newer format is refused rather
	// than misread.
	formatVersion = 1

	nsSession = "s/"
	nsTitle   = "t/"
	nsActive  = "m/"
	nsArchive = "a/"
	nsLease   = "l/"
	nsKV      = "kv/"
	nsEvent   = "e/"
)

// Table options shared by Open and checkTables: the check must parse tables exactly the way
// badger will.
const (
	tableCompression = options.Snappy
	tableBlockSize   = 4 << 10
)

var (
	keyFormat = []byte("meta/format")
	keySeq    = []byte("meta/seq")
)

func nsKey(ns, name string) []byte {
	k := make([]byte, 0, len(ns)+len(name))
	return append(append(k, ns...), name...)
}

func sessionKey(id string) []byte  { return nsKey(nsSession, id) }
func titleKey(title string) []byte { return nsKey(nsTitle, title) }
func leaseKey(id string) []byte    { return nsKey(nsLease, id) }
func kvKey(key string) []byte      { return nsKey(nsKV, key) }

// rowPrefix is the prefix of one session's active (or archived) rows.
func rowPrefix(archived bool, sid string) []byte {
	ns := nsActive
	if archived {
		ns = nsArchive
	}
	k := make([]byte, 0, len(ns)+len(sid)+1+8)
	return append(append(append(k, ns...), sid...), '/')
}

func rowKey(archived bool, sid string, id uint64) []byte {
	return binary.BigEndian.AppendUint64(rowPrefix(archived, sid), id)
}

// rowIDFromKey extracts the row id from a key known to start with prefix.
func rowIDFromKey(prefix, key []byte) (uint64, error) {
	if len(key) != len(prefix)+8 {
		return 0, fmt.Errorf("%w: row key %q has %d bytes after its prefix, want 8",
			store.ErrCorrupt, key, len(key)-len(prefix))
	}
	return binary.BigEndian.Uint64(key[len(prefix):]), nil
}

// eventPrefix is the prefix of one session's event log.
func eventPrefix(sid string) []byte {
	k := make([]byte, 0, len(nsEvent)+len(sid)+1+8)
	return append(append(append(k, nsEvent...), sid...), '/')
}

func eventKey(sid string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(eventPrefix(sid), seq)
}

// encodeEvent encodes an event for the log (the key holds its seq).
func encodeEvent(e store.StoredEvent) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("%w: encode event: %v", store.ErrInvalidRecord, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeEvent decodes a stored event; the key is authoritative for its seq.
func decodeEvent(prefix, key, val []byte) (store.StoredEvent, error) {
	seq, err := rowIDFromKey(prefix, key)
	if err != nil {
		return store.StoredEvent{}, err
	}
	var e store.StoredEvent
	if err := json.Unmarshal(val, &e); err != nil {
		return store.StoredEvent{}, fmt.Errorf("%w: event %q: %v", store.ErrCorrupt, key, err)
	}
	e.Seq = seq
	return e, nil
}

func encodeUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint64(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: counter has %d bytes, want 8", store.ErrCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// parseFormat reads the stored format version.
func parseFormat(b []byte) (int, error) {
	v, err := strconv.Atoi(string(b))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%w: format version %q", store.ErrCorrupt, b)
	}
	return v, nil
}

// encodeRow encodes a row without HTML escaping: transcripts are full of '<' and '&', and
// escaping them would only bloat the store and alter ToolCalls JSON on the way through.
func encodeRow(r store.Row) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("%w: encode row: %v", store.ErrInvalidRecord, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeRow decodes a stored row. The key is authoritative for the id, the session and whether
// the row is active, so a row can never be reported under a key it does not live at.
func decodeRow(prefix, key, val []byte, sid string, archived bool) (store.Row, error) {
	id, err := rowIDFromKey(prefix, key)
	if err != nil {
		return store.Row{}, err
	}
	var r store.Row
	if err := json.Unmarshal(val, &r); err != nil {
		return store.Row{}, fmt.Errorf("%w: row %q: %v", store.ErrCorrupt, key, err)
	}
	r.ID, r.SessionID, r.Active = id, sid, !archived
	return r, nil
}

func encodeSession(s store.Session) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: encode session: %v", store.ErrInvalidRecord, err)
	}
	return b, nil
}

func decodeSession(key, val []byte) (store.Session, error) {
	var s store.Session
	if err := unmarshalSession(val, &s); err != nil {
		return store.Session{}, fmt.Errorf("%w: session %q: %v", store.ErrCorrupt, key, err)
	}
	if want := string(key[len(nsSession):]); s.ID != want {
		return store.Session{}, fmt.Errorf("%w: session record %q holds id %q", store.ErrCorrupt, key, s.ID)
	}
	return s, nil
}

// leaseRecord is the stored form of a lease. The record outlives a release so that generations
// keep growing: reusing a generation would let a fenced-off owner write again.
type leaseRecord struct {
	Owner      string    `json:"owner,omitempty"`
	Generation uint64    `json:"generation"`
	Expires    time.Time `json:"expires,omitzero"`
}

func decodeLease(key, val []byte) (leaseRecord, error) {
	var l leaseRecord
	if err := json.Unmarshal(val, &l); err != nil {
		return leaseRecord{}, fmt.Errorf("%w: lease %q: %v", store.ErrCorrupt, key, err)
	}
	return l, nil
}

func encodeLease(l leaseRecord) ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("encode lease: %w", err)
	}
	return b, nil
}

// changeOf names the change hint a write of key makes, if any.
func changeOf(key []byte) (store.Change, bool) {
	k := string(key)
	switch {
	case strings.HasPrefix(k, nsSession):
		return store.Change{SessionID: k[len(nsSession):]}, true
	case strings.HasPrefix(k, nsLease):
		return store.Change{SessionID: k[len(nsLease):]}, true
	case strings.HasPrefix(k, nsKV):
		return store.Change{Key: k[len(nsKV):]}, true
	case strings.HasPrefix(k, nsActive), strings.HasPrefix(k, nsArchive), strings.HasPrefix(k, nsEvent):
		// <ns><sid>/<8-byte id>
		if len(k) > 2+9 {
			return store.Change{SessionID: k[2 : len(k)-9]}, true
		}
	}
	return store.Change{}, false
}
