package scripting

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/policy"
)

// The compact hook in both languages: a boolean, nothing (the configured rule), or an object
// whose threshold replaces the configured one and whose prompt replaces the summary prompt;
// its examples are checked at load.
func TestCompactHook(t *testing.T) {
	both(t, func(t *testing.T, lang string) {
		name, code := src(lang, `
export function compact(c) {
  if (c.model.startsWith("local:")) return { threshold: 0.3, prompt: "Summarise tersely." };
  if (c.reason === "overflow") return true;
  if (c.session_id === "keep") return false;
  return null;
}
export const examples = [
  { name: "small local models compact early", hook: "compact", input: { model: "local:llama", context_used: 400, context_max: 1000 }, want: { compact: true, threshold: 0.3, prompt: "Summarise tersely." } },
  { name: "the configured rule", hook: "compact", input: { model: "openai:gpt-5", context_used: 400, context_max: 1000 }, want: false },
  { hook: "compact", input: { model: "openai:gpt-5", context_used: 600, context_max: 1000, threshold: 0.5 }, want: true },
];`, `
function compact(c)
  if c.model:sub(1, 6) == "local:" then return { threshold = 0.3, prompt = "Summarise tersely." } end
  if c.reason == "overflow" then return true end
  if c.session_id == "keep" then return false end
  return nil
end
examples = {
  { name = "small local models compact early", hook = "compact", input = { model = "local:llama", context_used = 400, context_max = 1000 }, want = { compact = true, threshold = 0.3, prompt = "Summarise tersely." } },
  { name = "the configured rule", hook = "compact", input = { model = "openai:gpt-5", context_used = 400, context_max = 1000 }, want = false },
  { hook = "compact", input = { model = "openai:gpt-5", context_used = 600, context_max = 1000, threshold = 0.5 }, want = true },
}`)
		p := load(t, name, code, Options{})
		if !p.Has(HookCompact) {
			t.Fatal("compact hook not found")
		}
		if _, ok := p.Set().Compact.(*Policy); !ok {
			t.Fatalf("Set().Compact is %T", p.Set().Compact)
		}
		ctx := context.Background()
		in := policy.CompactInput{SessionID: "s1", Model: "openai:gpt-5", ContextUsed: 700, ContextMax: 1000, Percent: 70, Threshold: 0.8, Reason: policy.CompactThreshold}
		for _, c := range []struct {
			edit func(*policy.CompactInput)
			want policy.CompactDecision
		}{
			{func(*policy.CompactInput) {}, policy.CompactDecision{Compact: false, Threshold: 0.8}},
			{func(i *policy.CompactInput) { i.ContextUsed = 900 }, policy.CompactDecision{Compact: true, Threshold: 0.8}},
			{func(i *policy.CompactInput) { i.Model = "local:llama"; i.ContextUsed = 310 }, policy.CompactDecision{Compact: true, Threshold: 0.3, Prompt: "Summarise tersely."}},
			{func(i *policy.CompactInput) { i.Model = "local:llama"; i.ContextUsed = 290 }, policy.CompactDecision{Compact: false, Threshold: 0.3, Prompt: "Summarise tersely."}},
			{func(i *policy.CompactInput) { i.Reason = policy.CompactOverflow; i.ContextUsed = 10 }, policy.CompactDecision{Compact: true, Threshold: 0.8}},
			{func(i *policy.CompactInput) { i.SessionID = "keep"; i.ContextUsed = 990 }, policy.CompactDecision{Compact: false, Threshold: 0.8}},
		} {
			ci := in
			c.edit(&ci)
			if d, err := p.Compact(ctx, ci); err != nil || d != c.want {
				t.Fatalf("compact %+v: %+v %v, want %+v", ci, d, err, c.want)
			}
		}
		got, primary, err := p.Eval(ctx, HookCompact, map[string]any{"model": "local:x", "context_used": int64(500), "context_max": int64(1000)})
		if err != nil || primary != "compact" || got["compact"] != true || got["threshold"] != 0.3 {
			t.Fatalf("eval: %v %q %v", got, primary, err)
		}
	})
}

// Decisions of the wrong shape are errors naming the file and line; the engine then uses the
// configured rule.
func TestCompactHookBadDecisions(t *testing.T) {
	for _, c := range []struct{ ret, want string }{
		{`"yes"`, `a string (want true, false or {compact, threshold, prompt})`},
		{`{ threshold: 2 }`, `threshold 2 (want a number above 0, at most 1`},
		{`{ threshold: "half" }`, `threshold "half"`},
		{`{ compact: "yes" }`, `field "compact" is a string (want a boolean)`},
		{`{ prompt: 3 }`, `field "prompt" is a number (want a string)`},
		{`{ compact: true, budget: 3 }`, `unknown field "budget"`},
	} {
		p := load(t, "p.js", "export function compact(c) {\n  return "+c.ret+";\n}\n", Options{})
		_, err := p.Compact(context.Background(), policy.CompactInput{ContextUsed: 1, ContextMax: 10, Threshold: 0.5, Reason: policy.CompactThreshold})
		if !errors.Is(err, ErrBadDecision) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "p.js:2") {
			t.Fatalf("return %s: %v, want %q at p.js:2", c.ret, err, c.want)
		}
	}
}
