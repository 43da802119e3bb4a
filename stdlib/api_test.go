package stdlib

import (
	"net/http"
	"strings"
	"testing"
)

// TestAPIMatchesModules: every member of the standard modules has an entry in API and every
// entry a member, so the generated typings and reference cannot drift from the bindings.
func TestAPIMatchesModules(t *testing.T) {
	fs, err := FS([]string{t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	web, err := HTTP(http.DefaultClient, []string{"example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Module{JSON(), Log(nil, "x"), Time(), Assert(), Re(), Path(), fs, web} {
		undocumented, missing := CheckAPI(m.Name, Keys(m.Members))
		if len(undocumented) > 0 || len(missing) > 0 {
			t.Errorf("%s: members without an API entry %v, entries without a member %v", m.Name, undocumented, missing)
		}
	}
	if u, _ := CheckAPI("nope", []string{"x"}); len(u) != 1 {
		t.Error("an unknown module is not reported")
	}
}

// TestGenerated: the generators cover every entry, in each output.
func TestGenerated(t *testing.T) {
	ts, luaAnn, md := TypeScriptDeclarations(), LuaAnnotations(), Reference()
	for _, m := range API {
		for _, e := range m.Members {
			if !strings.Contains(md, e.Name) {
				t.Errorf("reference lacks %s.%s", m.Name, e.Name)
			}
			if m.Name == "policy hermes" {
				continue
			}
			if !strings.Contains(ts, " "+e.Name) || !strings.Contains(luaAnn, e.Name) {
				t.Errorf("typings lack %s.%s", m.Name, e.Name)
			}
		}
	}
	for _, want := range []string{`declare module "hermes" {`, "export function create(options?: CreateOptions): Session;", "events(options?: Record<string, any>): Iterable<HermesEvent>;", "declare function test(name: string, fn: (...args: any[]) => any): void;",
		`/// <reference lib="es2020" />`, "export type Event = HermesEvent;", `declare function require(name: "assert"): typeof import("assert");`, "declare var console: Console;"} {
		if !strings.Contains(ts, want) {
			t.Errorf("d.ts lacks %q", want)
		}
	}
	for _, want := range []string{"---@class Session", "function Session:prompt(text) end", "---@return fun():Event|nil", "function json.encode(value, indent) end"} {
		if !strings.Contains(luaAnn, want) {
			t.Errorf("lua annotations lack %q", want)
		}
	}
}
