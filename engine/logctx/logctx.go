// Package logctx carries the identity of the work a context belongs to (session and turn) so
// that a log handler can stamp every line written under it with session_id, turn_id and the
// trace id of the span the context carries. The engine puts the ids in a turn's context; the
// command's logger (Handler) reads them.
package logctx

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

type key struct{}

type ids struct{ session, turn string }

// With returns ctx carrying a session id and a turn id (either may be empty).
func With(ctx context.Context, sessionID, turnID string) context.Context {
	return context.WithValue(ctx, key{}, ids{sessionID, turnID})
}

// From returns the session and turn ids ctx carries.
func From(ctx context.Context) (sessionID, turnID string) {
	v, _ := ctx.Value(key{}).(ids)
	return v.session, v.turn
}

// Handler wraps next so that a record logged with a context gets session_id, turn_id (when
// the context carries them, With) and trace_id, span_id (when it carries a valid span).
func Handler(next slog.Handler) slog.Handler { return &handler{next: next} }

type handler struct{ next slog.Handler }

var _ slog.Handler = (*handler)(nil)

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sid, tid := From(ctx); sid != "" || tid != "" {
			if sid != "" {
				r.AddAttrs(slog.String("session_id", sid))
			}
			if tid != "" {
				r.AddAttrs(slog.String("turn_id", tid))
			}
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{next: h.next.WithAttrs(as)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name)}
}
