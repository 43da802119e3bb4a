package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// MaxLine is the longest SSE line a Decoder accepts.
const MaxLine = 4 << 20

// Event is one dispatched server-sent event.
type Event struct {
	Name string // the event: field; "" for unnamed (message) events
	Data string // data: lines joined with "\n"
	ID   string // the last id: seen on the stream (it carries over, as in browsers)
}

// Decoder reads server-sent events as the WHATWG algorithm does: lines end in LF, CRLF or a
// bare CR; one leading space after the colon is dropped; lines starting with ':' are
// comments; an event is dispatched at a blank line when it has data.
type Decoder struct {
	sc       *bufio.Scanner
	lastID   string
	comments int
}

// NewDecoder reads events from r.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 16<<10), MaxLine)
	sc.Split(splitLines)
	return &Decoder{sc: sc}
}

// Comments is the number of comment lines (keepalives) read so far.
func (d *Decoder) Comments() int { return d.comments }

// Next returns the next event. At the end of the stream it returns io.EOF; an event not
// terminated by a blank line before the end is dropped, as the spec requires.
func (d *Decoder) Next() (Event, error) {
	var name string
	var data strings.Builder
	hasData := false
	for d.sc.Scan() {
		line := d.sc.Bytes()
		if len(line) == 0 {
			if !hasData {
				name = "" // an event without data is not dispatched; its name is forgotten
				continue
			}
			return Event{Name: name, Data: data.String(), ID: d.lastID}, nil
		}
		if line[0] == ':' {
			d.comments++
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 { // an id with NUL is ignored
				d.lastID = string(value)
			}
		}
	}
	if err := d.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, ErrLineTooLong
		}
		return Event{}, err
	}
	return Event{}, io.EOF
}

// ErrLineTooLong is returned for a line over MaxLine.
var ErrLineTooLong = errors.New("loadgen: SSE line too long")

// splitLines splits at LF, CRLF or a lone CR. A CR at the end of the buffer waits for more
// input, since the LF of a CRLF may be in the next read.
func splitLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
