package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxFrame bounds one incoming message (16 MiB).
const DefaultMaxFrame = 16 << 20

// errFrameTooLarge reports an incoming message over the limit. The framer skips the rest of it,
// so the connection stays usable; the Conn answers with an error.
var errFrameTooLarge = errors.New("frame too large")

// Framer moves whole messages. Read returns one message (without the delimiter); Write sends
// one. A Conn calls Read from one goroutine and Write from one goroutine at a time.
type Framer interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, msg []byte) error
	Close() error
}

// lineFramer is newline-delimited JSON over a byte stream (stdio, pipes, TCP).
type lineFramer struct {
	r   *bufio.Reader
	w   io.Writer
	c   io.Closer
	max int
	mu  sync.Mutex
}

// NewLineFramer frames newline-delimited messages. Blank lines are skipped; a message longer
// than max bytes is discarded up to its newline and reported as errFrameTooLarge.
func NewLineFramer(r io.Reader, w io.Writer, closer io.Closer, max int) Framer {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &lineFramer{r: bufio.NewReaderSize(r, 64<<10), w: w, c: closer, max: max}
}

func (f *lineFramer) Read(_ context.Context) ([]byte, error) {
	for {
		line, over, err := ReadLine(f.r, f.max+1) // +1: the newline
		switch {
		case over && (err == nil || errors.Is(err, io.EOF)):
			return nil, fmt.Errorf("%w (limit %d bytes)", errFrameTooLarge, f.max)
		case err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)):
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 && err == nil {
			continue // a blank line
		}
		return line, nil // err is nil, or io.EOF after a last message without a newline
	}
}

// keptOfOver is the least ReadLine keeps of a line over the limit: enough for the start of a
// message, where a request's id usually is.
const keptOfOver = 256

// ReadLine reads one line from r and returns it without its newline, in memory of its own. A
// line over limit (more than limit bytes of r, its newline included) is read to its end but not
// kept whole: over is true and line holds only its start, what had been read of it before the
// read that passed the limit or its first keptOfOver bytes if that is more. err is what ended
// the line if not a newline: io.EOF after a last line without one, or the read error that cut
// it off; line and over tell what was read before it.
func ReadLine(r *bufio.Reader, limit int) (line []byte, over bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case !over && len(line)+len(chunk) > limit:
			over = true
			fallthrough
		case over:
			line = append(line, chunk[:min(len(chunk), max(keptOfOver-len(line), 0))]...)
		default:
			line = append(line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimSuffix(line, []byte("\n")), over, err
		}
	}
}

func (f *lineFramer) Write(_ context.Context, msg []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	_, err := f.w.Write(buf)
	return err
}

// WriteBatch sends several messages with one write: a burst of events costs one syscall.
func (f *lineFramer) WriteBatch(_ context.Context, msgs [][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range msgs {
		n += len(m) + 1
	}
	buf := make([]byte, 0, n)
	for _, m := range msgs {
		buf = append(append(buf, m...), '\n')
	}
	_, err := f.w.Write(buf)
	return err
}

// batchWriter is an optional Framer ability: write several messages at once.
type batchWriter interface {
	WriteBatch(ctx context.Context, msgs [][]byte) error
}

func (f *lineFramer) Close() error {
	if f.c != nil {
		return f.c.Close()
	}
	return nil
}
