package homestore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

func TestFrameRoundTrip(t *testing.T) {
	fw := newFrameWriter()
	in := &request{ID: 7, Op: opAppend, Session: "s", Rows: []store.Row{{Role: "tool", Content: "<b>&amp;</b>", ToolCalls: json.RawMessage(`[{"a":"<x>"}]`)}}}
	b, err := fw.frame(in)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := readFrame(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out request
	if err := json.Unmarshal(payload, &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != 7 || out.Rows[0].Content != "<b>&amp;</b>" || string(out.Rows[0].ToolCalls) != `[{"a":"<x>"}]` {
		t.Fatalf("round trip changed the request: %+v", out)
	}
	// A frame cut short is an error, not a short read.
	if _, err := readFrame(bufio.NewReader(bytes.NewReader(b[:len(b)-1])), nil); err == nil {
		t.Fatal("truncated frame read without error")
	}
	// A length beyond the limit is refused before anything is allocated.
	if _, err := readFrame(bufio.NewReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff})), nil); err == nil {
		t.Fatal("oversized frame accepted")
	}
}

func TestEventFrameRoundTrip(t *testing.T) {
	fw := newFrameWriter()
	in := &request{ID: 3, Op: opAppendEv, Session: "s", Gen: 4, Events: []store.StoredEvent{
		{Seq: 7, Type: "message.delta", Time: time.Unix(5, 6).UTC(), TurnID: "t", Text: "<b>&"},
		{Seq: 8, Type: "tool.complete", Data: json.RawMessage(`{"args":{"x":"<&>"},"n":1.50}`)},
	}}
	b, err := fw.frame(in)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := readFrame(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out request
	if err := json.Unmarshal(payload, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Events, in.Events) || out.Gen != 4 {
		t.Fatalf("round trip changed the events: %+v, want %+v", out.Events, in.Events)
	}
}

func TestErrorCodes(t *testing.T) {
	for _, c := range errorCodes {
		code, msg := encodeError(errors.Join(errors.New("context"), c.err))
		got := decodeError(code, msg)
		if !errors.Is(got, c.err) || !strings.Contains(got.Error(), c.err.Error()) {
			t.Fatalf("%s: decoded %v does not match %v", c.code, got, c.err)
		}
	}
	if got := decodeError("internal", "boom"); errors.Is(got, store.ErrNotFound) || !strings.Contains(got.Error(), "boom") {
		t.Fatalf("unknown code decoded as %v", got)
	}
}

func FuzzFrame(f *testing.F) {
	fw := newFrameWriter()
	b, _ := fw.frame(&request{ID: 1, Op: opGet, Session: "a"})
	f.Add(append([]byte(nil), b...))
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	b, _ = fw.frame(&request{ID: 2, Op: opAppendEv, Session: "a", Gen: 3, Events: []store.StoredEvent{
		{Seq: 1, Type: "message.delta", Text: "<hi>"}, {Seq: 2, Type: "tool.start", Data: json.RawMessage(`{"a":1}`)}}})
	f.Add(append([]byte(nil), b...))
	b, _ = fw.frame(&response{ID: 2, Events: []store.StoredEvent{{Seq: 9, Type: "x", Data: json.RawMessage(`[1]`)}}, Seq: 9})
	f.Add(append([]byte(nil), b...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			payload, err := readFrame(r, nil)
			if err != nil {
				return
			}
			var req request
			_ = json.Unmarshal(payload, &req)
			_ = checkText(&req)
			// An events frame decodes into events the store can judge (a refusal, never a panic),
			// and a payload that decoded is valid JSON the store keeps byte for byte.
			if err := store.CheckEvents(req.Session, 0, 0, req.Events); err == nil {
				for _, e := range req.Events {
					if len(e.Data) > 0 && !json.Valid(e.Data) {
						t.Fatalf("accepted event data %q is not JSON", e.Data)
					}
				}
			}
			var resp response
			_ = json.Unmarshal(payload, &resp)
		}
	})
}

// BenchmarkWireAppend is the encoding cost of one append call (request and response), to set
// against the round trip the remote benchmarks measure.
func BenchmarkWireAppend(b *testing.B) {
	fw := newFrameWriter()
	row := store.Row{Role: "assistant", Content: strings.Repeat("a chat message of typical length. ", 4)}
	b.ReportAllocs()
	for b.Loop() {
		req := &request{ID: 1, Op: opAppend, Session: "bench-0", Rows: []store.Row{row}}
		f, err := fw.frame(req)
		if err != nil {
			b.Fatal(err)
		}
		var in request
		if err := json.Unmarshal(f[4:], &in); err != nil {
			b.Fatal(err)
		}
		resp := &response{ID: 1, Rows: in.Rows}
		f, err = fw.frame(resp)
		if err != nil {
			b.Fatal(err)
		}
		var out response
		if err := json.Unmarshal(f[4:], &out); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSessionCodec: the binary listing form carries every field of store.Session, and the field
// list fails this test when store.Session changes, so a new field cannot be dropped silently.
func TestSessionCodec(t *testing.T) {
	var names []string
	st := reflect.TypeFor[store.Session]()
	for i := range st.NumField() {
		names = append(names, st.Field(i).Name)
	}
	slices.Sort(names)
	known := slices.Clone(sessionFields)
	slices.Sort(known)
	if !slices.Equal(names, known) {
		t.Fatalf("store.Session fields %v, the listing codec carries %v: update sessions_codec.go", names, known)
	}
	names = nil
	ut := reflect.TypeFor[store.Usage]()
	for i := range ut.NumField() {
		names = append(names, ut.Field(i).Name)
	}
	if !slices.Equal(names, usageFields) {
		t.Fatalf("store.Usage fields %v, the wide listing codec carries %v: update sessions_codec.go", names, usageFields)
	}
	in := []store.Session{
		{ID: "a", Title: "t\x00<&>", Source: "cli", Model: "m", Cwd: "/w", ParentID: "p", ParentKind: "branch", ForkRowID: 9,
			CreatedAt: time.Date(1, 1, 1, 0, 0, 1, 5, time.UTC), UpdatedAt: time.Now().UTC(), EndedAt: time.Date(2300, 1, 1, 0, 0, 0, 999, time.UTC),
			EndReason: "done", Usage: store.Usage{InputTokens: 1, OutputTokens: -2, CachedTokens: 3, CacheWriteTokens: 10, ReasoningTokens: 4, APICalls: 5, ToolCalls: 6, CostUSD: 0.0125},
			RowCount: 7, Rewinds: 8, Meta: map[string]string{"k": "v", "": ""}, Principal: "key", Version: 1 << 60},
		{ID: "b"},
	}
	for _, wide := range []bool{true, false} {
		out, err := decodeSessions(encodeSessions(nil, in, wide), wide)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(in)
		if !wide { // the form of an earlier build's store process: no cache writes, no cost
			want[0].Usage.CacheWriteTokens, want[0].Usage.CostUSD = 0, 0
		}
		if !reflect.DeepEqual(want, out) {
			t.Fatalf("round trip (wide %v):\n%+v\n%+v", wide, want, out)
		}
		enc := encodeSessions(nil, in, wide)
		for n := range len(enc) {
			if _, err := decodeSessions(enc[:n], wide); err == nil {
				t.Fatalf("listing cut at %d of %d bytes decoded (wide %v)", n, len(enc), wide)
			}
		}
	}
}

func FuzzSessionCodec(f *testing.F) {
	f.Add(encodeSessions(nil, []store.Session{{ID: "a", Meta: map[string]string{"k": "v"}, UpdatedAt: time.Now()}}, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := decodeSessions(data, true)
		if err != nil {
			return
		}
		again, err := decodeSessions(encodeSessions(nil, ss, true), true)
		if err != nil || len(again) != len(ss) {
			t.Fatalf("re-encoding a decoded listing: %d sessions, %v", len(again), err)
		}
	})
}
