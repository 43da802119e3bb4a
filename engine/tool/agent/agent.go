// Package agent holds the tools that reach beyond the machine: clarify (asks the user through
// whichever client is attached) and delegate_task (runs a sub-agent). They only use what the
// engine puts in tool.Env, so they carry no engine dependency.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// Clarify asks the user a question and returns the answer.
type Clarify struct{}

var _ tool.Tool = Clarify{}

// Spec describes clarify.
func (Clarify) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "clarify",
		Description: "Ask the user a clarifying question when the request is ambiguous and a wrong guess would waste work. Optionally offer choices. Returns the user's answer.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"question":{"type":"string","description":"The question to ask."},` +
			`"choices":{"type":"array","items":{"type":"string"},"description":"Optional answers to choose from."},` +
			`"questions":{"type":"array","description":"Several questions asked together instead of one.","items":{"type":"object","properties":{"question":{"type":"string"},"choices":{"type":"array","items":{"type":"string"}},"multi_select":{"type":"boolean"}},"required":["question"]}}},` +
			`"additionalProperties":false}`),
	}
}

// Call asks through env.Ask.
func (Clarify) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a struct {
		Question  string   `json:"question"`
		Choices   []string `json:"choices"`
		Questions []struct {
			Question    string   `json:"question"`
			Choices     []string `json:"choices"`
			MultiSelect bool     `json:"multi_select"`
		} `json:"questions"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return tool.Errorf("invalid arguments for clarify: %v", err), nil
	}
	if strings.TrimSpace(a.Question) == "" && len(a.Questions) == 0 {
		return tool.Errorf("invalid arguments for clarify: question (or questions) is required"), nil
	}
	if env.Ask == nil {
		return tool.Errorf("clarify is unavailable: no client can answer questions here; proceed with your best judgement and say what you assumed"), nil
	}
	payload := map[string]any{"question": a.Question}
	if len(a.Choices) > 0 {
		payload["choices"] = a.Choices
	}
	if len(a.Questions) > 0 { // a batch: answered as {answers: {qid: answer}}, lockable one by one
		qs := make([]map[string]any, 0, len(a.Questions))
		for i, q := range a.Questions {
			qs = append(qs, map[string]any{"qid": fmt.Sprintf("q%d", i+1), "question": q.Question, "choices": q.Choices, "multi_select": q.MultiSelect})
		}
		payload = map[string]any{"questions": qs}
	}
	ans, err := env.Ask(ctx, tool.Question{Kind: "clarify", Payload: payload})
	if err != nil {
		return tool.Errorf("the user did not answer (%v); proceed with your best judgement and say what you assumed", err), nil
	}
	if s, ok := ans["answer"].(string); ok {
		return tool.Result{Content: s}, nil
	}
	b, _ := json.Marshal(ans["answers"])
	return tool.Result{Content: string(b)}, nil
}

// Delegate runs a sub-agent on a self-contained goal.
type Delegate struct{}

var _ tool.Tool = Delegate{}

// Spec describes delegate_task.
func (Delegate) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "delegate_task",
		Description: "Hand a self-contained sub-task to a sub-agent that has the same tools and working directory but starts with no conversation context. Give it everything it needs in the goal. Returns the sub-agent's final answer. Use tasks for several independent sub-tasks.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"goal":{"type":"string","description":"What the sub-agent must achieve, with all needed context."},` +
			`"tasks":{"type":"array","items":{"type":"object","properties":{"goal":{"type":"string"}},"required":["goal"]},"description":"Several independent sub-tasks, run one after another."}},` +
			`"additionalProperties":false}`),
	}
}

// Call runs each goal through env.Delegate.
func (Delegate) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a struct {
		Goal  string `json:"goal"`
		Tasks []struct {
			Goal string `json:"goal"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return tool.Errorf("invalid arguments for delegate_task: %v", err), nil
	}
	var goals []string
	if strings.TrimSpace(a.Goal) != "" {
		goals = append(goals, a.Goal)
	}
	for _, t := range a.Tasks {
		if strings.TrimSpace(t.Goal) != "" {
			goals = append(goals, t.Goal)
		}
	}
	if len(goals) == 0 {
		return tool.Errorf("invalid arguments for delegate_task: give goal or tasks[].goal"), nil
	}
	if env.Delegate == nil {
		return tool.Errorf("delegate_task is unavailable in this session"), nil
	}
	var b strings.Builder
	failed := false
	for i, g := range goals {
		out, err := env.Delegate(ctx, g, nil)
		if len(goals) > 1 {
			fmt.Fprintf(&b, "## Task %d: %s\n", i+1, g)
		}
		if err != nil {
			failed = true
			fmt.Fprintf(&b, "Sub-agent failed: %v\n", err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		b.WriteString(out)
		b.WriteString("\n")
	}
	return tool.Result{Content: strings.TrimSpace(b.String()), IsError: failed && len(goals) == 1}, nil
}
