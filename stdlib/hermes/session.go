package hermes

import (
	"context"
	"fmt"
	"maps"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/stdlib"
)

// session is the script object for one engine session.
func (a *API) session(s *engine.Session) stdlib.Object {
	str := func(f func(ctx context.Context, s string) (any, error)) stdlib.Func {
		return func(ctx context.Context, args stdlib.Args) (any, error) {
			v, err := args.String(0)
			if err != nil {
				return nil, err
			}
			return f(ctx, v)
		}
	}
	return stdlib.Object{
		"id": s.ID(),
		"info": stdlib.Func(func(context.Context, stdlib.Args) (any, error) {
			info, _ := toMap(s.Info()).(map[string]any)
			if ctx, ok := toMap(s.Context()).(map[string]any); ok && info != nil {
				maps.Copy(info, ctx) // context_used, context_max, context_percent, …
			}
			return info, nil
		}),
		"snapshot": stdlib.Func(func(context.Context, stdlib.Args) (any, error) { return toMap(s.Snapshot()), nil }),
		"requests": stdlib.Func(func(context.Context, stdlib.Args) (any, error) {
			out := []any{}
			for _, r := range s.OpenRequests() {
				out = append(out, requestView(r))
			}
			return out, nil
		}),
		"prompt": stdlib.Func(func(ctx context.Context, args stdlib.Args) (any, error) {
			text, err := args.String(0)
			if err != nil {
				return nil, err
			}
			return a.prompt(ctx, s, text)
		}),
		"run": stdlib.Func(func(ctx context.Context, args stdlib.Args) (any, error) {
			text, err := args.String(0)
			if err != nil {
				return nil, err
			}
			h, err := parseHandlers(args.Get(1))
			if err != nil {
				return nil, err
			}
			adm, f, err := a.run(ctx, s, text)
			if err != nil {
				return nil, err
			}
			if adm.Status != engine.AdmitStarted {
				f.Close()
				return nil, fmt.Errorf("the prompt was %s, not started (%s); use prompt() to see what happened", adm.Status, adm.Message)
			}
			return a.drive(ctx, s, f, h)
		}),
		"events": stdlib.Func(func(_ context.Context, args stdlib.Args) (any, error) {
			o, err := args.Map(0)
			if err != nil {
				return nil, err
			}
			since := s.LastSeq()
			if f, ok := stdlib.ToFloat(o["since"]); ok {
				since = uint64(f)
			}
			follow, explicit := o["follow"].(bool)
			if _, given := o["follow"]; given && !explicit {
				return nil, fmt.Errorf("%w: events: follow must be true or false", stdlib.ErrArgument)
			}
			for k := range o {
				if k != "since" && k != "follow" {
					return nil, fmt.Errorf("%w: events: unknown option %q (since, follow)", stdlib.ErrArgument, k)
				}
			}
			if explicit && !follow {
				// What is stored, then the end: a loop over it terminates.
				evs, ok := s.EventsSince(since)
				if !ok {
					return nil, fmt.Errorf("events: seq %d is older than the session's journal window; read s.history() instead", since)
				}
				i := 0
				return stdlib.IteratorFunc(func(context.Context) (any, bool, error) {
					if i >= len(evs) {
						return nil, false, nil
					}
					i++
					return toMap(evs[i-1]), true, nil
				}), nil
			}
			sub := a.subscribe(s, since)
			last, warned, closed := since, false, false
			return stdlib.IteratorFunc(func(ctx context.Context) (any, bool, error) {
				if closed {
					return nil, false, nil
				}
				if !explicit && !warned && last >= s.LastSeq() {
					warned = true
					a.o.Warn(fmt.Sprintf("s.events() on session %s has read every stored event and now waits for new ones; pass {follow: false} to stop at the stored events, {follow: true} to silence this", s.ID()))
				}
				ev, err := sub.Next(ctx)
				if err != nil {
					return nil, false, err
				}
				last = ev.Seq
				if ev.Type == engine.EvSessionClosed {
					sub.Close()
					closed = true
				}
				return toMap(ev), true, nil
			}), nil
		}),
		"answer": stdlib.Func(func(_ context.Context, args stdlib.Args) (any, error) {
			id, err := args.String(0)
			if err != nil {
				return nil, err
			}
			kind := ""
			for _, r := range s.OpenRequests() {
				if r.ID == id {
					kind = r.Kind
				}
			}
			if kind == "" {
				return nil, fmt.Errorf("%w: %q", engine.ErrUnknownRequest, id)
			}
			ans, err := answerFor(kind, args.Get(1))
			if err != nil {
				return nil, err
			}
			return nil, s.Answer(id, ans)
		}),
		"withdraw": stdlib.Func(func(_ context.Context, args stdlib.Args) (any, error) {
			id, err := args.String(0)
			if err != nil {
				return nil, err
			}
			reason, err := args.OptString(1, "withdrawn by the script")
			if err != nil {
				return nil, err
			}
			return nil, s.Withdraw(id, reason)
		}),
		"steer": str(func(_ context.Context, text string) (any, error) {
			r, err := s.Steer(text)
			if err != nil {
				return nil, err
			}
			return r.ID, nil
		}),
		"interrupt": stdlib.Func(func(_ context.Context, args stdlib.Args) (any, error) {
			reason, err := args.OptString(0, "user")
			if err != nil {
				return nil, err
			}
			return s.Interrupt(reason), nil
		}),
		"branch": stdlib.Func(func(ctx context.Context, args stdlib.Args) (any, error) {
			o, err := args.Map(0)
			if err != nil {
				return nil, err
			}
			title, err := optString(o, "title")
			if err != nil {
				return nil, err
			}
			upto, _ := stdlib.ToFloat(o["upto_row_id"])
			child, err := a.o.Engine.Branch(ctx, s.ID(), engine.BranchOptions{UptoRowID: uint64(upto), Title: title, Source: a.o.Source})
			if err != nil {
				return nil, err
			}
			if err := a.bind(child, o); err != nil {
				return nil, err
			}
			a.hold(child, 0)
			return a.session(child), nil
		}),
		"history": stdlib.Func(func(ctx context.Context, args stdlib.Args) (any, error) {
			o, err := args.Map(0)
			if err != nil {
				return nil, err
			}
			var q store.RowQuery
			if n, ok := stdlib.ToFloat(o["tail"]); ok && n > 0 {
				q.Limit, q.Tail = int(n), true
			}
			if n, ok := stdlib.ToFloat(o["after"]); ok {
				q.AfterID = uint64(n)
			}
			rows, err := s.History(ctx, q)
			if err != nil {
				return nil, err
			}
			out := toMap(rows)
			if out == nil {
				out = []any{}
			}
			return out, nil
		}),
		"set_model": str(func(ctx context.Context, m string) (any, error) { return s.SetModel(ctx, m) }),
		"set_title": str(func(ctx context.Context, t string) (any, error) { return nil, s.SetTitle(ctx, t) }),
		"wait":      stdlib.Func(func(ctx context.Context, _ stdlib.Args) (any, error) { return nil, s.WaitIdle(ctx) }),
		"close": stdlib.Func(func(ctx context.Context, args stdlib.Args) (any, error) {
			reason, err := args.OptString(0, "closed by the script")
			if err != nil {
				return nil, err
			}
			return nil, s.Close(ctx, reason)
		}),
	}
}

// prompt submits text and returns a turn object whose events and outcome the script reads.
func (a *API) prompt(ctx context.Context, s *engine.Session, text string) (any, error) {
	start := s.LastSeq() // the turn's events come after this: t.events() replays from here
	adm, f, err := a.run(ctx, s, text)
	if err != nil {
		return nil, err
	}
	started := adm.Status == engine.AdmitStarted
	if !started {
		f.Close()
	}
	done := !started
	var outcome any
	return stdlib.Object{
		"id":      adm.TurnID,
		"status":  adm.Status,
		"message": adm.Message,
		"events": stdlib.Func(func(context.Context, stdlib.Args) (any, error) {
			// Every call replays the turn from its start: what the journal holds of it first,
			// then (while the turn runs) the follow, skipping what was replayed.
			if !started {
				return stdlib.IteratorFunc(func(context.Context) (any, bool, error) { return nil, false, nil }), nil
			}
			stored, ok := s.EventsSince(start)
			if !ok {
				return nil, fmt.Errorf("t.events(): the turn's first events have left the session's journal window; read s.history() instead")
			}
			stored = turnEvents(stored, adm.TurnID)
			var seen uint64
			return stdlib.IteratorFunc(func(ctx context.Context) (any, bool, error) {
				if len(stored) > 0 {
					ev := stored[0]
					stored, seen = stored[1:], ev.Seq
					if d, ok := ev.Data.(engine.Outcome); ok && !done {
						done, outcome = true, toMap(d)
						f.Close()
					}
					return toMap(ev), true, nil
				}
				for !done {
					ev, err := f.Next(ctx)
					if err != nil {
						return nil, false, err
					}
					if d, ok := ev.Data.(engine.Outcome); ok {
						done, outcome = true, toMap(d)
						f.Close()
					}
					if ev.Seq != 0 && ev.Seq <= seen {
						continue // replayed from the journal already
					}
					return toMap(ev), true, nil
				}
				return nil, false, nil
			}), nil
		}),
		"wait": stdlib.Func(func(ctx context.Context, args stdlib.Args) (any, error) {
			if done {
				return outcome, nil
			}
			h, err := parseHandlers(args.Get(0))
			if err != nil {
				return nil, err
			}
			out, err := a.drive(ctx, s, f, h)
			if err == nil {
				done, outcome = true, out
			}
			return out, err
		}),
	}, nil
}

// turnEvents picks from the journal events after the prompt was submitted what the turn's
// Follow yields for a prompt that started at once: its own events, the session's events that
// belong to no turn and every request.open, ending with the turn's message.complete.
func turnEvents(evs []engine.Event, turnID string) []engine.Event {
	var out []engine.Event
	for _, ev := range evs {
		if ev.TurnID == turnID || ev.TurnID == "" || ev.Type == engine.EvRequestOpen {
			out = append(out, ev)
		}
		if ev.TurnID == turnID && ev.Type == engine.EvMessageComplete {
			break
		}
	}
	return out
}
