package builtin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/tool"
)

func todoList(t *testing.T, res tool.Result) TodoList {
	t.Helper()
	var l TodoList
	if err := json.Unmarshal([]byte(res.Content), &l); err != nil {
		t.Fatalf("todo result is not a TodoList: %v: %s", err, res.Content)
	}
	return l
}

func TestTodoReplaceAndMerge(t *testing.T) {
	env := newEnv(t)
	env.State = &tool.State{}
	res := mustOK(t, call(t, Todo{}, env, `{"todos":[{"id":"1","content":"read the code","status":"in_progress","priority":"high"},{"id":"2","content":"fix it","status":"pending"}]}`))
	l := todoList(t, res)
	if len(l.Todos) != 2 || l.Todos[0].Priority != TodoHigh || l.Summary[TodoInProgress] != 1 || l.Summary[TodoPending] != 1 {
		t.Fatalf("replace: %+v", l)
	}
	if items, _ := res.Meta["todos"].([]TodoItem); len(items) != 2 {
		t.Fatalf("meta: %#v", res.Meta)
	}
	// Merge updates by id (only given fields) and appends new ids.
	l = todoList(t, mustOK(t, call(t, Todo{}, env, `{"merge":true,"todos":[{"id":"1","status":"completed"},{"id":"3","content":"test it"}]}`)))
	if len(l.Todos) != 3 || l.Todos[0].Content != "read the code" || l.Todos[0].Status != TodoCompleted || l.Todos[2].Status != TodoPending {
		t.Fatalf("merge: %+v", l.Todos)
	}
	// An empty merge reads the list; an empty replace clears it.
	if l = todoList(t, mustOK(t, call(t, Todo{}, env, `{"merge":true,"todos":[]}`))); len(l.Todos) != 3 {
		t.Fatalf("read: %+v", l.Todos)
	}
	if l = todoList(t, mustOK(t, call(t, Todo{}, env, `{"todos":[]}`))); len(l.Todos) != 0 || l.Todos == nil {
		t.Fatalf("clear: %s", mustOK(t, call(t, Todo{}, env, `{"merge":true,"todos":[]}`)).Content)
	}
}

func TestTodoRejectsBadItemsAndKeepsTheList(t *testing.T) {
	env := newEnv(t)
	env.State = &tool.State{}
	mustOK(t, call(t, Todo{}, env, `{"todos":[{"id":"1","content":"a","status":"pending"}]}`))
	for _, tc := range []struct{ args, want string }{
		{`{"todos":[{"id":"2","content":"b","status":"done"}]}`, `status must be one of`},
		{`{"todos":[{"content":"b"}]}`, `missing id`},
		{`{"todos":[{"id":"2"}]}`, `missing content`},
		{`{"todos":[{"id":"2","content":"b","owner":"me"}]}`, `unknown field`},
		{`{"todos":[{"id":"2","content":"b","priority":"urgent"}]}`, `priority must be one of`},
		{`{"todos":[{"id":"2","content":"b"},{"id":"2","content":"c"}]}`, `appears twice`},
		{`{"merge":true,"todos":[{"id":"9","status":"completed"}]}`, `is new and has no content`},
		{`{"todos":[5]}`, `todos[0]`},
		{`{"todos":"x"}`, `must be an array`},
	} {
		res := call(t, Todo{}, env, tc.args)
		if !res.IsError || !strings.Contains(res.Content, tc.want) {
			t.Fatalf("%s: %+v (want %q)", tc.args, res, tc.want)
		}
	}
	if l := todoList(t, mustOK(t, call(t, Todo{}, env, `{"merge":true,"todos":[]}`))); len(l.Todos) != 1 || l.Todos[0].Content != "a" {
		t.Fatalf("list changed by failed calls: %+v", l.Todos)
	}
}

func TestTodoBoundsTheList(t *testing.T) {
	env := newEnv(t)
	items := make([]map[string]string, maxTodos+1)
	for i := range items {
		items[i] = map[string]string{"id": strings.Repeat("x", i+1), "content": "c"}
	}
	mustFail(t, call(t, Todo{}, env, map[string]any{"todos": items}), "more than 100")
}

func FuzzTodoArgs(f *testing.F) {
	for _, s := range []string{`{"todos":[]}`, `{"todos":[{"id":"1","content":"a"}]}`, `{"merge":true,"todos":[{"id":"1"}]}`, `{"todos":[null]}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		env := &tool.Env{State: &tool.State{}}
		res, err := Todo{}.Call(t.Context(), tool.Call{Name: "todo", Args: raw}, env)
		if err != nil {
			t.Fatalf("Go error: %v", err)
		}
		if res.IsError {
			return
		}
		var l TodoList
		if err := json.Unmarshal([]byte(res.Content), &l); err != nil {
			t.Fatalf("result is not JSON: %v", err)
		}
		if len(l.Todos) > maxTodos {
			t.Fatalf("%d items", len(l.Todos))
		}
		for _, it := range l.Todos {
			if it.ID == "" || it.Content == "" || it.Status == "" {
				t.Fatalf("incomplete item %+v", it)
			}
		}
	})
}

// TestTodoRestore: a successful result restores the list (and a list already held wins); an
// error result or other text does not.
func TestTodoRestore(t *testing.T) {
	var st tool.State
	if (Todo{}).Restore(&st, "invalid arguments for todo: todos[0]: missing id") || (Todo{}).Restore(&st, `{"other":1}`) {
		t.Fatal("restored from a result without a list")
	}
	if st.Get(todoStateKey) != nil {
		t.Fatal("state written by a failed restore")
	}
	ok := (Todo{}).Restore(&st, `{"todos":[{"id":"1","content":"a","status":"pending"}],"summary":{"pending":1}}`)
	if got, _ := st.Get(todoStateKey).([]TodoItem); !ok || len(got) != 1 || got[0].Content != "a" {
		t.Fatalf("restore: %v %v", ok, st.Get(todoStateKey))
	}
	(Todo{}).Restore(&st, `{"todos":[],"summary":{}}`)
	if got, _ := st.Get(todoStateKey).([]TodoItem); len(got) != 1 {
		t.Fatalf("a held list was replaced: %v", got)
	}
}
