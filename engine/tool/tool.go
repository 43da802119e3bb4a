// Package tool defines the Tool interface, the Registry the engine offers to the model, and the
// environment a tool runs in. Built-in tools live in tool/builtin; dangerous-command rules in
// tool/danger.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hermes-go/hermes/engine/model"
)

// Call is one tool invocation requested by the model.
type Call struct {
	ID   string
	Name string
	Args json.RawMessage
}

// Result is what the model sees. IsError marks a model-visible failure (bad arguments, a
// command that failed, a denied approval); Go errors are reserved for infrastructure failures.
type Result struct {
	Content string         `json:"content"`
	IsError bool           `json:"is_error,omitempty"`
	Meta    map[string]any `json:"meta,omitempty"` // rendering hints for surfaces (diff, command, paths)
}

// Errorf builds a model-visible error result.
func Errorf(format string, a ...any) Result {
	return Result{Content: fmt.Sprintf(format, a...), IsError: true}
}

// Tool is one capability offered to the model.
type Tool interface {
	Spec() model.ToolSpec
	Call(ctx context.Context, c Call, env *Env) (Result, error)
}

// Verdict is a guard's opinion of one call before it runs.
type Verdict struct {
	Blocked  bool     // never run (hard-blocked); Reason says why
	Reason   string   // human text for Blocked or for the approval prompt
	Patterns []string // dangerous pattern keys that need approval (empty = safe)
	Command  string   // the command text shown to the approver, when the tool has one
}

// Guard is an optional Tool ability: inspect arguments before the call and say whether the
// call is blocked or needs approval. The engine consults it and runs the approval policy.
type Guard interface {
	Check(args json.RawMessage, env *Env) Verdict
}

// Question is a server-to-client request raised by a tool (clarify, sudo, secret).
type Question struct {
	Kind    string         // clarify | sudo | secret | ...
	Payload map[string]any // what the client shows
}

// Env is what a tool may touch. The engine fills it per call; tools never reach the session.
type Env struct {
	SessionID string
	Cwd       string // the session working directory; file tools stay inside it
	// AllowOutside lets file tools leave Cwd (granted by policy/config).
	AllowOutside bool
	// Ask raises a server-to-client request and waits for the answer ("value", "answer"...).
	Ask func(ctx context.Context, q Question) (map[string]any, error)
	// Progress reports interim output for surfaces (tool.progress).
	Progress func(text string)
	// Processes holds the session's background processes.
	Processes *Processes
	// Delegate runs a sub-agent to completion and returns its final answer.
	Delegate func(ctx context.Context, goal string, toolsets []string) (string, error)
	// FS, when set, reads and writes text files in place of the disk (see FS). Paths are
	// resolved and confined exactly as on disk before they reach it.
	FS FS
	// State is the session's scratch space for tools that remember something between calls
	// (the todo list). Nil outside a session: such tools then start empty each call.
	State *State
	// ReviewEdits, when set, is called by a file tool with every change a call is about to
	// make, before anything is written; an error means they were not approved, and the tool
	// writes nothing.
	ReviewEdits func(ctx context.Context, edits []Edit) error
}

// Edit is one file change a tool is about to make, as a person reviews it.
type Edit struct {
	Path    string // absolute
	OldText string // "" for a new file
	NewText string // "" for a deleted file
	Created bool
	Deleted bool
}

// FS is a file system a surface lends a session in place of the disk: an editor that holds
// unsaved buffers and wants to review edits. Paths are absolute. A method whose error wraps
// errors.ErrUnsupported is one the surface does not handle; the tool uses the disk for it.
// Any other error is the call's failure and is shown to the model.
type FS interface {
	ReadTextFile(ctx context.Context, path string) (string, error)
	WriteTextFile(ctx context.Context, path, content string) error
}

// State holds values a session's tools keep between calls. It lives as long as the live
// session and is not persisted. The zero value is ready; it is safe for concurrent use.
type State struct {
	mu sync.Mutex
	m  map[string]any
}

// Update replaces the value under key with f(old) (old is nil when unset) and returns the
// new value; concurrent updates of one key are serialised.
func (s *State) Update(key string, f func(old any) any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]any{}
	}
	v := f(s.m[key])
	s.m[key] = v
	return v
}

// Get returns the value under key, nil when unset.
func (s *State) Get(key string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// Len is the number of keys set.
func (s *State) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Keys lists the keys set, in no order.
func (s *State) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.m))
	for k := range s.m {
		out = append(out, k)
	}
	return out
}

// Restorer is a tool whose State entry can be rebuilt from its own earlier results in the
// transcript, so the entry need not outlive the live session: a session loaded again from the
// store (after a restart, or after the engine released it while idle) gets it back on the
// tool's next call.
type Restorer interface {
	Tool
	// StateKey is the State key the tool keeps.
	StateKey() string
	// Restore sets the tool's State entry from the content of one of its earlier results,
	// offered newest first; it reports false when that result carries no state (an error
	// result), and the engine offers the next older one.
	Restore(st *State, result string) bool
}

// ErrUnknownTool is returned by Registry.Get for a name that is not registered.
var ErrUnknownTool = errors.New("unknown tool")

// Registry is the set of tools offered in a session. Copy it with Clone and adjust per
// session (sub-agents get a narrower registry). It is safe for concurrent use: tools may be
// added or removed while turns run (MCP servers reloaded), and a turn sees each call's lookup
// and each request's tool list as of that moment.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
	order []string
}

// NewRegistry returns a registry holding ts in order.
func NewRegistry(ts ...Tool) *Registry {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range ts {
		r.Add(t)
	}
	return r
}

// Add registers t, replacing a tool of the same name.
func (r *Registry) Add(t Tool) {
	name := t.Spec().Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; !ok {
		r.order = append(r.order, name)
	}
	r.tools[name] = t
}

// Remove drops a tool by name.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tools, name)
	r.order = slices.DeleteFunc(r.order, func(n string) bool { return n == name })
}

// Get finds a tool by name.
func (r *Registry) Get(name string) (Tool, error) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	if ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownTool, name)
}

// Names lists the registered names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// Specs lists the tool specs in registration order.
func (r *Registry) Specs() []model.ToolSpec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]model.ToolSpec, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.tools[n].Spec())
	}
	return out
}

// Clone returns an independent copy.
func (r *Registry) Clone() *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := &Registry{tools: make(map[string]Tool, len(r.tools)), order: slices.Clone(r.order)}
	for k, v := range r.tools {
		c.tools[k] = v
	}
	return c
}

// Processes is a session's table of background processes. The terminal tool starts them; the
// process tool and surfaces (process.stop) list and stop them. It is safe for concurrent use.
type Processes struct {
	mu    sync.Mutex
	procs map[string]*Process
	next  int

	// OnOutput, when set, receives a background process's output as it is written (whole
	// lines, coalesced), and OnExit its exit code once it has ended and its output was
	// delivered. The owner sets them before any process starts.
	OnOutput func(id, chunk string)
	OnExit   func(id string, code int)
}

// Streams reports whether the owner wants background output as it is written.
func (ps *Processes) Streams() bool { return ps.OnOutput != nil }

// Process is one background process started by the terminal tool.
type Process struct {
	ID      string
	Command string
	PID     int
	// Stop kills the process (and its group); Output returns what it has written so far
	// (capped); Done is closed when it exits; ExitCode is valid after Done.
	Stop     func() error
	Output   func() string
	Done     <-chan struct{}
	ExitCode func() int
}

// Add registers p, assigning its id.
func (ps *Processes) Add(p *Process) string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.procs == nil {
		ps.procs = map[string]*Process{}
	}
	ps.next++
	p.ID = fmt.Sprintf("proc_%d", ps.next)
	ps.procs[p.ID] = p
	return p.ID
}

// Get finds a process by id.
func (ps *Processes) Get(id string) (*Process, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.procs[id]
	return p, ok
}

// List returns the processes sorted by id number.
func (ps *Processes) List() []*Process {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]*Process, 0, len(ps.procs))
	for _, p := range ps.procs {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Process) int { return cmpStr(a.ID, b.ID) })
	return out
}

func cmpStr(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// StopAll kills every running process (session close).
func (ps *Processes) StopAll() {
	for _, p := range ps.List() {
		select {
		case <-p.Done:
		default:
			_ = p.Stop()
		}
	}
}
