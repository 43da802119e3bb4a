// Package hermes is the script API: what require("hermes") gives a JS or Lua script run by
// `hermes run` or typed at `hermes repl`. It drives the engine in-process: create and open
// sessions, prompt and walk their events, answer approvals and clarify questions, steer,
// interrupt, branch and read history. The names are the same in both languages (snake_case);
// Lua may call methods as s:prompt(…) or s.prompt(…).
package hermes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/stdlib"
)

// ExitError ends a script with an exit code (hermes.exit(n)).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// Options configure the module.
type Options struct {
	Engine  *engine.Engine
	Version string
	Args    []string // the script's arguments
	Source  string   // the source recorded on sessions the script creates (default "script")
	// BindPolicy makes the policy file at path decide for the session (create/open {policy}).
	BindPolicy func(sessionID, path string) error
	// Watch is called once for every session the script creates or opens (hermes run --json
	// prints its events).
	Watch func(s *engine.Session, since uint64)
	// Warn reports things the script should know about (an approval denied for want of a handler).
	Warn func(msg string)
	// Fakes, registered with the engine as the "fake" provider, backs hermes.fake_model.
	Fakes *FakeModels
}

// API is the module state: sessions the script holds and the subscriptions it opened.
type API struct {
	o       Options
	mu      sync.Mutex
	subs    []interface{ Close() } // subscriptions and turn follows
	watched map[string]bool
	held    []*engine.Session
}

// New returns the module state; Module is what require gives, Close releases subscriptions.
func New(o Options) *API {
	if o.Source == "" {
		o.Source = "script"
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	return &API{o: o, watched: map[string]bool{}}
}

// Close ends the subscriptions the script left open.
func (a *API) Close() {
	a.mu.Lock()
	subs := a.subs
	a.subs = nil
	a.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
}

// Sessions lists the sessions the script created or opened.
func (a *API) Sessions() []*engine.Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*engine.Session(nil), a.held...)
}

func (a *API) subscribe(s *engine.Session, since uint64) *engine.Subscription {
	sub := s.Subscribe(since)
	a.mu.Lock()
	a.subs = append(a.subs, sub)
	a.mu.Unlock()
	return sub
}

// run submits text through Session.Run; the follow is closed with the module if the script
// leaves it open.
func (a *API) run(ctx context.Context, s *engine.Session, text string) (engine.Admission, *engine.Follow, error) {
	adm, f, err := s.Run(ctx, engine.Prompt{Text: text, Origin: a.o.Source})
	if err != nil {
		return adm, nil, err
	}
	a.mu.Lock()
	a.subs = append(a.subs, f)
	a.mu.Unlock()
	return adm, f, nil
}

func (a *API) hold(s *engine.Session, since uint64) {
	a.mu.Lock()
	first := !a.watched[s.ID()]
	a.watched[s.ID()] = true
	if first {
		a.held = append(a.held, s)
	}
	a.mu.Unlock()
	if first && a.o.Watch != nil {
		a.o.Watch(s, since)
	}
}

// toMap renders any engine value as the plain object a script sees (its JSON form).
func toMap(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	out, err := stdlib.Unmarshal(b)
	if err != nil {
		return nil
	}
	return out
}

func optString(m map[string]any, k string) (string, error) {
	switch v := m[k].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("%w: option %q must be a string, not %s", stdlib.ErrArgument, k, stdlib.TypeName(m[k]))
}

// Module is require("hermes").
func (a *API) Module() *stdlib.Module {
	args := make([]any, len(a.o.Args))
	for i, s := range a.o.Args {
		args[i] = s
	}
	return &stdlib.Module{Name: "hermes", Members: stdlib.Object{
		"version": a.o.Version,
		"args":    args,
		"create":  stdlib.Func(a.create),
		"open":    stdlib.Func(a.open),
		"sessions": stdlib.Func(func(ctx context.Context, args stdlib.Args) (any, error) {
			o, err := args.Map(0)
			if err != nil {
				return nil, err
			}
			limit, _ := stdlib.ToFloat(o["limit"])
			list, err := a.o.Engine.List(ctx, store.ListOptions{Limit: int(limit)})
			if err != nil {
				return nil, err
			}
			return toMap(list), nil
		}),
		"fake_model": stdlib.Func(func(_ context.Context, args stdlib.Args) (any, error) {
			list, ok := args.Get(0).([]any)
			if !ok {
				return nil, fmt.Errorf("%w: fake_model(replies): want a list of {text} or {tool, args}, got %s", stdlib.ErrArgument, stdlib.TypeName(args.Get(0)))
			}
			if a.o.Fakes == nil {
				return nil, errors.New("fake_model: scripted models are not available here")
			}
			return a.o.Fakes.add(list)
		}),
		"exit": stdlib.Func(func(_ context.Context, args stdlib.Args) (any, error) {
			code, err := args.OptInt(0, 0)
			if err != nil {
				return nil, fmt.Errorf("exit(code): %w", err)
			}
			if code < 0 || code > 255 { // a process exit status is one byte: 256 would be 0
				return nil, fmt.Errorf("%w: exit(code): the code must be 0 to 255, got %d", stdlib.ErrArgument, code)
			}
			return nil, &ExitError{Code: int(code)}
		}),
	}}
}

// create: hermes.create({model, cwd, title, id, policy}) → session.
func (a *API) create(ctx context.Context, args stdlib.Args) (any, error) {
	o, err := args.Map(0)
	if err != nil {
		return nil, err
	}
	var co engine.CreateOptions
	for k, dst := range map[string]*string{"model": &co.Model, "cwd": &co.Cwd, "title": &co.Title, "id": &co.ID} {
		if *dst, err = optString(o, k); err != nil {
			return nil, err
		}
	}
	for k := range o {
		switch k {
		case "model", "cwd", "title", "id", "policy":
		default:
			return nil, fmt.Errorf("%w: hermes.create: unknown option %q (model, cwd, title, id, policy)", stdlib.ErrArgument, k)
		}
	}
	if co.Cwd != "" && !filepath.IsAbs(co.Cwd) {
		// A script names folders from where it runs (hermes run, hermes test): the session's
		// tools run there whatever process serves the session later.
		if co.Cwd, err = filepath.Abs(co.Cwd); err != nil {
			return nil, err
		}
	}
	co.Source = a.o.Source
	s, err := a.o.Engine.Create(ctx, co)
	// A fixed title does not fail the script's next run: like the reference, a title already
	// taken gets a number ("ci", "ci #2", "ci #3", …).
	for n := 2; err != nil && errors.Is(err, store.ErrTitleTaken) && co.Title != "" && co.ID == "" && n < 10000; n++ {
		title := co.Title
		co.Title = fmt.Sprintf("%s #%d", title, n)
		s, err = a.o.Engine.Create(ctx, co)
		co.Title = title
	}
	if err != nil {
		return nil, err
	}
	if err := a.bind(s, o); err != nil {
		return nil, err
	}
	a.hold(s, 0)
	return a.session(s), nil
}

// open: hermes.open(id, {policy, model}) → an existing session.
func (a *API) open(ctx context.Context, args stdlib.Args) (any, error) {
	id, err := args.String(0)
	if err != nil {
		return nil, err
	}
	o, err := args.Map(1)
	if err != nil {
		return nil, err
	}
	s, err := a.o.Engine.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	if m, _ := optString(o, "model"); m != "" {
		if _, err := s.SetModel(ctx, m); err != nil {
			return nil, err
		}
	}
	if err := a.bind(s, o); err != nil {
		return nil, err
	}
	a.hold(s, s.LastSeq())
	return a.session(s), nil
}

func (a *API) bind(s *engine.Session, o map[string]any) error {
	path, err := optString(o, "policy")
	if err != nil || path == "" {
		return err
	}
	if a.o.BindPolicy == nil {
		return errors.New("per-session policies are not available here")
	}
	return a.o.BindPolicy(s.ID(), path)
}

// handlers answer requests while a turn is driven by run or wait.
type handlers struct {
	approval, clarify, onEvent stdlib.Callable
	approvalWord               string // a fixed answer instead of a function
}

func parseHandlers(v any) (handlers, error) {
	var h handlers
	m, ok := v.(map[string]any)
	if v != nil && !ok {
		if l, isList := v.([]any); !isList || len(l) != 0 {
			return h, fmt.Errorf("%w: handlers must be an object {approval, clarify, on_event}", stdlib.ErrArgument)
		}
	}
	for k, x := range m {
		switch k {
		case "approval":
			switch f := x.(type) {
			case stdlib.Callable:
				h.approval = f
			case string:
				h.approvalWord = f
			default:
				return h, fmt.Errorf("%w: handlers.approval must be a function or a choice (once, session, always, deny)", stdlib.ErrArgument)
			}
		case "clarify", "on_event":
			f, ok := x.(stdlib.Callable)
			if !ok {
				return h, fmt.Errorf("%w: handlers.%s must be a function", stdlib.ErrArgument, k)
			}
			if k == "clarify" {
				h.clarify = f
			} else {
				h.onEvent = f
			}
		default:
			return h, fmt.Errorf("%w: unknown handler %q (approval, clarify, on_event)", stdlib.ErrArgument, k)
		}
	}
	return h, nil
}

// requestView is what a handler receives: the request's params with its id and kind.
func requestView(r engine.Request) map[string]any {
	m, _ := toMap(r.Payload).(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	m["id"], m["method"], m["session_id"], m["turn_id"] = r.ID, r.Kind, r.SessionID, r.TurnID
	return m
}

// answerFor turns a script's answer into the engine's: a word for the request kind, or an
// object passed as is.
func answerFor(kind string, v any) (map[string]any, error) {
	switch x := v.(type) {
	case map[string]any:
		return x, nil
	case string:
		switch kind {
		case engine.KindApproval:
			return map[string]any{"choice": x}, nil
		case engine.KindClarify:
			return map[string]any{"answer": x}, nil
		}
		return map[string]any{"value": x}, nil
	case []any:
		if kind == engine.KindClarify {
			return map[string]any{"answers": x}, nil
		}
	}
	return nil, fmt.Errorf("%w: an answer is a string or an object, not %s", stdlib.ErrArgument, stdlib.TypeName(v))
}

// handle answers one open request with the handlers; unhandled approvals are denied and
// unhandled questions withdrawn, so a script never hangs on a request it did not expect.
func (a *API) handle(ctx context.Context, s *engine.Session, h handlers, r engine.Request) error {
	var (
		res any
		err error
	)
	switch {
	case r.Kind == engine.KindApproval && h.approval != nil:
		res, err = h.approval(ctx, requestView(r))
	case r.Kind == engine.KindApproval && h.approvalWord != "":
		res = h.approvalWord
	case r.Kind == engine.KindClarify && h.clarify != nil:
		res, err = h.clarify(ctx, requestView(r))
	}
	if err != nil {
		return err
	}
	if res == nil {
		if r.Kind == engine.KindApproval {
			a.o.Warn(fmt.Sprintf("approval %s (%v) denied: no approval handler answered it", r.ID, r.Payload["command"]))
			res = engine.ChoiceDeny
		} else {
			_ = s.Withdraw(r.ID, "the script has no "+r.Kind+" handler")
			return nil
		}
	}
	ans, err := answerFor(r.Kind, res)
	if err != nil {
		return err
	}
	if err := s.Answer(r.ID, ans); err != nil && !errors.Is(err, engine.ErrUnknownRequest) {
		return err // an answer of the wrong shape; a request already gone is fine
	}
	return nil
}

// drive reads a turn's events until its outcome, answering requests on the way.
func (a *API) drive(ctx context.Context, s *engine.Session, f *engine.Follow, h handlers) (any, error) {
	for ev, err := range f.Events(ctx) {
		if err != nil {
			return nil, err
		}
		if h.onEvent != nil {
			if _, err := h.onEvent(ctx, toMap(ev)); err != nil {
				return nil, err
			}
		}
		switch d := ev.Data.(type) {
		case engine.Request:
			if err := a.handle(ctx, s, h, d); err != nil {
				return nil, err
			}
		case engine.Outcome:
			f.Close()
			return toMap(d), nil
		}
	}
	return nil, engine.ErrSessionClosed // not reached: a follow ends with its outcome or an error
}
