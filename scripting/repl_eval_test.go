package scripting

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/stdlib"
)

func evalAll(t *testing.T, lang string, inputs ...string) []any {
	t.Helper()
	rt, err := NewRuntime(lang, "repl", RuntimeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var out []any
	for _, in := range inputs {
		v, err := rt.Eval(context.Background(), in)
		if err != nil {
			t.Fatalf("%s %q: %v", lang, in, err)
		}
		out = append(out, v)
	}
	return out
}

// TestREPLInput: Lua locals persist to the next input and "= expr" prints a value; JS
// top-level const and let can be declared again, as in the Node console.
func TestREPLInput(t *testing.T) {
	got := evalAll(t, "lua", "local x = 41", "local function inc(n) return n + 1 end", "= inc(x)", "local a, b = 1", "a", "b")
	if got[2] != int64(42) || got[4] != int64(1) || got[5] != nil {
		t.Fatalf("lua: %v", got)
	}
	got = evalAll(t, "js", "const x = 1", "const x = 2; x", "let y = x + 1", "let y = 10; y + x")
	if got[1] != int64(2) || got[3] != int64(12) {
		t.Fatalf("js: %v", got)
	}
}

// TestSyntaxErrorsOnceWithColumn: a syntax error says so once and carries its line and column.
func TestSyntaxErrorsOnceWithColumn(t *testing.T) {
	for lang, src := range map[string]string{"js": "let a = 1;\nlet b = ;\n", "lua": "local a = 1\nlocal b = = 2\n"} {
		rt, err := NewRuntime(lang, "f."+lang, RuntimeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = rt.Run(context.Background(), "f."+lang, src)
		rt.Close()
		var se *stdlib.ScriptError
		if !errors.As(err, &se) || se.Line != 2 || !strings.Contains(se.Message, "(column ") ||
			strings.Count(strings.ToLower(se.Error()), "syntax") != 1 {
			t.Errorf("%s: %v", lang, err)
		}
	}
}

// TestValueSummaries: an object with methods prints readably, not as Go function pointers.
func TestValueSummaries(t *testing.T) {
	info := stdlib.Callable(func(context.Context, ...any) (any, error) {
		return map[string]any{"status": "idle", "model": "fake:1"}, nil
	})
	fn := stdlib.Callable(func(context.Context, ...any) (any, error) { return nil, nil })
	for v, want := range map[*map[string]any]string{
		{"id": "s1", "prompt": fn, "info": info}:      `Session{id: "s1", status: "idle", model: "fake:1"}`,
		{"id": "t1", "status": "started", "wait": fn}: `Turn{id: "t1", status: "started"}`,
		{"n": int64(1), "f": fn}:                      `{"f":"<function>","n":1}`,
	} {
		if got := stdlib.Format(*v); got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}
