package stdlib

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// JSON is the json module: encode(value, indent?) and decode(text).
func JSON() *Module {
	return &Module{Name: "json", Members: Object{
		"encode": Func(func(_ context.Context, a Args) (any, error) {
			indent, err := a.OptString(1, "")
			if err != nil {
				return nil, err
			}
			b, err := Marshal(a.Get(0), indent)
			if err != nil {
				return nil, err
			}
			return string(b), nil
		}),
		"decode": Func(func(_ context.Context, a Args) (any, error) {
			s, err := a.String(0)
			if err != nil {
				return nil, err
			}
			v, err := Unmarshal([]byte(s))
			if err != nil {
				return nil, fmt.Errorf("json.decode: %w", err)
			}
			return v, nil
		}),
	}}
}

// Log is the log module: debug, info, warn and error(message, fields?) to the host logger.
// source names the script in every record.
func Log(l *slog.Logger, source string) *Module {
	mk := func(level slog.Level) Func {
		return func(ctx context.Context, a Args) (any, error) {
			msg := fmt.Sprint(a.Get(0))
			if s, ok := a.Get(0).(string); ok {
				msg = s
			}
			attrs := []slog.Attr{slog.String("script", source)}
			if f, ok := a.Get(1).(map[string]any); ok {
				for _, k := range Keys(f) {
					attrs = append(attrs, slog.Any(k, f[k]))
				}
			}
			l.LogAttrs(context.WithoutCancel(ctx), level, msg, attrs...)
			return nil, nil
		}
	}
	return &Module{Name: "log", Members: Object{
		"debug": mk(slog.LevelDebug), "info": mk(slog.LevelInfo),
		"warn": mk(slog.LevelWarn), "error": mk(slog.LevelError),
	}}
}

// Time is the time module: now() (milliseconds since the epoch), since(ms), sleep(ms) (ended
// early by an interrupt), and format(ms, layout?) (RFC 3339 in UTC by default).
func Time() *Module {
	return &Module{Name: "time", Members: Object{
		"now": Func(func(context.Context, Args) (any, error) { return time.Now().UnixMilli(), nil }),
		"since": Func(func(_ context.Context, a Args) (any, error) {
			ms, err := a.Float(0)
			if err != nil {
				return nil, err
			}
			return Number(float64(time.Now().UnixMilli()) - ms), nil
		}),
		"sleep": Func(func(ctx context.Context, a Args) (any, error) {
			ms, err := a.Float(0)
			if err != nil {
				return nil, err
			}
			t := time.NewTimer(time.Duration(ms * float64(time.Millisecond)))
			defer t.Stop()
			select {
			case <-t.C:
				return nil, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}),
		"format": Func(func(_ context.Context, a Args) (any, error) {
			ms, err := a.Float(0)
			if err != nil {
				return nil, err
			}
			layout, err := a.OptString(1, time.RFC3339Nano)
			if err != nil {
				return nil, err
			}
			return time.UnixMilli(int64(ms)).UTC().Format(layout), nil
		}),
	}}
}

// AssertionError is a failed assertion. `hermes run` reports it with the script's file and
// line and exits 1.
type AssertionError struct{ Msg string }

func (e *AssertionError) Error() string { return "assertion failed: " + e.Msg }

func assertMsg(a Args, i int, def string) string {
	if s, ok := a.Get(i).(string); ok && s != "" {
		return s + ": " + def
	}
	return def
}

// Assert is the assert module: ok, equal, not_equal, match, contains, fail and throws. equal
// and not_equal compare deeply (DeepEqual); their arguments, and contains', arrive with the
// kinds JSON cannot tell apart (Map, Set, Date, undefined, …) where the language has them.
func Assert() *Module {
	return &Module{Name: "assert", Exact: []string{"equal", "not_equal", "contains"}, Members: Object{
		"ok": Func(func(_ context.Context, a Args) (any, error) {
			if !Truthy(a.Get(0)) {
				return nil, &AssertionError{assertMsg(a, 1, fmt.Sprintf("expected a true value, got %s", Format(a.Get(0))))}
			}
			return nil, nil
		}),
		"equal": Func(func(_ context.Context, a Args) (any, error) {
			got, want := a.Get(0), a.Get(1)
			if !DeepEqual(got, want) {
				return nil, &AssertionError{assertMsg(a, 2, inequality(got, want))}
			}
			return nil, nil
		}),
		"not_equal": Func(func(_ context.Context, a Args) (any, error) {
			if DeepEqual(a.Get(0), a.Get(1)) {
				return nil, &AssertionError{assertMsg(a, 2, fmt.Sprintf("expected a value other than %s", clip(Inspect(a.Get(1)))))}
			}
			return nil, nil
		}),
		"match": Func(func(_ context.Context, a Args) (any, error) {
			s, err := a.String(0)
			if err != nil {
				return nil, err
			}
			pat, err := a.String(1)
			if err != nil {
				return nil, err
			}
			re, err := compileRe(pat)
			if err != nil {
				return nil, err
			}
			if !re.MatchString(s) {
				return nil, &AssertionError{assertMsg(a, 2, fmt.Sprintf("%s does not match /%s/", Format(s), pat))}
			}
			return nil, nil
		}),
		"contains": Func(func(_ context.Context, a Args) (any, error) {
			if !contains(a.Get(0), a.Get(1)) {
				return nil, &AssertionError{assertMsg(a, 2, fmt.Sprintf("%s does not contain %s", clip(Inspect(a.Get(0))), Inspect(a.Get(1))))}
			}
			return nil, nil
		}),
		"fail": Func(func(_ context.Context, a Args) (any, error) {
			msg, _ := a.Get(0).(string)
			if msg == "" {
				msg = "assert.fail()"
			}
			return nil, &AssertionError{msg}
		}),
		"throws": Func(func(ctx context.Context, a Args) (any, error) {
			fn, err := a.Callable(0)
			if err != nil {
				return nil, err
			}
			_, callErr := fn(ctx)
			if callErr == nil {
				return nil, &AssertionError{assertMsg(a, 2, "expected the function to throw")}
			}
			if ctx.Err() != nil { // an interrupt is not the error the caller asked about
				return nil, callErr
			}
			if pat, ok := a.Get(1).(string); ok && pat != "" {
				re, err := compileRe(pat)
				if err != nil {
					return nil, err
				}
				if !re.MatchString(callErr.Error()) {
					return nil, &AssertionError{assertMsg(a, 2, fmt.Sprintf("error %q does not match /%s/", callErr.Error(), pat))}
				}
			}
			return callErr.Error(), nil
		}),
	}}
}

// inequality says how got differs from want: both values (long ones cut), then, for
// containers, the paths that differ.
func inequality(got, want any) string {
	msg := fmt.Sprintf("expected %s, got %s", clip(Inspect(want)), clip(Inspect(got)))
	if d := Diff(got, want); len(d) > 0 {
		msg += "\n  " + strings.Join(d, "\n  ")
	}
	return msg
}

// clip shortens a rendering for a one-line message.
func clip(s string) string {
	const max = 200
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}

func contains(h, n any) bool {
	switch x := h.(type) {
	case string:
		s, ok := n.(string)
		return ok && strings.Contains(x, s)
	case []any:
		for _, e := range x {
			if DeepEqual(e, n) {
				return true
			}
		}
	case SetValue:
		for _, e := range x.Items {
			if DeepEqual(e, n) {
				return true
			}
		}
	case MapValue:
		for _, e := range x.Entries {
			if DeepEqual(e[0], n) {
				return true
			}
		}
	case map[string]any:
		k, ok := n.(string)
		if ok {
			_, ok = x[k]
		}
		return ok
	}
	return false
}

// Truthy applies the script notion of truth shared by both languages: nil, false, 0 and ""
// are false (Lua would call 0 and "" true; assertions follow JS so a test means the same in both).
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	}
	if f, ok := ToFloat(v); ok {
		return f != 0 && f == f
	}
	return true
}
