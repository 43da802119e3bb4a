package homestore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// The wire: each frame is a 4-byte big-endian length followed by that many bytes of JSON (one
// request or one response). JSON was measured against the in-process store (BENCHMARKS.md): the
// socket round trip, not the encoding, dominates a call. A connection carries many calls at once;
// the id pairs a response with its request, and a watch's pushes carry the watch's id.

// maxFrame bounds one frame. An append or rewind larger than this could not be one badger
// transaction anyway (store.ErrInvalidRecord) and a listing of 10,000 sessions is a few MB.
const maxFrame = 256 << 20

// Operations.
const (
	opCreate     = "create"
	opGet        = "get"
	opUpdateCAS  = "update"
	opList       = "list"
	opAppend     = "append"
	opAppendUse  = "appendusage" // append rows and add usage in one write
	opRows       = "rows"
	opRewind     = "rewind"
	opCopy       = "copy"
	opAcquire    = "acquire"
	opRenew      = "renew"
	opRelease    = "release"
	opLeases     = "leases"
	opGetLease   = "getlease"
	opPutKV      = "put"
	opGetKV      = "getkv"
	opListKV     = "listkv"
	opDeleteKV   = "delete"
	opCASKV      = "caskv"
	opAppendEv   = "appendev"
	opEvents     = "events"
	opLastEv     = "lastev"
	opWatch      = "watch"
	opUnwatch    = "unwatch"
	opCancel     = "cancel"
	opStatus     = "status"
	opDoctor     = "doctor"
	opHello      = "hello"
	protoVersion = 1
)

// request is every call's arguments in one flat record, so a frame is encoded in one pass.
type request struct {
	ID      uint64              `json:"id"`
	Op      string              `json:"op"`
	Fence   *store.SessionFence `json:"fence,omitempty"` // the fence the caller's context carries
	Target  uint64              `json:"target,omitempty"`
	Session string              `json:"sid,omitempty"`
	Dst     string              `json:"dst,omitempty"`
	Gen     uint64              `json:"gen,omitempty"` // store.Fence of append and rewind
	RowID   uint64              `json:"row,omitempty"`
	Version uint64              `json:"ver,omitempty"`
	Owner   string              `json:"owner,omitempty"`
	TTL     time.Duration       `json:"ttl,omitempty"`
	Key     string              `json:"key,omitempty"`
	Value   []byte              `json:"val,omitempty"`
	Old     []byte              `json:"old,omitempty"`     // caskv: the expected value
	HasOld  bool                `json:"has_old,omitempty"` // caskv: Old is a value (else: absent)
	HasVal  bool                `json:"has_val,omitempty"` // caskv: Value is a value (else: delete)
	Events  []store.StoredEvent `json:"evs,omitempty"`     // appendev
	After   uint64              `json:"after,omitempty"`   // events: seqs after this one
	Limit   int                 `json:"limit,omitempty"`   // events: at most this many (0 = all)
	Rec     *store.Session      `json:"rec,omitempty"`
	Rows    []store.Row         `json:"rows,omitempty"`
	Usage   *store.Usage        `json:"usage,omitempty"` // appendusage
	Query   *store.RowQuery     `json:"q,omitempty"`
	List    *store.ListOptions  `json:"list,omitempty"`
	Wide    bool                `json:"wide,omitempty"` // list: answer in the wide listing form
	Lease   *store.Lease        `json:"lease,omitempty"`
	Watch   *store.Interest     `json:"watch,omitempty"`
	Client  *ClientInfo         `json:"client,omitempty"` // hello
	Flag    bool                `json:"flag,omitempty"`   // doctor: quarantine
}

// response answers one request, or pushes hints to a watch (Changes, Lost).
type response struct {
	ID       uint64              `json:"id"`
	Code     string              `json:"code,omitempty"` // error code; see errorCodes
	Msg      string              `json:"msg,omitempty"`
	Session  *store.Session      `json:"rec,omitempty"`
	Sessions []store.Session     `json:"list,omitempty"`
	Rows     []store.Row         `json:"rows,omitempty"`
	Rewind   *store.RewindResult `json:"rewind,omitempty"`
	N        int                 `json:"n,omitempty"`
	Lease    *store.Lease        `json:"lease,omitempty"`
	Leases   []store.Lease       `json:"leases,omitempty"`
	Value    []byte              `json:"val,omitempty"`
	Events   []store.StoredEvent `json:"evs,omitempty"`
	Seq      uint64              `json:"seq,omitempty"` // lastev
	Found    bool                `json:"found,omitempty"`
	KV       map[string][]byte   `json:"kv,omitempty"`
	Changes  []store.Change      `json:"changes,omitempty"`
	Lost     bool                `json:"lost,omitempty"`
	Status   *Status             `json:"status,omitempty"`
	Problems []store.Problem     `json:"problems,omitempty"`
	// Bin: Sessions follow in the next frame, in the binary form of sessions_codec.go.
	Bin bool `json:"bin,omitempty"`
	// Wide: that form carries every usage field (the request asked for it with Wide); a
	// store process of an earlier build sends the narrow form, without cache writes and cost.
	Wide bool `json:"wide,omitempty"`
}

// ClientInfo is what a client tells the store process about itself (shown by `hermes doctor`).
type ClientInfo struct {
	PID     int    `json:"pid"`
	Command string `json:"command,omitempty"`
}

// Status is the store process's report of itself.
type Status struct {
	PID     int           `json:"pid"`
	Started time.Time     `json:"started"`
	Dir     string        `json:"dir"`
	Clients []ClientState `json:"clients"`
	Leases  []store.Lease `json:"leases"`
}

// ClientState is one connected client.
type ClientState struct {
	ClientInfo
	UID       int       `json:"uid"` // from the socket's peer credentials
	Connected time.Time `json:"connected"`
	Calls     int64     `json:"calls"`
	Watches   int       `json:"watches"`
}

// errorCodes maps the store's sentinel errors to wire codes and back: the one place errors cross
// the socket.
var errorCodes = []struct {
	code string
	err  error
}{
	{"not_found", store.ErrNotFound},
	{"exists", store.ErrExists},
	{"conflict", store.ErrConflict},
	{"title_taken", store.ErrTitleTaken},
	{"fenced", store.ErrFenced},
	{"lease_held", store.ErrLeaseHeld},
	{"lease_lost", store.ErrLeaseLost},
	{"stale_row", store.ErrStaleRow},
	{"event_seq", store.ErrEventSeq},
	{"invalid", store.ErrInvalidRecord},
	{"corrupt", store.ErrCorrupt},
	{"newer_format", store.ErrNewerFormat},
	{"locked", store.ErrLocked},
	{"closed", store.ErrClosed},
	{"unavailable", store.ErrUnavailable},
	{"canceled", context.Canceled},
	{"deadline", context.DeadlineExceeded},
}

func encodeError(err error) (code, msg string) {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code, err.Error()
		}
	}
	return "internal", err.Error()
}

// remoteError is an error the store process returned: its message as written there, matching
// (errors.Is) the sentinel its code names.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func decodeError(code, msg string) error {
	for _, c := range errorCodes {
		if c.code == code {
			return &remoteError{msg: msg, sentinel: c.err}
		}
	}
	return &remoteError{msg: "store process: " + msg}
}

// frameWriter encodes values as frames into one buffer, so a frame leaves in one write.
type frameWriter struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newFrameWriter() *frameWriter {
	fw := &frameWriter{}
	fw.enc = json.NewEncoder(&fw.buf)
	// Transcripts are full of '<' and '&'; escaping them would also rewrite raw tool-call JSON.
	fw.enc.SetEscapeHTML(false)
	return fw
}

// frame encodes v as one frame and returns its bytes, valid until the next call.
func (fw *frameWriter) frame(v any) ([]byte, error) {
	fw.buf.Reset()
	fw.buf.Write([]byte{0, 0, 0, 0})
	if err := fw.enc.Encode(v); err != nil {
		return nil, err
	}
	b := fw.buf.Bytes()
	n := len(b) - 4 - 1 // without the encoder's newline
	if n > maxFrame {
		return nil, fmt.Errorf("%w: frame of %d bytes exceeds %d", store.ErrInvalidRecord, n, maxFrame)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	return b[:len(b)-1], nil
}

// readFrame reads one frame's payload into buf (grown as needed) and returns it.
func readFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes exceeds %d", n, maxFrame)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}
