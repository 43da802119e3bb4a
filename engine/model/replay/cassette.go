// Package replay records model provider traffic into cassettes and plays cassettes back as a
// model.Provider. A cassette is the provider wire itself: the request bodies sent and the response
// bodies exactly as they were read, so a replayed session goes through the same SSE decoder and
// error mapping as a live one and reproduces its chunks and failures. Cassettes drive demos and
// tests that must not depend on a network or an API key.
package replay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// Version is the cassette format version this package reads and writes.
const Version = 1

// ErrInvalidCassette wraps every problem found while loading a cassette.
var ErrInvalidCassette = errors.New("invalid cassette")

// Cassette is a recorded sequence of provider interactions.
type Cassette struct {
	Version      int           `json:"version"`
	Provider     string        `json:"provider"` // wire dialect: "openai" or "anthropic"
	Interactions []Interaction `json:"interactions"`
	// Name identifies the cassette in error messages; Load sets it to the file path.
	Name string `json:"-"`
}

// Interaction is one HTTP exchange.
type Interaction struct {
	// Match, when set, restricts the interaction to requests whose last user or tool message
	// contains it, so several sessions can share one cassette. Recordings leave it empty.
	Match string `json:"match,omitempty"`
	// Request is the JSON body that was sent. Replay does not compare requests against it,
	// except to recognise the retry of a failed request.
	Request  json.RawMessage `json:"request,omitempty"`
	Response *Response       `json:"response"`
}

// Response is the recorded answer to one request.
type Response struct {
	Status int `json:"status"`
	// Headers holds only the headers that change client behaviour (content type, retry
	// advice), keyed in lower case. Others are left out so that cookies, organisation ids and
	// rate-limit details never end up in a file meant to be committed.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the response body in the pieces it was read in.
	Body []Piece `json:"body"`
	// Error is the transport error that ended the body early ("unexpected EOF" for a cut
	// connection), so a replay fails the way the live stream did.
	Error string `json:"error,omitempty"`
}

// Piece is a run of body bytes. It is written as a JSON string when it is valid UTF-8, which is
// the normal case and keeps cassettes readable, and as {"base64":"…"} otherwise, because JSON
// strings cannot carry arbitrary bytes and a cassette must be faithful.
type Piece []byte

func (p Piece) MarshalJSON() ([]byte, error) {
	if utf8.Valid(p) {
		return marshalNoEscape(string(p))
	}
	return marshalNoEscape(map[string]string{"base64": base64.StdEncoding.EncodeToString(p)})
}

func (p *Piece) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = Piece(s)
		return nil
	case len(b) > 0 && b[0] == '{':
		var o struct {
			Base64 *string `json:"base64"`
		}
		if err := json.Unmarshal(b, &o); err != nil || o.Base64 == nil {
			return errors.New(`a body piece object must be {"base64":"…"}`)
		}
		raw, err := base64.StdEncoding.DecodeString(*o.Base64)
		if err != nil {
			return fmt.Errorf("body piece: bad base64: %v", err)
		}
		*p = raw
		return nil
	default:
		return fmt.Errorf(`a body piece must be a string or {"base64":"…"}, not %.20s`, b)
	}
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // bodies are full of <think> and quotes; keep them legible
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// header returns the recorded headers as an http.Header.
func (r *Response) header() http.Header {
	h := make(http.Header, len(r.Headers))
	for k, v := range r.Headers {
		h.Set(k, v)
	}
	return h
}

// body returns the whole recorded body.
func (r *Response) body() []byte {
	return bytes.Join(pieceBytes(r.Body), nil)
}

func pieceBytes(ps []Piece) [][]byte {
	out := make([][]byte, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// Load reads and validates the cassette at path.
func Load(path string) (*Cassette, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCassette, err)
	}
	return Parse(data, path)
}

// Parse decodes and validates a cassette; name identifies it in errors. Unknown fields are
// rejected so a misspelt key fails loudly instead of being ignored.
func Parse(data []byte, name string) (*Cassette, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidCassette, name, fmt.Sprintf(format, args...))
	}
	var c Cassette
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			// Offset counts the offending byte as read; point at it.
			return nil, bad("bad JSON at %s: %v", position(data, syn.Offset-1), err)
		case errors.As(err, &typ):
			return nil, bad("bad JSON at %s: %v", position(data, typ.Offset), err)
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, bad("empty or truncated file")
		default:
			return nil, bad("%v", err)
		}
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) != 0 {
		off := int64(len(data) - len(rest))
		return nil, bad("unexpected data after the cassette object at %s", position(data, off))
	}
	switch {
	case c.Version == 0:
		return nil, bad(`missing "version"`)
	case c.Version != Version:
		return nil, bad("unsupported version %d (this build reads version %d)", c.Version, Version)
	case c.Provider == "":
		return nil, bad(`missing "provider"`)
	case c.Provider != "openai" && c.Provider != "anthropic":
		return nil, bad("unsupported provider %q (want \"openai\" or \"anthropic\")", c.Provider)
	case c.Interactions == nil:
		return nil, bad(`missing "interactions"`)
	}
	for i, it := range c.Interactions {
		switch {
		case it.Response == nil:
			return nil, bad("interactions[%d]: missing \"response\"", i)
		case it.Response.Status < 100 || it.Response.Status > 599:
			return nil, bad("interactions[%d].response: status %d is not an HTTP status", i, it.Response.Status)
		}
	}
	c.Name = name
	return &c, nil
}

// position renders a byte offset as line:column for humans editing cassettes by hand.
func position(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Sprintf("line %d, column %d (offset %d)", line, col, off)
}

// Save writes the cassette to path atomically: a crash leaves the old file or the new one, never
// a torn one.
func (c *Cassette) Save(path string) error {
	out := *c
	if out.Version == 0 {
		out.Version = Version
	}
	if out.Provider == "" {
		out.Provider = "openai"
	}
	data, err := out.layout()
	if err != nil {
		return fmt.Errorf("encoding cassette: %w", err)
	}
	return writeAtomic(path, data)
}

// layout renders the file form: indented for structure, but each request body on one line as it
// was sent and each body piece on its own line, so a cassette reads like the wire and a
// re-recording diffs line by line.
func (c *Cassette) layout() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"version\": %d,\n", c.Version)
	provider, err := marshalNoEscape(c.Provider)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "  \"provider\": %s,\n  \"interactions\": [", provider)
	for i, it := range c.Interactions {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n    {")
		sep := "\n"
		if it.Match != "" {
			m, err := marshalNoEscape(it.Match)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "%s      \"match\": %s", sep, m)
			sep = ",\n"
		}
		if len(it.Request) > 0 {
			var req bytes.Buffer
			if err := json.Compact(&req, it.Request); err != nil {
				return nil, fmt.Errorf("interactions[%d].request: %w", i, err)
			}
			fmt.Fprintf(&b, "%s      \"request\": %s", sep, req.Bytes())
			sep = ",\n"
		}
		r := it.Response
		if r == nil {
			return nil, fmt.Errorf("interactions[%d]: missing response", i)
		}
		fmt.Fprintf(&b, "%s      \"response\": {\n        \"status\": %d", sep, r.Status)
		if len(r.Headers) > 0 {
			h, err := marshalNoEscape(r.Headers) // map keys come out sorted
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, ",\n        \"headers\": %s", h)
		}
		b.WriteString(",\n        \"body\": [")
		for j, p := range r.Body {
			if j > 0 {
				b.WriteByte(',')
			}
			pj, err := p.MarshalJSON()
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\n          %s", pj)
		}
		if len(r.Body) > 0 {
			b.WriteString("\n        ")
		}
		b.WriteByte(']')
		if r.Error != "" {
			e, err := marshalNoEscape(r.Error)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, ",\n        \"error\": %s", e)
		}
		b.WriteString("\n      }\n    }")
	}
	if len(c.Interactions) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("]\n}\n")
	return b.Bytes(), nil
}

func writeAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("saving cassette: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// CreateTemp makes the file private; a cassette is meant to be shared like source.
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("saving cassette: %w", err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("saving cassette: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("saving cassette: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("saving cassette: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("saving cassette: %w", err)
	}
	return nil
}
