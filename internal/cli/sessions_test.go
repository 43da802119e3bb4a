package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
)

// sessionRow is the row of `hermes sessions` for id, read by the header's column offsets (the
// table is aligned); nil when the listing has no such row.
func sessionRow(listing, id string) map[string]string {
	lines := strings.Split(strings.TrimRight(listing, "\n"), "\n")
	header := lines[0]
	var names []string
	var at []int
	for i := 0; i < len(header); {
		if header[i] == ' ' {
			i++
			continue
		}
		j := i
		for j < len(header) && header[j] != ' ' {
			j++
		}
		names, at = append(names, header[i:j]), append(at, i)
		i = j
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, id+" ") {
			continue
		}
		row := map[string]string{}
		for k, name := range names {
			end := len(l)
			if k+1 < len(at) && at[k+1] < end {
				end = at[k+1]
			}
			if at[k] < end {
				row[name] = strings.TrimSpace(l[at[k]:end])
			}
		}
		return row
	}
	return nil
}

// `hermes sessions` is a table: one header, aligned columns, and one line a session whatever
// its title holds. Titles and models are set by API clients; a newline would forge a row and an
// escape sequence would reach the terminal.
func TestSessionsTable(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	st, err := badgerstore.Open(filepath.Join(home, "state"), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, s := range []store.Session{
		{ID: "s-plain", Title: "fix the build", Model: "openai:gpt-4o", Source: "cli"},
		{ID: "s-hostile", Title: "evil\nforged-row 1 2 3\x1b[2J\ttab\u202egpj", Model: "replay:a-very-long-model-name/with-a-path.cassette.json", Source: "api", Principal: "key-b"},
		{ID: "s-untitled", Model: "ollama:llama3.1", Source: "cli"},
	} {
		if _, err := st.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendRows(ctx, s.ID, store.Fence{}, []store.Row{{Role: "user", Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	env := []string{"HERMES_HOME=" + home}

	r := hermes(t, work, env, "sessions", "-all")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID ") {
		t.Fatalf("want a header and three rows:\n%s", r.stdout)
	}
	if strings.ContainsAny(r.stdout, "\x1b\t\r\u202e") {
		t.Fatalf("a control character reached the terminal: %q", r.stdout)
	}
	// Aligned: every column starts at the same offset on every line.
	col := strings.Index(lines[0], "MODEL")
	for _, l := range lines[1:] {
		if col <= 0 || len(l) < col || l[col-1] != ' ' || l[col] == ' ' {
			t.Fatalf("MODEL column not at offset %d:\n%s", col, r.stdout)
		}
	}
	plain, hostile, untitled := sessionRow(r.stdout, "s-plain"), sessionRow(r.stdout, "s-hostile"), sessionRow(r.stdout, "s-untitled")
	if plain["MODEL"] != "openai:gpt-4o" || plain["ROWS"] != "1" || plain["OWNER"] != "-" {
		t.Fatalf("plain row %v:\n%s", plain, r.stdout)
	}
	if hostile["OWNER"] != "key-b" || !strings.HasPrefix(hostile["TITLE"], "evil forged-row 1 2 3") {
		t.Fatalf("hostile row %v:\n%s", hostile, r.stdout)
	}
	if untitled["TITLE"] != "-" {
		t.Fatalf("untitled row %v:\n%s", untitled, r.stdout)
	}

	// Without -all: the local owner's sessions only, and no OWNER column.
	r = hermes(t, work, env, "sessions")
	if r.code != 0 || strings.Contains(r.stdout, "OWNER") || strings.Contains(r.stdout, "s-hostile") || sessionRow(r.stdout, "s-plain") == nil {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.err)
	}
}
