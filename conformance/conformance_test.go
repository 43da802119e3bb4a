package conformance

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/model/replay"
)

var update = flag.Bool("update", false, "re-record the expected frames (and cassettes from model.json) from the current build")

var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "hermes-conformance-")
	if err != nil {
		panic(err)
	}
	// HERMES_CONFORMANCE_BINARY replays against another build instead of this checkout's.
	if binary = os.Getenv("HERMES_CONFORMANCE_BINARY"); binary == "" {
		binary = filepath.Join(dir, "hermes")
		build := exec.Command("go", "build", "-o", binary, "github.com/hermes-go/hermes")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			panic("build hermes: " + err.Error())
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestFixtures(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.txtar")
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	for _, p := range paths {
		f, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			recordCassette(t, f)
		}
		for _, tr := range f.Meta.Transports {
			d, ok := Drivers[tr]
			if !ok {
				t.Fatalf("%s: unknown transport %q", p, tr)
			}
			t.Run(f.Name+"/"+tr, func(t *testing.T) {
				if err := Check(context.Background(), f, d, binary, t.TempDir(), *update); err != nil {
					t.Fatalf("%s on %s: %v", f.Name, tr, err)
				}
			})
		}
	}
}

// recordCassette records cassette.json from model.json on the fake OpenAI server, so the
// scripted model is a faithful recording of the wire.
func recordCassette(t *testing.T, f *Fixture) {
	script, ok := f.arch.get("model.json")
	if !ok {
		return
	}
	var steps []struct {
		Text  []string `json:"text"`
		Calls []struct {
			Name string `json:"name"`
			Args string `json:"args"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(script, &steps); err != nil {
		t.Fatalf("%s: model.json: %v", f.Path, err)
	}
	srv := openaitest.New(t)
	var reqs []model.Request
	for i, s := range steps {
		r := openaitest.Response{Text: s.Text}
		for j, c := range s.Calls {
			n := len(c.Args) / 2
			// ids unique in the session, as a provider's are
			id := fmt.Sprintf("call_%d_%d", i+1, j+1)
			r.Calls = append(r.Calls, openaitest.Call{ID: id, Name: c.Name, Args: []string{c.Args[:n], c.Args[n:]}})
		}
		srv.Enqueue(r)
		reqs = append(reqs, model.Request{Model: "fixture", Messages: []model.Message{{Role: "user", Content: "step " + strings.Repeat("I", i+1)}}})
	}
	cas, err := replay.RecordFrom(context.Background(), srv.URL(), "", reqs)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.json")
	if err := cas.Save(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if old, ok := f.arch.get("cassette.json"); ok && sameStream(old, b) {
		return // the recording differs only in how the fake server's writes were split
	}
	f.arch.set("cassette.json", b)
}

// sameStream reports whether two cassettes hold the same requests and response bytes,
// however the bodies are split into writes.
func sameStream(a, b []byte) bool {
	flat := func(data []byte) (string, bool) {
		var c struct {
			Interactions []struct {
				Request  json.RawMessage `json:"request"`
				Response struct {
					Status int      `json:"status"`
					Body   []string `json:"body"`
				} `json:"response"`
			} `json:"interactions"`
		}
		if err := json.Unmarshal(data, &c); err != nil || len(c.Interactions) == 0 {
			return "", false
		}
		var sb strings.Builder
		for _, in := range c.Interactions {
			fmt.Fprintf(&sb, "%s|%d|%s\n", in.Request, in.Response.Status, strings.Join(in.Response.Body, ""))
		}
		return sb.String(), true
	}
	x, okA := flat(a)
	y, okB := flat(b)
	return okA && okB && x == y
}

func TestNormalizeCapturesAndRebases(t *testing.T) {
	ph := newPlaceholders()
	var a, b any
	json.Unmarshal([]byte(`{"id":1,"result":{"session_id":"ab12cd34","stored_session_id":"20261130_000000_x","info":{"cwd":"/tmp/x"}}}`), &a)
	json.Unmarshal([]byte(`{"method":"event","params":{"type":"message.start","session_id":"ab12cd34","seq":17}}`), &b)
	got := canonical(ph.normalize(a)) + "\n" + canonical(ph.normalize(b))
	want := `{"id":1,"result":{"info":{"cwd":"$cwd"},"session_id":"$session1","stored_session_id":"$stored1"}}` + "\n" +
		`{"method":"event","params":{"seq":1,"session_id":"$session1","type":"message.start"}}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	s, err := ph.substitute(`{"params":{"session_id":"$session1","truncate_before_row_id":"$row9"}}`)
	if err != nil || !strings.Contains(s, `"ab12cd34"`) || !strings.Contains(s, `"$row9"`) {
		t.Fatalf("substitute: %s %v", s, err)
	}
	if d := Diff([]string{"a", "b"}, []string{"a", "c"}); !strings.Contains(d, "frame 2") {
		t.Fatal(d)
	}
}
