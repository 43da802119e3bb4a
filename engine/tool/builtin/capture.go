package builtin

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// capture keeps the first and the last bytes of a stream within a fixed budget and counts what
// it dropped between them. The head usually says what a command set out to do and the tail how
// it ended; the middle is what a model can most afford to lose. It is safe for concurrent use:
// a reader goroutine writes while the process tool reads.
type capture struct {
	mu      sync.Mutex
	headCap int
	head    []byte
	tail    []byte // ring of at most tailCap bytes once full
	tailCap int
	start   int // index of the oldest tail byte once the ring is full
	total   int64
}

// newCapture keeps at most limit bytes: half for the head, half for the tail.
func newCapture(limit int) *capture {
	if limit < 2 {
		limit = 2
	}
	return &capture{headCap: limit / 2, tailCap: limit - limit/2}
}

// Write never fails, so a command's output pipe is always drained.
func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.headCap - len(c.head); room > 0 {
		take := min(room, len(p))
		c.head = append(c.head, p[:take]...)
		p = p[take:]
	}
	if len(p) >= c.tailCap {
		c.tail = append(c.tail[:0], p[len(p)-c.tailCap:]...)
		c.start = 0
		return n, nil
	}
	for len(p) > 0 {
		if len(c.tail) < c.tailCap {
			take := min(c.tailCap-len(c.tail), len(p))
			c.tail = append(c.tail, p[:take]...)
			p = p[take:]
			continue
		}
		k := copy(c.tail[c.start:], p)
		p = p[k:]
		c.start = (c.start + k) % c.tailCap
	}
	return n, nil
}

// Total is the number of bytes written so far, kept or not.
func (c *capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// String renders what is kept as valid UTF-8. When bytes were dropped, a marker line says how
// many; truncated reports whether that happened.
func (c *capture) String() (s string, truncated bool) {
	c.mu.Lock()
	tail := make([]byte, 0, len(c.tail))
	tail = append(tail, c.tail[c.start:]...)
	tail = append(tail, c.tail[:c.start]...)
	head := string(c.head)
	omitted := c.total - int64(len(c.head)) - int64(len(c.tail))
	c.mu.Unlock()

	if omitted <= 0 {
		return strings.ToValidUTF8(head+string(tail), "\uFFFD"), false
	}
	// Cut at rune boundaries so the marker does not sit inside a broken character.
	h := []byte(head)
	for i := 0; i < utf8.UTFMax && len(h) > 0; i++ {
		if r, size := utf8.DecodeLastRune(h); r != utf8.RuneError || size != 1 {
			break
		}
		h = h[:len(h)-1]
		omitted++
	}
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
		omitted++
	}
	var b strings.Builder
	b.WriteString(strings.ToValidUTF8(string(h), "\uFFFD"))
	if len(h) > 0 && h[len(h)-1] != '\n' {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[... %d bytes omitted ...]\n", omitted)
	b.WriteString(strings.ToValidUTF8(string(tail), "\uFFFD"))
	return b.String(), true
}
