// Package scripting runs policy hooks and scripts written in JavaScript or Lua inside the
// process. A policy file is loaded once, compiled once, and run in a pool of VMs, one
// goroutine each; every hook call has a deadline and a heap budget, enforced by interrupting
// the VM. The package implements the engine's policy interfaces (policy.Approver,
// BusyInputPolicy, Steerer, Router, Compactor); the engine never imports it.
//
// A hook returns a typed decision, which is checked before the engine sees it. A hook that
// throws, overruns or returns something of the wrong shape is an error that names the script's
// file and line; the engine then fails closed (approval → deny, other hooks → the built-in
// default) and records the reason as an event. A hook the script does not define is the Go
// default.
package scripting

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/internal/textdist"
	"github.com/hermes-go/hermes/scripting/internal/guard"
	"github.com/hermes-go/hermes/scripting/js"
	"github.com/hermes-go/hermes/scripting/lua"
	"github.com/hermes-go/hermes/stdlib"
)

// Hook names, as a policy file defines them.
const (
	HookApproval  = "approval"
	HookBusyInput = "busy_input"
	HookSteer     = "steer"
	HookRoute     = "route"
	HookCompact   = "compact"
)

// Hooks lists every hook name.
var Hooks = []string{HookApproval, HookBusyInput, HookSteer, HookRoute, HookCompact}

// Errors callers branch on.
var (
	// ErrTimeout: the hook ran past its deadline and was interrupted.
	ErrTimeout = guard.ErrTimeout
	// ErrMemoryLimit: the heap grew past the budget while the hook ran; it was interrupted.
	ErrMemoryLimit = guard.ErrMemoryLimit
	// ErrStackLimit: the hook recursed past the call depth limit.
	ErrStackLimit = guard.ErrStackLimit
	// ErrBadDecision: the hook returned something that is not a decision of its kind.
	ErrBadDecision = errors.New("invalid decision")
	// ErrHookPanic: host code panicked under the hook; the VM was replaced.
	ErrHookPanic = errors.New("hook panicked")
	// ErrExamples: the policy's own examples do not hold.
	ErrExamples = errors.New("policy examples failed")
	// ErrUnknownLanguage: the file is neither .js nor .lua.
	ErrUnknownLanguage = errors.New("unknown script language (want .js, .ts or .lua)")
	// ErrClosed: the policy was closed.
	ErrClosed = errors.New("policy closed")
)

// Options configures LoadPolicy. Zero values take the documented defaults.
type Options struct {
	// Timeout is the deadline of one hook call, enforced by interrupting the VM (default 250ms).
	Timeout time.Duration
	// MemoryLimit is how far the Go heap may grow while one hook call runs (default 128 MiB;
	// negative disables the check).
	MemoryLimit int64
	// Workers is the number of VMs, each with its own goroutine (default GOMAXPROCS, at most 8).
	Workers int
	// Grants are the capabilities scripts get (fs, http); none by default.
	Grants stdlib.Grants
	// HTTPClient is used by the http module when granted.
	HTTPClient *http.Client
	// Logger receives the log module's records and hook failures (default: discard).
	Logger *slog.Logger
	// Fallback answers the hooks the script does not define; its nil members (and a zero
	// Fallback) mean the built-in Go defaults.
	Fallback policy.Set
	// Classify fills in what the engine would for an example's approval input that names no
	// patterns: the command text and the dangerous-pattern keys of a tool call.
	Classify func(tool string, args []byte, cwd string) (command string, patterns []string)
	// SkipExamples loads without checking the policy's examples (policy test checks them itself).
	SkipExamples bool
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 250 * time.Millisecond
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = 128 << 20
	}
	if o.Workers <= 0 {
		o.Workers = min(runtime.GOMAXPROCS(0), 8)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Policy is a loaded policy file. It implements policy.Approver, BusyInputPolicy, Steerer and
// Router; Set returns only the hooks the file defines, so the engine uses its defaults for
// the rest.
type Policy struct {
	name     string
	lang     string
	hooks    map[string]bool
	examples []Example
	pool     *pool
	o        Options
}

var (
	_ policy.Approver        = (*Policy)(nil)
	_ policy.BusyInputPolicy = (*Policy)(nil)
	_ policy.Steerer         = (*Policy)(nil)
	_ policy.Router          = (*Policy)(nil)
	_ policy.Compactor       = (*Policy)(nil)
	_ io.Closer              = (*Policy)(nil)
)

// LoadPolicy reads a policy file, picking JavaScript or Lua by its extension, checks its
// examples, and returns the hooks it defines (others are left nil for the engine's defaults)
// and a Closer that stops its VMs.
func LoadPolicy(path string, o Options) (policy.Set, io.Closer, error) {
	p, err := Open(path, o)
	if err != nil {
		return policy.Set{}, nil, err
	}
	return p.Set(), p, nil
}

// Open reads and loads a policy file (see LoadPolicy).
func Open(path string, o Options) (*Policy, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Load(filepath.Base(path), string(src), o)
}

// Lang returns "js" or "lua" for a file name, by extension.
func Lang(name string) (string, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".js", ".cjs", ".mjs", ".ts", ".mts", ".cts":
		return "js", nil
	case ".lua":
		return "lua", nil
	}
	return "", fmt.Errorf("%s: %w", name, ErrUnknownLanguage)
}

// Load loads a policy from source; name (its extension picks the language) is used in
// messages.
func Load(name, src string, o Options) (*Policy, error) {
	o.defaults()
	lang, err := Lang(name)
	if err != nil {
		return nil, err
	}
	mods, err := policyModules(name, o)
	if err != nil {
		return nil, err
	}
	var newVM func() (hookVM, error)
	var lines []int
	switch lang {
	case "js":
		prg, err := js.CompilePolicy(name, src)
		if err != nil {
			return nil, err
		}
		lines = prg.ExampleLines()
		newVM = func() (hookVM, error) {
			vm, err := js.New(js.Options{Modules: mods, MaxCallStack: 256})
			if err != nil {
				return nil, err
			}
			return loadJS(vm, prg, o.Timeout)
		}
	case "lua":
		prg, err := lua.CompilePolicy(name, src)
		if err != nil {
			return nil, err
		}
		lines = prg.ExampleLines()
		newVM = func() (hookVM, error) {
			vm, err := lua.New(lua.Options{Modules: mods, MaxCallStack: 256})
			if err != nil {
				return nil, err
			}
			return loadLua(vm, prg, o.Timeout)
		}
	}
	first, err := newVM()
	if err != nil {
		return nil, err
	}
	p := &Policy{name: name, lang: lang, hooks: map[string]bool{}, o: o}
	for _, h := range Hooks {
		p.hooks[h] = first.Has(h)
	}
	err = unknownHooks(name, first.Functions())
	if err == nil {
		err = asyncHooks(name, first)
	}
	var raw any
	if err == nil {
		raw, err = first.Export("examples")
	}
	if err == nil {
		p.examples, err = parseExamples(name, raw, lines)
	}
	if err != nil {
		first.Close()
		return nil, err
	}
	p.pool = newPool(o.Workers, o.Timeout, o.MemoryLimit, first, newVM)
	if !o.SkipExamples {
		if failed := p.failures(context.Background()); len(failed) > 0 {
			p.Close()
			return nil, fmt.Errorf("%s: %w:\n  %s", name, ErrExamples, strings.Join(failed, "\n  "))
		}
	}
	return p, nil
}

// ErrUnknownHook: the policy exports a function whose name is close to a hook's but is none
// (a misspelt hook would otherwise be silently replaced by the built-in default).
var ErrUnknownHook = errors.New("unknown hook")

// unknownHooks fails on an exported function that looks like a hook and is not one: a name
// within one or two edits of a hook's (ignoring case, "_" and "-"), such as aproval,
// busyInput or routes.
func unknownHooks(file string, fns []string) error {
	for _, f := range fns {
		if contains(Hooks, f) {
			continue
		}
		norm := func(s string) string { return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s)) }
		for _, h := range Hooks {
			d := textdist.Levenshtein(norm(f), norm(h))
			if d <= 1 || (d == 2 && len(h) > 5) {
				return fmt.Errorf("%s: %w %q: did you mean %q? (hooks: %s; a helper must not be exported under a name this close to a hook's)",
					file, ErrUnknownHook, f, h, strings.Join(Hooks, ", "))
			}
		}
	}
	return nil
}

// asyncHooks refuses a policy whose hook is an async function: it would return a Promise on
// every call, never a decision.
func asyncHooks(file string, vm hookVM) error {
	a, ok := vm.(interface{ Async() []string })
	if !ok {
		return nil
	}
	for _, f := range a.Async() {
		if contains(Hooks, f) {
			return fmt.Errorf("%s: %w (%s is an async function, so it returns a Promise; drop async and await)", file, js.ErrAsyncHook, f)
		}
	}
	return nil
}

// policyModules are the modules a policy may require.
func policyModules(name string, o Options) ([]*stdlib.Module, error) {
	mods := []*stdlib.Module{stdlib.JSON(), stdlib.Log(o.Logger, name), stdlib.Time(), stdlib.Assert(), stdlib.Re(), stdlib.Path(), hermesPolicyModule()}
	granted, err := o.Grants.Modules(o.HTTPClient)
	if err != nil {
		return nil, err
	}
	return append(mods, granted...), nil
}

// hermesPolicyModule is what require("hermes") gives a policy: decision helpers and
// constants. Policies cannot drive sessions (a hook runs inside the turn it decides about).
func hermesPolicyModule() *stdlib.Module {
	decision := func(kind string) stdlib.Func {
		return func(_ context.Context, a stdlib.Args) (any, error) {
			d := map[string]any{"decision": kind}
			if r, ok := a.Get(0).(string); ok && r != "" {
				d["reason"] = r
			}
			return d, nil
		}
	}
	return &stdlib.Module{Name: "hermes", Members: stdlib.Object{
		"allow": decision(policy.Allow), "deny": decision(policy.Deny), "ask": decision(policy.Ask),
		"hooks": stdlib.Object{"approval": HookApproval, "busy_input": HookBusyInput, "steer": HookSteer, "route": HookRoute, "compact": HookCompact},
	}}
}

type jsHooks struct {
	*js.Policy
	vm *js.VM
}

func (h jsHooks) Interrupt(reason error) { h.vm.Interrupt(reason) }
func (h jsHooks) Close()                 {}
func (h jsHooks) SetMeter(m guard.Meter) { h.vm.SetMeter(m) }
func (h jsHooks) Tripped() error         { return h.vm.Tripped() }

func loadJS(vm *js.VM, prg *js.Program, timeout time.Duration) (hookVM, error) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout*4, fmt.Errorf("%w while loading %s", ErrTimeout, prg.Name()))
	defer cancel()
	pol, err := vm.LoadPolicy(ctx, prg)
	if err != nil {
		return nil, err
	}
	vm.Reset()
	return jsHooks{pol, vm}, nil
}

type luaHooks struct {
	*lua.Policy
	vm *lua.VM
}

func (h luaHooks) Interrupt(reason error) { h.vm.Interrupt(reason) }
func (h luaHooks) Close()                 { h.vm.Close() }
func (h luaHooks) SetMeter(m guard.Meter) { h.vm.SetMeter(m) }
func (h luaHooks) Tripped() error         { return h.vm.Tripped() }

func loadLua(vm *lua.VM, prg *lua.Program, timeout time.Duration) (hookVM, error) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout*4, fmt.Errorf("%w while loading %s", ErrTimeout, prg.Name()))
	defer cancel()
	pol, err := vm.LoadPolicy(ctx, prg)
	if err != nil {
		vm.Close()
		return nil, err
	}
	vm.Reset()
	return luaHooks{pol, vm}, nil
}

// Name is the policy file name; Lang is "js" or "lua".
func (p *Policy) Name() string { return p.name }

// Lang is "js" or "lua".
func (p *Policy) Lang() string { return p.lang }

// Has reports whether the file defines hook.
func (p *Policy) Has(hook string) bool { return p.hooks[hook] }

// Set returns the engine hooks: this policy for the hooks the file defines, Options.Fallback
// (or the built-in defaults) for the others.
func (p *Policy) Set() policy.Set {
	s := p.o.Fallback
	d := policy.Defaults{}
	if s.Approver == nil {
		s.Approver = d
	}
	if s.Busy == nil {
		s.Busy = d
	}
	if s.Steer == nil {
		s.Steer = d
	}
	if s.Route == nil {
		s.Route = d
	}
	if s.Compact == nil {
		s.Compact = d
	}
	if p.hooks[HookApproval] {
		s.Approver = p
	}
	if p.hooks[HookBusyInput] {
		s.Busy = p
	}
	if p.hooks[HookSteer] {
		s.Steer = p
	}
	if p.hooks[HookRoute] {
		s.Route = p
	}
	if p.hooks[HookCompact] {
		s.Compact = p
	}
	return s
}

// Own returns only the hooks the file defines (nil members for the others), for layering over
// another policy (Sessions.Bind).
func (p *Policy) Own() policy.Set {
	var s policy.Set
	if p.hooks[HookApproval] {
		s.Approver = p
	}
	if p.hooks[HookBusyInput] {
		s.Busy = p
	}
	if p.hooks[HookSteer] {
		s.Steer = p
	}
	if p.hooks[HookRoute] {
		s.Route = p
	}
	if p.hooks[HookCompact] {
		s.Compact = p
	}
	return s
}

// Close stops the VMs after the calls in progress.
func (p *Policy) Close() error {
	p.pool.close()
	return nil
}

// call runs a hook and logs failures (the engine turns them into events).
func (p *Policy) call(ctx context.Context, hook string, in any) (any, int, error) {
	out, line, err := p.pool.do(ctx, hook, in)
	if err != nil {
		err = p.hookError(hook, line, err)
		p.o.Logger.Warn("policy hook failed", "policy", p.name, "hook", hook, "err", err)
	}
	return out, line, err
}

// hookError puts the file (and line when the script error lacks one) in front of err.
func (p *Policy) hookError(hook string, line int, err error) error {
	var se *stdlib.ScriptError
	if errors.As(err, &se) && se.Line > 0 {
		return fmt.Errorf("%s hook: %w", hook, err)
	}
	if line > 0 {
		return fmt.Errorf("%s:%d: %s hook: %w", p.name, line, hook, err)
	}
	return fmt.Errorf("%s: %s hook: %w", p.name, hook, err)
}

// badDecision reports a decision of the wrong shape at the line that returned it.
func (p *Policy) badDecision(hook string, line int, out any, err error) error {
	where := p.name
	if line > 0 {
		where = fmt.Sprintf("%s:%d", p.name, line)
	} else if out == nil {
		err = fmt.Errorf("%w (no return statement ran)", err)
	}
	e := fmt.Errorf("%s: %s returned %s: %w", where, hook, clip(stdlib.Format(out), 200), err)
	p.o.Logger.Warn("policy hook failed", "policy", p.name, "hook", hook, "err", e)
	return e
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Approve runs the approval hook. On any failure the decision is deny (the engine denies on
// error as well).
func (p *Policy) Approve(ctx context.Context, in policy.ApprovalInput) (policy.ApprovalDecision, error) {
	out, line, err := p.call(ctx, HookApproval, approvalInput(in))
	if err != nil {
		return policy.ApprovalDecision{Decision: policy.Deny}, err
	}
	d, err := approvalDecision(out)
	if err != nil {
		return policy.ApprovalDecision{Decision: policy.Deny}, p.badDecision(HookApproval, line, out, err)
	}
	return d, nil
}

// BusyInput runs the busy_input hook.
func (p *Policy) BusyInput(ctx context.Context, in policy.BusyInput) (policy.BusyDecision, error) {
	out, line, err := p.call(ctx, HookBusyInput, busyInput(in))
	if err != nil {
		return policy.BusyDecision{}, err
	}
	d, err := busyDecision(out)
	if err != nil {
		return policy.BusyDecision{}, p.badDecision(HookBusyInput, line, out, err)
	}
	return d, nil
}

// Steer runs the steer hook.
func (p *Policy) Steer(ctx context.Context, in policy.SteerInput) (policy.SteerDecision, error) {
	out, line, err := p.call(ctx, HookSteer, steerInput(in))
	if err != nil {
		return policy.SteerDecision{}, err
	}
	d, err := steerDecision(out, in.Text)
	if err != nil {
		return policy.SteerDecision{}, p.badDecision(HookSteer, line, out, err)
	}
	return d, nil
}

// Route runs the route hook. Fields the hook leaves out keep the requested values.
func (p *Policy) Route(ctx context.Context, in policy.RouteInput) (policy.RouteDecision, error) {
	out, line, err := p.call(ctx, HookRoute, routeInput(in))
	if err != nil {
		return policy.RouteDecision{}, err
	}
	d, err := routeDecision(out, in)
	if err != nil {
		return policy.RouteDecision{}, p.badDecision(HookRoute, line, out, err)
	}
	return d, nil
}

// Compact runs the compact hook.
func (p *Policy) Compact(ctx context.Context, in policy.CompactInput) (policy.CompactDecision, error) {
	out, line, err := p.call(ctx, HookCompact, compactInput(in))
	if err != nil {
		return policy.CompactDecision{}, err
	}
	d, err := compactDecision(out, in)
	if err != nil {
		return policy.CompactDecision{}, p.badDecision(HookCompact, line, out, err)
	}
	return d, nil
}
