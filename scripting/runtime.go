package scripting

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hermes-go/hermes/scripting/internal/guard"
	"github.com/hermes-go/hermes/scripting/js"
	"github.com/hermes-go/hermes/scripting/lua"
	"github.com/hermes-go/hermes/stdlib"
)

// RuntimeOptions configure a script runtime (hermes run, hermes repl).
type RuntimeOptions struct {
	// Modules are offered through require, after the standard ones (json, log, time, assert,
	// re, path) and the granted ones (fs, http).
	Modules []*stdlib.Module
	// Globals are preloaded as global variables.
	Globals map[string]any
	// Stdout receives print and console.log; Stderr console.warn and console.error.
	Stdout, Stderr io.Writer
	Logger         *slog.Logger
	Grants         stdlib.Grants
	HTTPClient     *http.Client
	// Timeout bounds one Run or Eval (0: none); MemoryLimit bounds the heap growth during one
	// (0: none). Both interrupt the script like an uncaught error.
	Timeout     time.Duration
	MemoryLimit int64
	// ModuleRoot is the directory file modules are loaded from and confined to (JS
	// require("./x.js") and import, Lua require "x"): the script's directory. "" allows none.
	ModuleRoot string
}

// scriptVM is what the JS and Lua VMs have in common for whole scripts.
type scriptVM interface {
	RunFile(ctx context.Context, name, src string) error
	Eval(ctx context.Context, name, src string) (any, error)
	Call(ctx context.Context, fn stdlib.Callable) error
	Interrupt(reason error)
	Reset()
	Globals() []string
	Members(expr string) []string
	SetMeter(m guard.Meter)
	Tripped() error
}

// Runtime runs whole scripts and REPL input in one VM. It belongs to the goroutine that
// uses it; Interrupt may be called from anywhere.
type Runtime struct {
	lang  string
	vm    scriptVM
	close func()
	o     RuntimeOptions
	g     *guard.Guard
	slot  *guard.Slot
}

// StdModules are the modules every script may require, plus the granted capabilities.
func StdModules(source string, logger *slog.Logger, grants stdlib.Grants, client *http.Client) ([]*stdlib.Module, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mods := []*stdlib.Module{stdlib.JSON(), stdlib.Log(logger, source), stdlib.Time(), stdlib.Assert(), stdlib.Re(), stdlib.Path()}
	granted, err := grants.Modules(client)
	if err != nil {
		return nil, err
	}
	return append(mods, granted...), nil
}

// NewRuntime makes a runtime for lang ("js" or "lua"); source names the script in logs.
func NewRuntime(lang, source string, o RuntimeOptions) (*Runtime, error) {
	mods, err := StdModules(source, o.Logger, o.Grants, o.HTTPClient)
	if err != nil {
		return nil, err
	}
	mods = append(mods, o.Modules...)
	r := &Runtime{lang: lang, o: o, close: func() {}}
	switch lang {
	case "js":
		vm, err := js.New(js.Options{Modules: mods, Globals: o.Globals, Stdout: o.Stdout, Stderr: o.Stderr, MaxCallStack: 10000, Root: o.ModuleRoot})
		if err != nil {
			return nil, err
		}
		r.vm = vm
	case "lua":
		vm, err := lua.New(lua.Options{Modules: mods, Globals: o.Globals, Stdout: o.Stdout, Stderr: o.Stderr, MaxCallStack: 10000, Root: o.ModuleRoot})
		if err != nil {
			return nil, err
		}
		r.vm, r.close = vm, vm.Close
	default:
		return nil, fmt.Errorf("%q: %w", lang, ErrUnknownLanguage)
	}
	if o.Timeout > 0 || o.MemoryLimit > 0 {
		r.g = guard.New(10*time.Millisecond, o.MemoryLimit)
		r.slot = r.g.NewSlot()
		r.vm.SetMeter(r.slot)
	}
	return r, nil
}

// Close releases the VM and the watchdog.
func (r *Runtime) Close() {
	if r.g != nil {
		r.g.Close()
	}
	r.close()
}

// guarded runs f under the timeout and memory watchdog, when configured.
func (r *Runtime) guarded(ctx context.Context, f func(ctx context.Context) error) error {
	r.vm.Reset()
	if r.slot == nil {
		err := f(ctx)
		if t := r.vm.Tripped(); t != nil && (err == nil || !errors.Is(err, t)) {
			err = reasonError(t, err)
		}
		return err
	}
	var deadline time.Time
	if r.o.Timeout > 0 {
		deadline = time.Now().Add(r.o.Timeout)
	}
	r.slot.Begin(r.vm, ctx, deadline)
	err := f(ctx)
	reason := r.slot.End()
	if reason == nil {
		reason = r.vm.Tripped()
	}
	if reason != nil && (err == nil || !errors.Is(err, reason)) {
		err = reasonError(reason, err)
	}
	return err
}

// Run runs a whole script. ctx ending interrupts it.
func (r *Runtime) Run(ctx context.Context, name, src string) error {
	return r.guarded(ctx, func(ctx context.Context) error { return r.vm.RunFile(ctx, name, src) })
}

// Call runs a script function the script handed to the host (a test registered with test()),
// under the same timeout and memory limit as Run. ctx ending interrupts it.
func (r *Runtime) Call(ctx context.Context, fn stdlib.Callable) error {
	return r.guarded(ctx, func(ctx context.Context) error { return r.vm.Call(ctx, fn) })
}

// Eval evaluates REPL input and returns its value.
func (r *Runtime) Eval(ctx context.Context, src string) (out any, err error) {
	err = r.guarded(ctx, func(ctx context.Context) error {
		out, err = r.vm.Eval(ctx, "repl", src)
		return err
	})
	return out, err
}

// Incomplete reports whether src needs more lines to be a complete input.
func (r *Runtime) Incomplete(src string) bool {
	if r.lang == "js" {
		return js.Incomplete(src)
	}
	return lua.Incomplete(src)
}

var tailName = regexp.MustCompile(`[A-Za-z_$][\w$]*(?:[.:][A-Za-z_$][\w$]*)*[.:]?$`)

// Complete returns completions of line: the global names, or the members of the object
// named before the last dot (or colon, in Lua), as whole lines.
func (r *Runtime) Complete(line string) []string {
	loc := tailName.FindStringIndex(line)
	if loc == nil {
		return nil
	}
	head, word := line[:loc[0]], line[loc[0]:]
	sep := strings.LastIndexAny(word, ".:")
	var names []string
	prefix := word
	if sep >= 0 {
		names = r.vm.Members(strings.ReplaceAll(word[:sep], ":", "."))
		head, prefix = head+word[:sep+1], word[sep+1:]
	} else {
		names = r.vm.Globals()
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, head+n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
