package hermes_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/scripting"
	"github.com/hermes-go/hermes/stdlib"
	"github.com/hermes-go/hermes/stdlib/hermes"
)

var fakeScripts = map[string]string{
	"js": `
const hermes = require("hermes");
const assert = require("assert");
const m = hermes.fake_model([{ tool: "terminal", args: { command: "rm -r build" } }, { text: "done" }]);
assert.match(m, "^fake:");
const s = hermes.create({ model: m, title: "fixed" });
const asked = [];
const out = s.run("clean up", { approval: (req) => { asked.push(req.command); return "once"; } });
assert.equal(out.text, "done");
assert.equal(asked, ["rm -r build"]);
// The same title again is numbered instead of failing.
const again = hermes.create({ title: "fixed" });
assert.equal(again.info().title, "fixed #2");
assert.throws(() => hermes.fake_model([{ text: "a", tool: "b" }]), "one of them");
// A turn that asks for more than was scripted fails with a clear reason.
const short = hermes.create({ model: hermes.fake_model([{ tool: "terminal", args: { command: "ls" } }]) });
const o = short.run("go", { approval: "once" });
assert.equal(o.status, "failed");
assert.match(o.error, "scripted replies were used");
print(JSON.stringify({ s: Object.keys(s).sort(), t: Object.keys(s.prompt("x")).sort(), h: Object.keys(hermes).sort() }));
`,
	"lua": `
local hermes = require "hermes"
local assert = require "assert"
local m = hermes.fake_model({ { tool = "terminal", args = { command = "rm -r build" } }, { text = "done" } })
local s = hermes.create({ model = m, title = "fixed" })
local asked = {}
local out = s:run("clean up", { approval = function(req) asked[#asked + 1] = req.command return "once" end })
assert.equal(out.text, "done")
assert.equal(asked, { "rm -r build" })
local again = hermes.create({ title = "fixed" })
assert.equal(again:info().title, "fixed #2")
print("{}")
`,
}

// TestFakeModelAndTitles: a scripted model drives a turn with a tool call end to end (the
// approval answered by the script) with no server; a title already taken gets a number; the
// module, session and turn objects have exactly the members the API defines.
func TestFakeModelAndTitles(t *testing.T) {
	for _, lang := range []string{"js", "lua"} {
		t.Run(lang, func(t *testing.T) {
			st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cwd := t.TempDir()
			os.MkdirAll(filepath.Join(cwd, "build"), 0o755)
			fakes := hermes.NewFakeModels()
			eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{hermes.FakeProvider: fakes},
				DefaultModel: "fake:none", Tools: tool.NewRegistry(builtin.Defaults(check)...), Cwd: cwd})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			api := hermes.New(hermes.Options{Engine: eng, Version: "test", Fakes: fakes})
			defer api.Close()
			var out bytes.Buffer
			rt, err := scripting.NewRuntime(lang, "fake."+lang, scripting.RuntimeOptions{Modules: []*stdlib.Module{api.Module()}, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := rt.Run(ctx, "fake."+lang, fakeScripts[lang]); err != nil {
				var se *stdlib.ScriptError
				if asScript(err, &se) {
					t.Fatal(se.Trace())
				}
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(cwd, "build")); !os.IsNotExist(err) {
				t.Fatal("the scripted tool call did not run")
			}
			if lang != "js" {
				return
			}
			var keys struct{ S, T, H []string }
			if err := jsonUnmarshal(out.String(), &keys); err != nil {
				t.Fatal(err, out.String())
			}
			for name, got := range map[string][]string{"Session": keys.S, "Turn": keys.T, "hermes": keys.H} {
				if u, m := stdlib.CheckAPI(name, got); len(u) > 0 || len(m) > 0 {
					t.Errorf("%s: members without an API entry %v, entries without a member %v", name, u, m)
				}
			}
		})
	}
}

func jsonUnmarshal(s string, v any) error {
	x, err := stdlib.Unmarshal([]byte(strings.TrimSpace(s)))
	if err != nil {
		return err
	}
	m, _ := x.(map[string]any)
	conv := func(k string) []string {
		var out []string
		l, _ := m[k].([]any)
		for _, e := range l {
			out = append(out, e.(string))
		}
		return out
	}
	p := v.(*struct{ S, T, H []string })
	p.S, p.T, p.H = conv("s"), conv("t"), conv("h")
	return nil
}
