package stdlib

import (
	"math"
	"strings"
	"testing"
)

func TestDeepEqual(t *testing.T) {
	p1, p2 := new(int), new(int) // two prototypes
	for _, c := range []struct {
		a, b any
		eq   bool
	}{
		{MapValue{[][2]any{{int64(1), int64(2)}}}, MapValue{[][2]any{{int64(1), int64(3)}}}, false},
		{MapValue{[][2]any{{int64(1), int64(2)}}}, MapValue{[][2]any{{int64(2), int64(2)}}}, false},
		{MapValue{[][2]any{{"a", []any{int64(1)}}, {"b", nil}}}, MapValue{[][2]any{{"b", Null}, {"a", []any{1.0}}}}, true},
		{MapValue{}, map[string]any{}, false},
		{SetValue{[]any{int64(1)}}, SetValue{[]any{int64(2)}}, false},
		{SetValue{[]any{int64(1), []any{"x"}}}, SetValue{[]any{[]any{"x"}, int64(1)}}, true},
		{SetValue{[]any{int64(1), int64(1)}}, SetValue{[]any{int64(1), int64(2)}}, false},
		{DateValue{0}, DateValue{1e12}, false},
		{DateValue{5}, DateValue{5}, true},
		{DateValue{math.NaN()}, DateValue{math.NaN()}, true},
		{RegExpValue{"a", "g"}, RegExpValue{"a", "i"}, false},
		{RegExpValue{"a", "g"}, RegExpValue{"a", "g"}, true},
		{TypedArrayValue{"Uint8Array", []any{int64(1)}}, TypedArrayValue{"Int8Array", []any{int64(1)}}, false},
		{TypedArrayValue{"Uint8Array", []any{int64(1)}}, TypedArrayValue{"Uint8Array", []any{int64(1)}}, true},
		{InstanceValue{"P", p1, map[string]any{"x": int64(1)}}, InstanceValue{"P", p1, map[string]any{"x": int64(1)}}, true},
		{InstanceValue{"P", p1, map[string]any{"x": int64(1)}}, InstanceValue{"P", p2, map[string]any{"x": int64(1)}}, false},
		{InstanceValue{"P", p1, map[string]any{"x": int64(1)}}, map[string]any{"x": int64(1)}, false},
		{FuncValue{"f", p1}, FuncValue{"f", p1}, true},
		{FuncValue{"f", p1}, FuncValue{"f", p2}, false},
		{Undefined, nil, false}, {Undefined, Null, false}, {Null, nil, true}, {Undefined, Undefined, true},
		{math.NaN(), math.NaN(), true}, {int64(2), 2.0, true},
		{[]any{}, map[string]any{}, false},
		{map[string]any{"a": Undefined}, map[string]any{}, false},
		{map[string]any{"a": map[string]any{"b": []any{int64(1)}}}, map[string]any{"a": map[string]any{"b": []any{int64(1)}}}, true},
	} {
		if got := DeepEqual(c.a, c.b); got != c.eq {
			t.Errorf("DeepEqual(%s, %s) = %v", Inspect(c.a), Inspect(c.b), got)
		}
		if got := DeepEqual(c.b, c.a); got != c.eq {
			t.Errorf("DeepEqual(%s, %s) = %v (reversed)", Inspect(c.b), Inspect(c.a), got)
		}
	}
}

func TestAssertEqualMessages(t *testing.T) {
	m := Assert()
	p := new(int)
	for _, c := range []struct {
		got, want any
		msg       string
	}{
		{map[string]any{"a": map[string]any{"b": int64(1)}, "c": []any{int64(1), int64(2)}, "d": "x"},
			map[string]any{"a": map[string]any{"b": int64(2)}, "c": []any{int64(1)}, "e": true},
			"expected {\"a\":{\"b\":2},\"c\":[1],\"e\":true}, got {\"a\":{\"b\":1},\"c\":[1,2],\"d\":\"x\"}\n" +
				"  at .a.b: expected 2, got 1\n  at .c[1]: unexpected 2\n  at .d: unexpected \"x\"\n  at .e: missing, expected true"},
		{MapValue{[][2]any{{int64(1), int64(2)}}}, MapValue{[][2]any{{int64(1), int64(3)}}},
			"expected Map(1) {1 => 3}, got Map(1) {1 => 2}\n  at .get(1): expected 3, got 2"},
		{SetValue{[]any{int64(1)}}, SetValue{[]any{int64(2)}},
			"expected Set(1) {2}, got Set(1) {1}\n  missing member 2\n  unexpected member 1"},
		{DateValue{0}, DateValue{1e12}, "expected Date(2001-09-09T01:46:40.000Z), got Date(1970-01-01T00:00:00.000Z)"},
		{Undefined, Null, "expected null, got undefined"},
		{map[string]any{"f": FuncValue{"foo", p}, "k-1": math.NaN()}, map[string]any{"f": FuncValue{"", p}, "k-1": int64(1)},
			"expected {\"f\":[Function (anonymous)],\"k-1\":1}, got {\"f\":[Function: foo],\"k-1\":NaN}\n  at [\"k-1\"]: expected 1, got NaN"},
		{InstanceValue{"Point", p, map[string]any{"x": int64(1)}}, InstanceValue{"Point", p, map[string]any{"x": int64(2)}},
			"expected Point {\"x\":2}, got Point {\"x\":1}\n  at .x: expected 2, got 1"},
	} {
		_, err := call(t, m, "equal", c.got, c.want)
		if err == nil || err.Error() != "assertion failed: "+c.msg {
			t.Errorf("equal(%s, %s):\n%v\nwant\n%s", Inspect(c.got), Inspect(c.want), err, c.msg)
		}
	}
	if _, err := call(t, m, "not_equal", MapValue{[][2]any{{int64(1), int64(2)}}}, MapValue{[][2]any{{int64(1), int64(3)}}}); err != nil {
		t.Error(err)
	}
	big := map[string]any{}
	for i := range 30 {
		big[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = int64(i)
	}
	d := Diff(map[string]any{}, big)
	if len(d) != maxDiffLines+1 || d[maxDiffLines] != "… and 18 more" {
		t.Errorf("%q", d)
	}
}
