package conformance

import (
	"bytes"
	"fmt"
	"strings"
)

// archive is a txtar archive: a comment, then named files.
type archive struct {
	Comment string
	Files   []file
}

type file struct {
	Name string
	Data []byte
}

// parseArchive reads the txtar format: "-- name --" lines start files.
func parseArchive(data []byte) archive {
	var a archive
	cur := -1
	var buf bytes.Buffer
	flush := func() {
		if cur < 0 {
			a.Comment = buf.String()
		} else {
			a.Files[cur].Data = append([]byte(nil), buf.Bytes()...)
		}
		buf.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		t := strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) > 6 {
			flush()
			a.Files = append(a.Files, file{Name: strings.TrimSpace(t[3 : len(t)-3])})
			cur = len(a.Files) - 1
			continue
		}
		buf.WriteString(line)
	}
	flush()
	return a
}

func (a archive) get(name string) ([]byte, bool) {
	for _, f := range a.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

func (a *archive) set(name string, data []byte) {
	for i, f := range a.Files {
		if f.Name == name {
			a.Files[i].Data = data
			return
		}
	}
	a.Files = append(a.Files, file{Name: name, Data: data})
}

func (a archive) format() []byte {
	var b bytes.Buffer
	b.WriteString(a.Comment)
	for _, f := range a.Files {
		fmt.Fprintf(&b, "-- %s --\n", f.Name)
		b.Write(f.Data)
		if len(f.Data) > 0 && f.Data[len(f.Data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
