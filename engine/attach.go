package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// ErrToolConflict is returned by AttachTools for a tool whose name the engine's registry
// already offers: a surface may add tools to a session, not replace the built-in ones.
var ErrToolConflict = errors.New("tool name already registered")

// attachments are what a surface lends one live session while it is attached: extra tools
// (the MCP servers an editor passed for this session) and a file system (the editor's
// buffers). The engine's registry stays shared and unchanged.
type attachments struct {
	mu     sync.RWMutex
	tools  map[string]tool.Tool
	order  []string
	fs     tool.FS
	hidden []string // tool names kept out of the model's tool list (HideTools)
	// reviewEdits: the surface's client reviews file edits before they are written
	// (SetEditReview).
	reviewEdits bool
}

// AttachTools offers ts to this session's model, and to its sub-agents, besides the engine's
// tools. They run through the same guard, policy and approval path as built-in tools. A tool
// attached earlier under the same name is replaced. A name the engine's registry has is
// refused with ErrToolConflict and nothing is attached. detach removes exactly these tools
// (not a same-named tool attached after them); calling it again does nothing.
func (s *Session) AttachTools(ts ...tool.Tool) (detach func(), err error) {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Spec().Name
		if _, err := s.e.cfg.Tools.Get(names[i]); err == nil {
			return nil, fmt.Errorf("%w: %q", ErrToolConflict, names[i])
		}
	}
	a := &s.attached
	a.mu.Lock()
	if a.tools == nil {
		a.tools = map[string]tool.Tool{}
	}
	for i, t := range ts {
		if _, ok := a.tools[names[i]]; !ok {
			a.order = append(a.order, names[i])
		}
		a.tools[names[i]] = t
	}
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			for i, t := range ts {
				if cur, ok := a.tools[names[i]]; ok && cur == t {
					delete(a.tools, names[i])
					a.order = slices.DeleteFunc(a.order, func(n string) bool { return n == names[i] })
				}
			}
		})
	}, nil
}

// AttachedTools lists the names of the tools attached to this session, in attach order.
func (s *Session) AttachedTools() []string {
	a := &s.attached
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.order)
}

// SetFS lends the session's file tools (and its sub-agents') a file system in place of the
// disk; nil returns them to the disk. It takes effect from the next tool call.
func (s *Session) SetFS(fs tool.FS) {
	a := &s.attached
	a.mu.Lock()
	a.fs = fs
	a.mu.Unlock()
}

// The lookups below read the request host's attachments: a sub-agent works for the same
// client, so it sees the same editor buffers and the same client-supplied tools.

// lookupTool finds a tool by name: the engine's registry, then the attached tools.
func (s *Session) lookupTool(name string) (tool.Tool, error) {
	t, err := s.e.cfg.Tools.Get(name)
	if err == nil {
		return t, nil
	}
	a := &s.requestHost().attached
	a.mu.RLock()
	defer a.mu.RUnlock()
	if t, ok := a.tools[name]; ok {
		return t, nil
	}
	if name == ToolOutputName {
		return toolOutput{s}, nil
	}
	return nil, err
}

// toolNames lists every tool the session offers.
func (s *Session) toolNames() []string {
	a := &s.requestHost().attached
	a.mu.RLock()
	defer a.mu.RUnlock()
	return append(s.e.cfg.Tools.Names(), a.order...)
}

// toolSpecs is the tool list sent to the model: the registry's, then the attached tools'.
func (s *Session) toolSpecs() []model.ToolSpec {
	specs := s.e.cfg.Tools.Specs()
	a := &s.requestHost().attached
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, n := range a.order {
		specs = append(specs, a.tools[n].Spec())
	}
	if len(a.hidden) > 0 {
		specs = slices.DeleteFunc(slices.Clone(specs), func(t model.ToolSpec) bool { return slices.Contains(a.hidden, t.Name) })
	}
	s.mu.Lock()
	offer := s.meter.truncated
	s.mu.Unlock()
	if offer && !slices.ContainsFunc(specs, func(t model.ToolSpec) bool { return t.Name == ToolOutputName }) {
		specs = append(specs, toolOutput{}.Spec())
	}
	return specs
}

// fileSystem is the file system lent to the session, nil for the disk.
func (s *Session) fileSystem() tool.FS {
	a := &s.requestHost().attached
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.fs
}
