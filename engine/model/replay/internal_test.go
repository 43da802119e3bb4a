package replay

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestCompleteUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"h\xc3", 1},             // first byte of é
		{"h\xc3\xa9", 3},         // whole é
		{"\xf0\x9f\x8c", 0},      // three bytes of a four-byte emoji
		{"a\xf0\x9f\x8c\x8d", 5}, // whole emoji
		{"a\xff", 2},             // invalid byte: nothing will complete it
		{"a\x80\x80\x80\x80", 5}, // stray continuation bytes
	}
	for _, tt := range tests {
		if got := completeUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("completeUTF8(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"provider":"openai","interactions":[{"match":"x","request":{"a":[1,2]},"response":{"status":200,"headers":{"content-type":"text/event-stream"},"body":["data: [DONE]\n\n",{"base64":"/w=="}],"error":"unexpected EOF"}}]}`))
	f.Add([]byte(`{"version":1,"provider":"openai","interactions":[]}`))
	f.Add([]byte(`{"version":1,"provider":"openai","interactions":[{"response":{"status":429,"body":["{\"error\":{}}"]}}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		// Whatever parses must save to a file that parses back to the same cassette.
		out, err := c.layout()
		if err != nil {
			t.Fatalf("layout of a parsed cassette: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("layout is not JSON:\n%s", out)
		}
		c2, err := Parse(out, "fuzz")
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		out2, err := c2.layout()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("layout not stable (%v):\n%s\n%s", err, out, out2)
		}
		for i := range c.Interactions {
			a, b := c.Interactions[i].Response.body(), c2.Interactions[i].Response.body()
			if !bytes.Equal(a, b) {
				t.Fatalf("body bytes changed: %q -> %q", a, b)
			}
		}
	})
}
