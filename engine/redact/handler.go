package redact

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// Handler wraps a slog.Handler so that every record it passes on is redacted: the message and
// every string, error or other value (formatted) go through String, and an attribute whose
// name is a secret name (SecretName) is masked whole. The bare attribute name "key" is the
// exception: Hermes logs store keys under it, so its value only goes through String.
func Handler(next slog.Handler) slog.Handler {
	if h, ok := next.(*handler); ok {
		return h
	}
	return &handler{next: next}
}

// NewLogger returns a logger whose records are redacted before next sees them.
func NewLogger(next slog.Handler) *slog.Logger { return slog.New(Handler(next)) }

type handler struct{ next slog.Handler }

var _ slog.Handler = (*handler)(nil)

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(Attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = Attr(a)
	}
	return &handler{next: h.next.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name)}
}

// Attr redacts one log attribute (groups recursively).
func Attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, x := range g {
			red[i] = Attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	}
	secretName := a.Key != "key" && SecretName(a.Key)
	switch v.Kind() {
	case slog.KindString:
		if secretName {
			return slog.String(a.Key, Secret(v.String()))
		}
		return slog.String(a.Key, String(v.String()))
	case slog.KindAny:
		if v.Any() == nil {
			return slog.Attr{Key: a.Key, Value: v}
		}
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case map[string]string:
			return slog.Any(a.Key, headerMap(x, secretName))
		case http.Header:
			m := make(map[string]string, len(x))
			for k, vs := range x {
				m[k] = strings.Join(vs, ", ")
			}
			return slog.Any(a.Key, headerMap(m, secretName))
		default:
			s = fmt.Sprint(v.Any())
		}
		if secretName {
			return slog.String(a.Key, Secret(s))
		}
		if red := String(s); red != s {
			return slog.String(a.Key, red)
		}
		return slog.Attr{Key: a.Key, Value: v}
	}
	// Numbers, booleans, times and durations carry no secrets.
	return slog.Attr{Key: a.Key, Value: v}
}

// headerMap redacts a logged map such as headers or an environment: a value under a secret
// name (or every value, when the map itself is named like a secret) is masked, the others go
// through String.
func headerMap(m map[string]string, all bool) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if all || SecretName(k) {
			out[k] = Secret(v)
		} else {
			out[k] = String(v)
		}
	}
	return out
}
