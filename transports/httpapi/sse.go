package httpapi

import (
	"bufio"
	"encoding/json"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// streamSSE answers c with an event stream that write fills once the handler has returned;
// the server waits for it when it stops and counts it as an open stream meanwhile.
func (s *Server) streamSSE(c *fiber.Ctx, write func(sse *sseWriter)) error {
	wire.SSEHeaders(c)
	gone := peerClosedFunc(c.Context().Conn())
	s.reqs.Add(1)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.reqs.Done()
		defer s.streaming()()
		write(&sseWriter{Frames: wire.Frames{W: w}, gone: gone})
	})
	return nil
}

// sseWriter frames server-sent events with "\n" line endings, one data line per event (JSON
// never contains a raw newline). Writes are buffered; Flush reports a gone client.
type sseWriter struct {
	wire.Frames
	// gone reports whether the client closed the connection, seen without writing (nil when
	// that cannot be seen). Writes after the client closed it still succeed for a while (into
	// fasthttp's pipe, then the socket's buffer): a flush fails only two or three writes later.
	gone func() bool
}

func (s *sseWriter) data(b []byte) { s.Put([]byte("data: "), b, []byte("\n\n")) }

// event writes a named event; chat streams use it only for hermes.* extensions.
func (s *sseWriter) event(name string, v any) {
	b, _ := json.Marshal(v)
	s.Put([]byte("event: "+name+"\ndata: "), b, []byte("\n\n"))
}

func (s *sseWriter) comment(text string) { s.Put([]byte(": " + text + "\n\n")) }

// error writes the in-band error object used after the 200 was sent.
func (s *sseWriter) error(e *wire.Error) {
	b, _ := json.Marshal(wire.Body(e))
	s.data(b)
}
