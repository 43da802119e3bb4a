package hermes_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/scripting"
	"github.com/hermes-go/hermes/stdlib"
	"github.com/hermes-go/hermes/stdlib/hermes"
)

var streams = map[string]string{
	"js": `
const hermes = require("hermes");
const assert = require("assert");
const s = hermes.create({ title: "streams" });
const t = s.prompt("one");
assert.equal(t.wait().text, "first");
const types = [];
for (const ev of t.events()) types.push(ev.type);
assert.contains(types, "message.start");
assert.equal(types[types.length - 1], "message.complete");
const again = [];
for (const ev of t.events()) again.push(ev.type);
assert.equal(again, types, "a second t.events() replays the same");

// A turn read partly, then from the start again while it may still run.
const t2 = s.prompt("two");
let first;
for (const ev of t2.events()) { first = ev; break; }
const second = [];
for (const ev of t2.events()) second.push(ev.type);
assert.equal(second[0], first.type);
assert.equal(second[second.length - 1], "message.complete");
assert.equal(t2.wait().text, "second");

// follow: false stops at what is stored.
const stored = [];
for (const ev of s.events({ since: 0, follow: false })) stored.push(ev.type);
assert.equal(stored.filter((x) => x === "message.complete").length, 2);
assert.throws(() => s.events({ follow: "no" }), "follow must be true or false");
assert.throws(() => s.events({ folow: false }), "unknown option");
print("ok");
`,
	"lua": `
local hermes = require "hermes"
local assert = require "assert"
local s = hermes.create({ title = "streams" })
local t = s:prompt("one")
assert.equal(t.wait().text, "first")
local types = {}
for ev in t.events() do types[#types + 1] = ev.type end
assert.contains(types, "message.start")
assert.equal(types[#types], "message.complete")
local again = {}
for ev in t.events() do again[#again + 1] = ev.type end
assert.equal(again, types, "a second t.events() replays the same")

local t2 = s:prompt("two")
local first = t2.events()()
local second = {}
for ev in t2.events() do second[#second + 1] = ev.type end
assert.equal(second[1], first.type)
assert.equal(second[#second], "message.complete")
assert.equal(t2.wait().text, "second")

local n = 0
for ev in s:events({ since = 0, follow = false }) do
  if ev.type == "message.complete" then n = n + 1 end
end
assert.equal(n, 2)
print("ok")
`,
}

// TestStreamsEnd: t.events() replays the turn whenever it is called (after wait, after a
// partial read), and s.events({follow: false}) ends at the stored events, in each language.
func TestStreamsEnd(t *testing.T) {
	for _, lang := range []string{"js", "lua"} {
		t.Run(lang, func(t *testing.T) {
			srv := openaitest.New(t)
			srv.Enqueue(openaitest.Text("first"), openaitest.Text("second"))
			st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1})},
				DefaultModel: "openai:fake", Tools: tool.NewRegistry(builtin.Defaults(check)...), Cwd: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			api := hermes.New(hermes.Options{Engine: eng, Version: "test"})
			defer api.Close()
			var out bytes.Buffer
			rt, err := scripting.NewRuntime(lang, "streams."+lang, scripting.RuntimeOptions{Modules: []*stdlib.Module{api.Module()}, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := rt.Run(ctx, "streams."+lang, streams[lang]); err != nil {
				var se *stdlib.ScriptError
				if asScript(err, &se) {
					t.Fatal(se.Trace(), "\n", out.String())
				}
				t.Fatal(err)
			}
			if strings.TrimSpace(out.String()) != "ok" {
				t.Fatalf("output %q", out.String())
			}
		})
	}
}
