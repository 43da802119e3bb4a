package jsonrpc

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// readLines reads in with ReadLine until it reports an error, from a reader of the given size.
func readLines(in io.Reader, size, limit int) (got []string, overs []bool, err error) {
	r := bufio.NewReaderSize(in, size)
	for {
		line, over, err := ReadLine(r, limit)
		got, overs = append(got, string(line)), append(overs, over)
		if err != nil {
			return got, overs, err
		}
	}
}

// brokenReader yields s, then fails.
type brokenReader struct{ s string }

var errBroken = errors.New("broken")

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.s == "" {
		return 0, errBroken
	}
	n := copy(p, b.s)
	b.s = b.s[n:]
	return n, nil
}

// TestReadLine: a line is over its limit when it takes more than limit bytes of the input,
// newline included; a line over it is read to its end, so the next one is read whole, and only
// its start is kept. A last line without a newline ends with io.EOF, and a read error with what
// came before it.
func TestReadLine(t *testing.T) {
	const limit = 10
	x := strings.Repeat("x", limit)
	long := strings.Repeat("0123456789", 100) // 1,000 bytes
	for _, size := range []int{16, 64 << 10} {
		for _, tc := range []struct {
			name  string
			in    io.Reader
			lines []string
			overs []bool
			err   error
		}{
			{"at the limit", strings.NewReader(x[1:] + "\nnext\n"), []string{x[1:], "next", ""}, []bool{false, false, false}, io.EOF},
			{"one byte over", strings.NewReader(x + "\nnext\n"), []string{x, "next", ""}, []bool{true, false, false}, io.EOF},
			{"CRLF at the limit is over", strings.NewReader(x[1:] + "\r\n"), []string{x[1:] + "\r", ""}, []bool{true, false}, io.EOF},
			{"CRLF under it", strings.NewReader(x[2:] + "\r\n"), []string{x[2:] + "\r", ""}, []bool{false, false}, io.EOF},
			{"last line without a newline", strings.NewReader("a\nbc"), []string{"a", "bc"}, []bool{false, false}, io.EOF},
			{"last line at the limit without a newline", strings.NewReader(x), []string{x}, []bool{false}, io.EOF},
			{"last line over the limit without a newline", strings.NewReader(x + "x"), []string{x + "x"}, []bool{true}, io.EOF},
			{"empty lines", strings.NewReader("\n\n \n"), []string{"", "", " ", ""}, []bool{false, false, false, false}, io.EOF},
			{"nothing", strings.NewReader(""), []string{""}, []bool{false}, io.EOF},
			{"error mid-line", &brokenReader{"ok\npart"}, []string{"ok", "part"}, []bool{false, false}, errBroken},
			{"error mid-line over the limit", &brokenReader{"ok\n" + x + "xx"}, []string{"ok", x + "xx"}, []bool{false, true}, errBroken},
			{"long line", strings.NewReader(long + "\nnext"), []string{long[:keptOfOver], "next"}, []bool{true, false}, io.EOF},
		} {
			got, overs, err := readLines(tc.in, size, limit)
			if strings.Join(got, "|") != strings.Join(tc.lines, "|") || !slices.Equal(overs, tc.overs) || !errors.Is(err, tc.err) {
				t.Errorf("%s (buffer %d): lines %q over %v err %v, want %q %v %v", tc.name, size, got, overs, err, tc.lines, tc.overs, tc.err)
			}
		}
	}
}

// TestReadLineKeepsWhatItRead: of a line over the limit, ReadLine keeps what it had read
// before the read that passed the limit when that is more than keptOfOver bytes.
func TestReadLineKeepsWhatItRead(t *testing.T) {
	long := strings.Repeat("0123456789", 100)
	r := bufio.NewReaderSize(strings.NewReader(long+"\n"), 16)
	line, over, err := ReadLine(r, 500)
	if want := long[:496]; string(line) != want || !over || err != nil { // 31 reads of 16 bytes
		t.Fatalf("kept %d bytes (over %v, err %v), want %d", len(line), over, err, len(want))
	}
}
