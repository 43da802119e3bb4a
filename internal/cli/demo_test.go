package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/model/replay"
)

var update = flag.Bool("update", false, "re-record scripts/demo/demo.cassette.json from the fake OpenAI server")

const demoAnswer = "Done. I wrote notes/todo.md with three tasks, listed the files, and removed build/ after you approved it."

func jsonArgs(v any) []string {
	b, _ := json.Marshal(v)
	s := string(b)
	n := len(s) / 2
	return []string{s[:n], s[n:]}
}

// TestRecordDemoCassette re-records the demo cassette (go test -run TestRecordDemoCassette
// -update .): the demo turn runs against the fake OpenAI server, which speaks the real
// streaming wire, through the recording transport.
func TestRecordDemoCassette(t *testing.T) {
	if !*update {
		t.Skip("run with -update to re-record")
	}
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.Response{Text: []string{"I'll write ", "the notes file first."}, Calls: []openaitest.Call{{Name: "write_file",
			Args: jsonArgs(map[string]string{"path": "notes/todo.md", "content": "# TODO\n\n- [ ] Write the README\n- [ ] Add tests\n- [ ] Ship it\n"})}}},
		openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: jsonArgs(map[string]string{"command": "find . -type f | sort"})}),
		openaitest.Response{Text: []string{"Now I'll remove ", "the old build directory."}, Calls: []openaitest.Call{{Name: "terminal",
			Args: jsonArgs(map[string]string{"command": "rm -r build"})}}},
		openaitest.Text("Done. I wrote notes/todo.md ", "with three tasks, listed the files, ", "and removed build/ after you approved it."),
	)
	rec := replay.NewRecorder(http.DefaultTransport)
	env, err := prepareDemo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env.provider = openai.New(openai.Config{BaseURL: srv.URL(), HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1})
	var out, errb bytes.Buffer
	code, err := demo(context.Background(), stdio{strings.NewReader(""), &out, &errb}, env)
	if err != nil || code != 0 {
		t.Fatalf("recording run: %d %v\n%s", code, err, errb.String())
	}
	if err := rec.Save(repoPath("scripts", "demo", "demo.cassette.json")); err != nil {
		t.Fatal(err)
	}
}

// TestDemo runs `hermes demo` as a user would and checks the whole main job happened.
func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"demo"}, stdio{strings.NewReader(""), &out, &errb})
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"⚙ write_file", "⚙ terminal", "approval needed (recursive delete", "→ once", "text_response(finish_reason=stop)"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if !strings.Contains(out.String(), demoAnswer) {
		t.Errorf("stdout lacks the answer:\n%s", out.String())
	}
}

func TestHelpListsCommands(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, stdio{nil, &out, &out}); code != 0 {
		t.Fatal(code)
	}
	for _, c := range commands {
		if !strings.Contains(out.String(), "  "+c.name+" ") {
			t.Errorf("--help lacks %s", c.name)
		}
	}
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, stdio{nil, &out, &errb}); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("unknown command: %d %s", code, errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"version"}, stdio{nil, &out, &out}); code != 0 || !strings.HasPrefix(out.String(), "hermes ") {
		t.Fatalf("version: %q", out.String())
	}
}
