package hermes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/agent"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/engine/tool/danger"
	"github.com/hermes-go/hermes/scripting"
	"github.com/hermes-go/hermes/stdlib"
	"github.com/hermes-go/hermes/stdlib/hermes"
)

func check(cmd string) tool.Verdict {
	r := danger.Check(cmd, danger.Options{})
	v := tool.Verdict{Blocked: r.Hardline, Reason: r.Reason, Command: cmd}
	for _, m := range r.Matches {
		v.Patterns = append(v.Patterns, m.Key)
	}
	return v
}

func args(v any) []string {
	b, _ := json.Marshal(v)
	return []string{string(b)}
}

// scenario is the same script in both languages: every API name is exercised once.
var scenario = map[string]string{
	"js": `
const hermes = require("hermes");
const assert = require("assert");
const s = hermes.create({ title: "api test" });
assert.equal(s.info().title, "api test");
assert.equal(s.interrupt(), false, "nothing to interrupt");
assert.throws(() => s.steer("now"), "no turn");

// 1. prompt + events: answer the approval by hand
const t = s.prompt("remove build");
assert.equal(t.status, "started");
const types = [];
for (const ev of t.events()) {
  types.push(ev.type);
  if (ev.type === "request.open") {
    assert.equal(ev.data.params.command, "rm -r build");
    assert.equal(s.requests().length, 1);
    s.answer(ev.data.id, "once");
  }
}
assert.contains(types, "request.resolved");
assert.equal(types[types.length - 1], "message.complete");
assert.equal(t.wait().text, "removed");

// 2. run with a clarify handler
const out = s.run("pick one", { clarify: (q) => { assert.equal(q.question, "which?"); return "b"; } });
assert.equal(out.status, "completed");
assert.equal(out.text, "you picked b");
assert.equal(s.info().context_max, 128000, "the default window: the model is not in the catalogue");
assert.equal(s.info().context_used > 0, true);

// 3. history and branch
const rows = s.history();
assert.equal(rows.map((r) => r.role).join(","), "user,assistant,tool,assistant,user,assistant,tool,assistant");
assert.equal(s.history({ tail: 2 }).length, 2);
const b = s.branch({ title: "fork" });
assert.not_equal(b.id, s.id);
assert.equal(b.history().length, rows.length);
s.set_title("renamed");
assert.equal(hermes.sessions({}).filter((x) => x.title === "renamed").length, 1);
print("ok", rows.length);
`,
	"lua": `
local hermes = require "hermes"
local assert = require "assert"
local s = hermes.create({ title = "api test" })
assert.equal(s:info().title, "api test")
assert.equal(s:interrupt(), false, "nothing to interrupt")
assert.throws(function() s:steer("now") end, "no turn")

-- 1. prompt + events: answer the approval by hand
local t = s:prompt("remove build")
assert.equal(t.status, "started")
local types = {}
for ev in t.events() do
  types[#types + 1] = ev.type
  if ev.type == "request.open" then
    assert.equal(ev.data.params.command, "rm -r build")
    assert.equal(#s:requests(), 1)
    s:answer(ev.data.id, "once")
  end
end
assert.contains(types, "request.resolved")
assert.equal(types[#types], "message.complete")
assert.equal(t.wait().text, "removed")

-- 2. run with a clarify handler
local out = s:run("pick one", { clarify = function(q) assert.equal(q.question, "which?") return "b" end })
assert.equal(out.status, "completed")
assert.equal(out.text, "you picked b")
assert.equal(s:info().context_max, 128000, "the default window: the model is not in the catalogue")
assert.equal(s:info().context_used > 0, true)

-- 3. history and branch
local rows = s:history()
local roles = {}
for i, r in ipairs(rows) do roles[i] = r.role end
assert.equal(table.concat(roles, ","), "user,assistant,tool,assistant,user,assistant,tool,assistant")
assert.equal(#s:history({ tail = 2 }), 2)
local b = s:branch({ title = "fork" })
assert.not_equal(b.id, s.id)
assert.equal(#b:history(), #rows)
s:set_title("renamed")
local n = 0
for _, x in ipairs(hermes.sessions({})) do if x.title == "renamed" then n = n + 1 end end
assert.equal(n, 1)
print("ok", #rows)
`,
}

func TestScriptAPISameInBothLanguages(t *testing.T) {
	for _, lang := range []string{"js", "lua"} {
		t.Run(lang, func(t *testing.T) {
			srv := openaitest.New(t)
			srv.Enqueue(
				openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: args(map[string]string{"command": "rm -r build"})}),
				openaitest.Text("removed"),
				openaitest.ToolCalls(openaitest.Call{Name: "clarify", Args: args(map[string]any{"question": "which?", "choices": []string{"a", "b"}})}),
				openaitest.Text("you picked b"),
			)
			st, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cwd := t.TempDir()
			os.MkdirAll(filepath.Join(cwd, "build"), 0o755)
			reg := tool.NewRegistry(builtin.Defaults(check)...)
			reg.Add(agent.Clarify{})
			eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: srv.URL(), MaxRetries: -1})},
				DefaultModel: "openai:fake", Tools: reg, Cwd: cwd})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			api := hermes.New(hermes.Options{Engine: eng, Version: "test"})
			defer api.Close()
			var out bytes.Buffer
			rt, err := scripting.NewRuntime(lang, "api."+lang, scripting.RuntimeOptions{Modules: []*stdlib.Module{api.Module()}, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := rt.Run(ctx, "api."+lang, scenario[lang]); err != nil {
				var se *stdlib.ScriptError
				if ok := asScript(err, &se); ok {
					t.Fatal(se.Trace())
				}
				t.Fatal(err)
			}
			if strings.TrimSpace(out.String()) != "ok 8" {
				t.Fatalf("output %q", out.String())
			}
			if _, err := os.Stat(filepath.Join(cwd, "build")); !os.IsNotExist(err) {
				t.Fatal("the approved command did not run")
			}
		})
	}
}

func asScript(err error, se **stdlib.ScriptError) bool {
	e, ok := err.(*stdlib.ScriptError)
	if ok {
		*se = e
	}
	return ok
}
