package acp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
)

func lines(b *bytes.Buffer) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	for l := range strings.SplitSeq(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestGuardInFlightCap: the guard hands the SDK at most max requests at once; the rest are
// answered with the overload error under their own ids. A response the SDK writes frees its
// slot and goes out under the client's id.
func TestGuardInFlightCap(t *testing.T) {
	inf := newInflight(4)
	var toSDK, client bytes.Buffer
	w := &lockedWriter{w: &client, ids: inf}
	var in strings.Builder
	for i := range 10 {
		in.WriteString(`{"jsonrpc":"2.0","id":"c` + strconv.Itoa(i) + `<","method":"session/prompt","params":{}}` + "\n")
	}
	if err := guard(strings.NewReader(in.String()), &toSDK, w, 1<<20, inf, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	passed := lines(&toSDK)
	if len(passed) != 4 || inf.running() != 4 {
		t.Fatalf("passed %d requests to the SDK (%d running), want 4", len(passed), inf.running())
	}
	refused := lines(&client)
	if len(refused) != 6 {
		t.Fatalf("%d refusals, want 6", len(refused))
	}
	for i, m := range refused {
		var e struct {
			Code int
			Data struct {
				RetryAfterMs int `json:"retry_after_ms"`
			}
		}
		_ = json.Unmarshal(m["error"], &e)
		if want := `"c` + strconv.Itoa(i+4) + `<"`; string(m["id"]) != want || e.Code != codeOverloaded || e.Data.RetryAfterMs <= 0 {
			t.Fatalf("refusal %d: id %s error %s", i, m["id"], m["error"])
		}
	}
	// The SDK answers the second request: the client sees its own id, byte for byte.
	client.Reset()
	resp := `{"jsonrpc":"2.0","id":` + string(passed[1]["id"]) + `,"result":{"stopReason":"end_turn"}}` + "\n"
	if _, err := w.Write([]byte(resp)); err != nil {
		t.Fatal(err)
	}
	if got, want := client.String(), `{"jsonrpc":"2.0","id":"c1<","result":{"stopReason":"end_turn"}}`+"\n"; got != want {
		t.Fatalf("client got %q, want %q", got, want)
	}
	if inf.running() != 3 {
		t.Fatalf("%d running after one answer, want 3", inf.running())
	}
	// A freed slot admits the next request.
	toSDK.Reset()
	if err := guard(strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"session/list"}`+"\n"), &toSDK, w, 1<<20, inf, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if len(lines(&toSDK)) != 1 {
		t.Fatalf("a request after a freed slot was not passed on: %q", toSDK.String())
	}
}

// TestGuardFloodBounded is the unbounded in-flight defect at the ACP edge: a pipelined flood
// of requests the agent does not finish leaves at most the cap running (the SDK starts a
// goroutine per request it is handed); everything else is refused.
func TestGuardFloodBounded(t *testing.T) {
	const flood = 20000
	inf := newInflight(DefaultMaxInFlight)
	var toSDK, client bytes.Buffer
	w := &lockedWriter{w: &client, ids: inf}
	var in strings.Builder
	for i := range flood {
		in.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}` + "\n")
	}
	if err := guard(strings.NewReader(in.String()), &toSDK, w, 1<<20, inf, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(toSDK.Bytes(), []byte("\n")); n != DefaultMaxInFlight {
		t.Fatalf("%d requests reached the SDK, want %d", n, DefaultMaxInFlight)
	}
	if n := bytes.Count(client.Bytes(), []byte(`"code":-32001`)); n != flood-DefaultMaxInFlight {
		t.Fatalf("%d overload errors, want %d", n, flood-DefaultMaxInFlight)
	}
}

// TestCancelRequestFollowsSurrogate: $/cancel_request names the client's id; the SDK knows the
// request by its surrogate.
func TestCancelRequestFollowsSurrogate(t *testing.T) {
	inf := newInflight(4)
	var toSDK, client bytes.Buffer
	w := &lockedWriter{w: &client, ids: inf}
	in := `{"jsonrpc":"2.0","id":"p<1","method":"session/prompt","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p<1"}}` + "\n"
	if err := guard(strings.NewReader(in), &toSDK, w, 1<<20, inf, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	got := lines(&toSDK)
	if len(got) != 2 {
		t.Fatalf("passed %q", toSDK.String())
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(got[1]["params"], &p)
	if string(p.RequestID) != string(got[0]["id"]) {
		t.Fatalf("cancel names %s, the request runs as %s", p.RequestID, got[0]["id"])
	}
}

// FuzzInflightRestore: restore never panics, passes any frame that is not a response to a
// surrogate through unchanged, and gives back the client's id for one that is.
func FuzzInflightRestore(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"h#1","result":{}}`), []byte(`"x<"`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"h#`), []byte(`7`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update"}`), []byte(`1`))
	f.Fuzz(func(t *testing.T, frame, id []byte) {
		inf := newInflight(0)
		tok := inf.admit(id)
		out := inf.restore(frame)
		if !bytes.HasPrefix(frame, []byte(`{"jsonrpc":"2.0","id":`+tok)) {
			if !bytes.Equal(out, frame) {
				t.Fatalf("changed %q to %q", frame, out)
			}
			return
		}
		if !bytes.HasPrefix(out, append([]byte(`{"jsonrpc":"2.0","id":`), id...)) || inf.running() != 0 {
			t.Fatalf("restore(%q) = %q, id %q", frame, out, id)
		}
	})
}
