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
		var line []byte
		tooLarge := false
		for {
			chunk, err := f.r.ReadSlice('\n')
			if !tooLarge {
				if len(line)+len(chunk) > f.max+1 { // +1: the newline itself
					tooLarge = true
					line = nil
				} else {
					line = append(line, chunk...)
				}
			}
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) && len(line) > 0 && !tooLarge {
				return bytes.TrimSpace(line), nil // last message without a newline
			}
			if tooLarge && errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w (limit %d bytes)", errFrameTooLarge, f.max)
			}
			return nil, err
		}
		if tooLarge {
			return nil, fmt.Errorf("%w (limit %d bytes)", errFrameTooLarge, f.max)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		return line, nil
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
