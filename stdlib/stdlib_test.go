package stdlib

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func call(t *testing.T, m *Module, fn string, args ...any) (any, error) {
	t.Helper()
	f, ok := m.Members[fn].(Func)
	if !ok {
		t.Fatalf("%s.%s is not a function", m.Name, fn)
	}
	return f(context.Background(), args)
}

func TestJSONRoundTrip(t *testing.T) {
	m := JSON()
	out, err := call(t, m, "encode", map[string]any{"b": []any{int64(1), 2.5, true, nil}, "a": "x"})
	if err != nil || out != `{"a":"x","b":[1,2.5,true,null]}` {
		t.Fatalf("%v %v", out, err)
	}
	v, err := call(t, m, "decode", `{"n": 3, "f": 1.5, "l": [1]}`)
	if err != nil || !Equal(v, map[string]any{"n": int64(3), "f": 1.5, "l": []any{int64(1)}}) {
		t.Fatalf("%#v %v", v, err)
	}
	if _, err := call(t, m, "decode", `{"a":1} x`); err == nil {
		t.Fatal("trailing data accepted")
	}
	if _, err := call(t, m, "encode", map[string]any{"f": Func(nil)}); err == nil {
		t.Fatal("function encoded")
	}
}

func TestAssert(t *testing.T) {
	m := Assert()
	for _, c := range []struct {
		fn   string
		args []any
		ok   bool
	}{
		{"ok", []any{true}, true}, {"ok", []any{""}, false}, {"ok", []any{int64(0)}, false},
		{"equal", []any{int64(2), 2.0}, true}, {"equal", []any{[]any{"a"}, []any{"b"}}, false},
		{"equal", []any{map[string]any{}, []any{}}, false}, // JS {} and []; an empty Lua table is always a map
		{"not_equal", []any{"a", "b"}, true}, {"match", []any{"abc", "^a.c$"}, true}, {"match", []any{"abc", "^b"}, false},
		{"contains", []any{"hello", "ell"}, true}, {"contains", []any{[]any{int64(1)}, int64(1)}, true}, {"contains", []any{map[string]any{"k": 1}, "j"}, false},
		{"fail", nil, false},
	} {
		_, err := call(t, m, c.fn, c.args...)
		if (err == nil) != c.ok || err != nil && !IsAssertion(err) {
			t.Errorf("%s%v: %v", c.fn, c.args, err)
		}
	}
	_, err := call(t, m, "equal", int64(1), int64(2), "sum")
	if err == nil || err.Error() != "assertion failed: sum: expected 2, got 1" {
		t.Fatal(err)
	}
	msg, err := call(t, m, "throws", Callable(func(context.Context, ...any) (any, error) { return nil, errors.New("boom") }), "bo+m")
	if err != nil || msg != "boom" {
		t.Fatal(msg, err)
	}
	if _, err := call(t, m, "throws", Callable(func(context.Context, ...any) (any, error) { return nil, nil })); !IsAssertion(err) {
		t.Fatal(err)
	}
}

func TestRe(t *testing.T) {
	m := Re()
	for _, c := range []struct {
		fn   string
		args []any
		want any
	}{
		{"match", []any{`^git\s+status\b`, "git status -s"}, true},
		{"find", []any{`\d+`, "a12b3"}, "12"},
		{"find", []any{`\d+`, "ab"}, nil},
		{"groups", []any{`(\w+)@(\w+)`, "me@host"}, []any{"me@host", "me", "host"}},
		{"find_all", []any{`\d`, "a1b2c3", int64(2)}, []any{"1", "2"}},
		{"replace", []any{`(\w+)-(\w+)`, "a-b", "$2-$1"}, "b-a"},
		{"split", []any{`\s*,\s*`, "a , b,c"}, []any{"a", "b", "c"}},
		{"quote", []any{"a.b"}, `a\.b`},
	} {
		got, err := call(t, m, c.fn, c.args...)
		if err != nil || !Equal(got, c.want) {
			t.Errorf("%s%v = %#v %v", c.fn, c.args, got, err)
		}
	}
	if _, err := call(t, m, "match", "(", "x"); !errors.Is(err, ErrArgument) {
		t.Fatal(err)
	}
}

func TestPathWithin(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"a/b", "/w", true}, {"/w", "/w", true}, {"/w/x", "/w", true}, {"/w/../w/x", "/w", true},
		{"../x", "/w", false}, {"/wx", "/w", false}, {"/w-evil/x", "/w", false}, {"/etc/passwd", "/w", false},
		{"a/../../x", "/w", false}, {"x", "", false}, {"/x", "/", true},
	} {
		if got := Within(c.p, c.dir); got != c.want {
			t.Errorf("Within(%q, %q) = %v", c.p, c.dir, got)
		}
	}
	if r := Resolve("/w", "a/../b"); r != "/w/b" {
		t.Fatal(r)
	}
}

func TestFSJail(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600)
	os.Symlink(outside, filepath.Join(root, "link"))
	m, err := FS([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, m, "write", "notes/a.txt", "hi"); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if _, err := call(t, m, "mkdir", "notes"); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, m, "write", "notes/a.txt", "hi"); err != nil {
		t.Fatal(err)
	}
	if v, err := call(t, m, "read", filepath.Join(root, "notes", "a.txt")); err != nil || v != "hi" {
		t.Fatal(v, err)
	}
	if v, _ := call(t, m, "list", "."); !Equal(v, []any{"link", "notes"}) {
		t.Fatal(v)
	}
	for _, p := range []string{"../x", filepath.Join(outside, "secret"), "link/secret", "notes/../../x"} {
		if _, err := call(t, m, "read", p); !errors.Is(err, ErrDenied) {
			t.Errorf("read %s: %v", p, err)
		}
	}
}

func TestHTTPAllowList(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://example.invalid/", http.StatusFound)
			return
		}
		w.Header().Set("X-Test", "1")
		w.Write([]byte("hello " + r.Header.Get("X-Who")))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	m, err := HTTP(srv.Client(), []string{u.Host})
	if err != nil {
		t.Fatal(err)
	}
	res, err := call(t, m, "get", srv.URL+"/x", map[string]any{"headers": map[string]any{"X-Who": "me"}})
	if err != nil || !Equal(res.(map[string]any)["body"], "hello me") || res.(map[string]any)["status"] != int64(200) {
		t.Fatalf("%v %v", res, err)
	}
	if _, err := call(t, m, "get", srv.URL+"/redirect"); err == nil || !strings.Contains(err.Error(), "not in the granted list") {
		t.Fatalf("redirect: %v", err)
	}
	for _, bad := range []string{"http://127.0.0.2:1/", "file:///etc/passwd", "http://" + u.Hostname() + ":1/"} {
		if _, err := call(t, m, "request", map[string]any{"url": bad}); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestParseGrants(t *testing.T) {
	g, err := ParseGrants([]string{"fs", "fs:/data", "fs:rel", "http:api.example.com", "http:Localhost:8080"}, "/w")
	if err != nil || !Equal(strs(g.FS), []any{"/w", "/data", "/w/rel"}) || !Equal(strs(g.HTTP), []any{"api.example.com", "localhost:8080"}) {
		t.Fatalf("%+v %v", g, err)
	}
	for _, bad := range []string{"http", "exec", "net:x", "fs:~/x"} {
		if _, err := ParseGrants([]string{bad}, "/w"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if mods, _ := (Grants{}).Modules(nil); len(mods) != 0 {
		t.Fatal("zero grants built modules")
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true]}`, `1e400`, `"\u00e9"`, `[]`, `{"a":1}{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Unmarshal([]byte(s))
		if err != nil {
			return
		}
		b, err := Marshal(v, "")
		if err != nil {
			return // NaN/Inf cannot come back out
		}
		w, err := Unmarshal(b)
		if err != nil || !Equal(v, w) {
			t.Fatalf("round trip %q -> %s: %v", s, b, err)
		}
	})
}

func FuzzParseGrants(f *testing.F) {
	for _, s := range []string{"fs", "fs:/x", "http:h", "http", "x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGrants([]string{s}, "/w")
		if err == nil && len(g.FS)+len(g.HTTP) != 1 {
			t.Fatalf("%q granted %+v", s, g)
		}
	})
}
