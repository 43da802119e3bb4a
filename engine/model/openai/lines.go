package openai

import (
	"bufio"
	"bytes"
	"fmt"
)

var errLineTooLong = fmt.Errorf("line exceeds %d bytes", MaxEventBytes)

// lineReader splits an SSE body into lines ending in LF, CRLF or a bare CR, as the SSE spec
// allows (some servers do send bare CR, and an LF-only splitter silently sees no events then).
// bufio.Scanner is not used because its token limit fails with an opaque error and it cannot
// hand back the bytes of a line that spans buffer refills without copying them anyway.
type lineReader struct {
	r *bufio.Reader
	// long collects a line that does not fit in r's buffer; reused between lines.
	long []byte
	// skipLF is set after a line ended in CR: an LF right after it belongs to that ending.
	skipLF bool
}

// next returns the next line without its ending. The slice is valid until the next call. A
// final line not followed by a line ending is returned together with the read error, which is
// io.EOF at a clean end.
func (l *lineReader) next() ([]byte, error) {
	l.long = l.long[:0]
	for {
		if l.r.Buffered() == 0 {
			if _, err := l.r.Peek(1); err != nil {
				return l.long, err
			}
		}
		buf, _ := l.r.Peek(l.r.Buffered())
		if l.skipLF {
			l.skipLF = false
			if buf[0] == '\n' {
				_, _ = l.r.Discard(1)
				continue
			}
		}
		end := bytes.IndexByte(buf, '\n')
		scan := buf
		if end >= 0 {
			scan = buf[:end]
		}
		if cr := bytes.IndexByte(scan, '\r'); cr >= 0 {
			end = cr
			l.skipLF = true
		}
		if end < 0 {
			if len(l.long)+len(buf) > MaxEventBytes {
				return nil, errLineTooLong
			}
			l.long = append(l.long, buf...)
			_, _ = l.r.Discard(len(buf))
			continue
		}
		if len(l.long)+end > MaxEventBytes {
			return nil, errLineTooLong
		}
		var line []byte
		if len(l.long) == 0 {
			// Common case: the whole line is in the buffer. Discard only advances the read
			// position, so buf stays intact until the next refill, i.e. the next call.
			line = buf[:end]
		} else {
			l.long = append(l.long, buf[:end]...)
			line = l.long
		}
		_, _ = l.r.Discard(end + 1)
		return line, nil
	}
}
