package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/tool"
)

func call(t *testing.T, tl tool.Tool, args string, env *tool.Env) tool.Result {
	t.Helper()
	res, err := tl.Call(context.Background(), tool.Call{ID: "c1", Name: tl.Spec().Name, Args: json.RawMessage(args)}, env)
	if err != nil {
		t.Fatalf("a model-visible failure must not be a Go error: %v", err)
	}
	return res
}

func TestClarify(t *testing.T) {
	var asked tool.Question
	env := &tool.Env{Ask: func(_ context.Context, q tool.Question) (map[string]any, error) {
		asked = q
		if _, batch := q.Payload["questions"]; batch {
			return map[string]any{"answers": map[string]any{"q1": "pg", "q2": "5432"}}, nil
		}
		return map[string]any{"answer": "blue"}, nil
	}}
	if r := call(t, Clarify{}, `{"question":"Which colour?","choices":["blue","red"]}`, env); r.IsError || r.Content != "blue" || asked.Kind != "clarify" {
		t.Fatalf("single: %+v %+v", r, asked)
	}
	r := call(t, Clarify{}, `{"questions":[{"question":"DB?"},{"question":"Port?"}]}`, env)
	qs := asked.Payload["questions"].([]map[string]any)
	if r.IsError || len(qs) != 2 || qs[1]["qid"] != "q2" || !strings.Contains(r.Content, `"q1":"pg"`) {
		t.Fatalf("batch: %+v %+v", r, asked)
	}
	for _, bad := range []string{`{}`, `{"question":""}`, `{"question":5}`, `not json`} {
		if r := call(t, Clarify{}, bad, env); !r.IsError {
			t.Errorf("%s accepted", bad)
		}
	}
	if r := call(t, Clarify{}, `{"question":"x"}`, &tool.Env{}); !r.IsError || !strings.Contains(r.Content, "best judgement") {
		t.Fatalf("no client: %+v", r)
	}
	failing := &tool.Env{Ask: func(context.Context, tool.Question) (map[string]any, error) { return nil, errors.New("timed out") }}
	if r := call(t, Clarify{}, `{"question":"x"}`, failing); !r.IsError || !strings.Contains(r.Content, "timed out") {
		t.Fatalf("no answer: %+v", r)
	}
}

func TestDelegate(t *testing.T) {
	var goals []string
	env := &tool.Env{Delegate: func(_ context.Context, goal string, _ []string) (string, error) {
		goals = append(goals, goal)
		if goal == "fail" {
			return "", errors.New("budget spent")
		}
		return "did " + goal, nil
	}}
	if r := call(t, Delegate{}, `{"goal":"a"}`, env); r.IsError || r.Content != "did a" {
		t.Fatalf("one: %+v", r)
	}
	r := call(t, Delegate{}, `{"tasks":[{"goal":"b"},{"goal":"fail"},{"goal":"c"}]}`, env)
	if r.IsError || !strings.Contains(r.Content, "## Task 2: fail\nSub-agent failed: budget spent") || !strings.Contains(r.Content, "did c") {
		t.Fatalf("several: %q", r.Content)
	}
	if r := call(t, Delegate{}, `{"goal":"fail"}`, env); !r.IsError {
		t.Fatalf("a single failed goal is an error result: %+v", r)
	}
	if r := call(t, Delegate{}, `{}`, env); !r.IsError {
		t.Fatal("no goal accepted")
	}
	if r := call(t, Delegate{}, `{"goal":"x"}`, &tool.Env{}); !r.IsError {
		t.Fatal("no delegate function accepted")
	}
	if len(goals) != 5 {
		t.Fatalf("goals: %v", goals)
	}
}
