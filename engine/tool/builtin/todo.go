package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// Todo item statuses.
const (
	TodoPending    = "pending"
	TodoInProgress = "in_progress"
	TodoCompleted  = "completed"
	TodoCancelled  = "cancelled"
)

// Todo item priorities; an item without one is medium.
const (
	TodoHigh   = "high"
	TodoMedium = "medium"
	TodoLow    = "low"
)

const (
	maxTodos       = 100
	maxTodoContent = 1000
	todoStateKey   = "todo"
)

// TodoItem is one entry of the session's task list.
type TodoItem struct {
	ID       string `json:"id"`
	Content  string `json:"content"`
	Status   string `json:"status"`
	Priority string `json:"priority,omitempty"`
}

// TodoList is the todo tool's result content (JSON): the whole list after the call, so a
// surface can show it as a plan without knowing what the call changed.
type TodoList struct {
	Todos   []TodoItem     `json:"todos"`
	Summary map[string]int `json:"summary"`
}

// Todo is the `todo` tool: the model keeps a task list for the session, replacing it or
// merging changes into it by id. The list lives in the session's tool state (env.State).
type Todo struct{}

var todoSchema = object([]string{"todos"}, map[string]*schema{
	"todos": {Type: "array", Description: "Items: {\"id\": string, \"content\": string, \"status\": " +
		"\"pending\"|\"in_progress\"|\"completed\"|\"cancelled\", \"priority\": \"high\"|\"medium\"|\"low\" (optional)}. " +
		"Without merge this is the whole new list; with merge, items update the ones with the same id (only the fields given) " +
		"and new ids are appended.",
		Items: &schema{Type: "object"}},
	"merge": {Type: "boolean", Default: false, Description: "Merge the items into the current list by id instead of replacing it. " +
		"An empty todos list with merge returns the current list."},
})

type todoArgs struct {
	Todos []json.RawMessage `json:"todos"`
	Merge bool              `json:"merge"`
}

// todoPatch is one item as the model sent it; absent fields are empty (merge keeps them).
type todoPatch struct {
	ID       string `json:"id"`
	Content  string `json:"content"`
	Status   string `json:"status"`
	Priority string `json:"priority"`
}

// Spec describes the tool to the model.
func (Todo) Spec() model.ToolSpec {
	return toolSpec("todo",
		"Keep a task list for work with several steps: write it when you start, mark an item in_progress when you "+
			"begin it and completed as soon as it is done (one item in_progress at a time), cancel items that no longer "+
			"apply. The user sees the list as your plan. Returns the whole list.",
		todoSchema)
}

// StateKey is where the list lives in the session's tool state.
func (Todo) StateKey() string { return todoStateKey }

// Restore takes the list from an earlier successful result (its JSON); a list already in the
// state is kept.
func (Todo) Restore(st *tool.State, result string) bool {
	var l TodoList
	if json.Unmarshal([]byte(result), &l) != nil || l.Todos == nil || l.Summary == nil {
		return false
	}
	st.Update(todoStateKey, func(old any) any {
		if old != nil {
			return old
		}
		return l.Todos
	})
	return true
}

// Call applies the change and returns the list.
func (Todo) Call(_ context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a todoArgs
	if err := decodeArgs("todo", todoSchema, c.Args, &a); err != nil {
		return argsResult(err), nil
	}
	patches := make([]todoPatch, 0, len(a.Todos))
	var problems []string
	for i, raw := range a.Todos {
		p, err := decodeTodo(raw, a.Merge)
		if err != nil {
			problems = append(problems, fmt.Sprintf("todos[%d]: %v", i, err))
			continue
		}
		patches = append(patches, p)
	}
	if len(problems) > 0 {
		return tool.Errorf("invalid arguments for todo: %s", strings.Join(problems, "; ")), nil
	}
	var list []TodoItem
	var err error
	update := func(old any) any {
		cur, _ := old.([]TodoItem)
		list, err = applyTodos(cur, patches, a.Merge)
		if err != nil {
			return cur
		}
		return list
	}
	if env != nil && env.State != nil {
		env.State.Update(todoStateKey, update)
	} else {
		update(nil)
	}
	if err != nil {
		return tool.Errorf("todo: %v; the list was not changed", err), nil
	}
	out := TodoList{Todos: list, Summary: map[string]int{TodoPending: 0, TodoInProgress: 0, TodoCompleted: 0, TodoCancelled: 0}}
	if out.Todos == nil {
		out.Todos = []TodoItem{}
	}
	for _, it := range list {
		out.Summary[it.Status]++
	}
	b, _ := json.Marshal(out) // strings and ints only
	return tool.Result{Content: string(b), Meta: map[string]any{"todos": slices.Clone(out.Todos)}}, nil
}

// decodeTodo checks one item. Without merge every item is complete; with merge only the id is
// required (a new id also needs content).
func decodeTodo(raw json.RawMessage, merge bool) (todoPatch, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p todoPatch
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("must be an object with string fields id, content, status and priority (%v)", err)
	}
	p.ID, p.Content = strings.TrimSpace(p.ID), strings.TrimSpace(p.Content)
	switch {
	case p.ID == "":
		return p, fmt.Errorf("missing id")
	case len(p.Content) > maxTodoContent:
		return p, fmt.Errorf("content is longer than %d bytes", maxTodoContent)
	case p.Status != "" && !slices.Contains([]string{TodoPending, TodoInProgress, TodoCompleted, TodoCancelled}, p.Status):
		return p, fmt.Errorf("status must be one of pending, in_progress, completed, cancelled, got %q", p.Status)
	case p.Priority != "" && !slices.Contains([]string{TodoHigh, TodoMedium, TodoLow}, p.Priority):
		return p, fmt.Errorf("priority must be one of high, medium, low, got %q", p.Priority)
	case !merge && p.Content == "":
		return p, fmt.Errorf("missing content")
	}
	return p, nil
}

// applyTodos returns the new list; cur is not modified.
func applyTodos(cur []TodoItem, patches []todoPatch, merge bool) ([]TodoItem, error) {
	var out []TodoItem
	if merge {
		out = slices.Clone(cur)
	}
	index := map[string]int{}
	for i, it := range out {
		index[it.ID] = i
	}
	for _, p := range patches {
		if i, ok := index[p.ID]; ok {
			if !merge {
				return nil, fmt.Errorf("id %q appears twice", p.ID)
			}
			it := &out[i]
			if p.Content != "" {
				it.Content = p.Content
			}
			if p.Status != "" {
				it.Status = p.Status
			}
			if p.Priority != "" {
				it.Priority = p.Priority
			}
			continue
		}
		if p.Content == "" {
			return nil, fmt.Errorf("item %q is new and has no content", p.ID)
		}
		it := TodoItem(p)
		if it.Status == "" {
			it.Status = TodoPending
		}
		index[it.ID] = len(out)
		out = append(out, it)
	}
	if len(out) > maxTodos {
		return nil, fmt.Errorf("the list would have %d items, more than %d", len(out), maxTodos)
	}
	return out, nil
}
