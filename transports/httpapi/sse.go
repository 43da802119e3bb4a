package httpapi

import (
	"bufio"
	"encoding/json"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// sseWriter frames server-sent events with "\n" line endings, one data line per event (JSON
// never contains a raw newline). Writes are buffered; flush reports a gone client.
type sseWriter struct {
	w   *bufio.Writer
	err error
}

func (s *sseWriter) write(parts ...[]byte) {
	for _, p := range parts {
		if s.err == nil {
			_, s.err = s.w.Write(p)
		}
	}
}

func (s *sseWriter) data(b []byte) { s.write([]byte("data: "), b, []byte("\n\n")) }

// event writes a named event; chat streams use it only for hermes.* extensions.
func (s *sseWriter) event(name string, v any) {
	b, _ := json.Marshal(v)
	s.write([]byte("event: "+name+"\ndata: "), b, []byte("\n\n"))
}

func (s *sseWriter) comment(text string) { s.write([]byte(": " + text + "\n\n")) }

// error writes the in-band error object used after the 200 was sent.
func (s *sseWriter) error(e *wire.Error) {
	b, _ := json.Marshal(wire.Body(e))
	s.data(b)
}

func (s *sseWriter) flush() error {
	if s.err == nil {
		s.err = s.w.Flush()
	}
	return s.err
}
