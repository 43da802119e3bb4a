package lua

import (
	"context"
	"testing"
	"time"

	"github.com/hermes-go/hermes/stdlib"
)

// TestBreakOutOfGoIterator: a loop whose body begins with a jump (break, an if with a constant
// condition, a nested loop) after another loop. gopher-lua's jump-to-jump optimisation sent
// the loop's backward jump into the earlier loop's body; padLoopBody keeps the bodies apart.
func TestBreakOutOfGoIterator(t *testing.T) {
	events := stdlib.Func(func(context.Context, stdlib.Args) (any, error) {
		n := 0
		return stdlib.IteratorFunc(func(context.Context) (any, bool, error) {
			if n == 3 {
				return nil, false, nil
			}
			n++
			return map[string]any{"n": n}, true, nil
		}), nil
	})
	guard := "first = first + 1; if first > 3 then error('the first loop body ran again') end\n"
	for name, src := range map[string]string{
		"generic for, break":     "for ev in events() do " + guard + "end\nlocal seen = 0\nfor ev in events() do break end\nfor ev in events() do seen = seen + ev.n end\nassert(seen == 6, seen)\n",
		"pairs after ipairs":     "for _, v in ipairs({1,2,3}) do " + guard + "end\nfor k in pairs({a=1}) do break end\n",
		"if false then local":    "for ev in events() do if false then local x end " + guard + "end\nfor ev in events() do break end\n",
		"while true, break":      "for ev in events() do " + guard + "end\nwhile true do break end\n",
		"repeat break":           "for ev in events() do " + guard + "end\nrepeat break until false\n",
		"do break end":           "for ev in events() do " + guard + "end\nfor ev in events() do do break end end\n",
		"nested loop first":      "for ev in events() do " + guard + "end\nfor ev in events() do while true do break end break end\n",
		"body starting with if":  "for ev in events() do " + guard + "end\nlocal k = 0\nfor ev in events() do if ev.n == 2 then break end k = k + 1 end\nassert(k == 1, k)\n",
		"iterator after a break": "local it = events()\nfor ev in it do break end\nlocal rest = 0\nfor ev in it do rest = rest + 1 end\nassert(rest == 2, rest)\n",
	} {
		t.Run(name, func(t *testing.T) {
			v := newVM(t, Options{Globals: map[string]any{"events": events}})
			// A miscompiled loop may spin forever: the bound turns that into a failure.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := v.RunFile(ctx, "loops.lua", "first = 0\n"+src); err != nil {
				t.Fatal(err)
			}
		})
	}
}
