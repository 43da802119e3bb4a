package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/tool"
)

// ToolOutputName is the tool a session offers once one of its tool results was cut to its
// budget: it reads the stored whole output in ranges.
const ToolOutputName = "read_tool_output"

// toolOutput reads a stored tool result of its session.
type toolOutput struct{ s *Session }

func (toolOutput) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        ToolOutputName,
		Description: "Read a range of a tool result that was truncated for length. The whole output is stored; give the call_id the truncation marker names and a byte offset.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"call_id":{"type":"string","description":"the tool call id named in the truncation marker"},` +
			`"offset":{"type":"integer","minimum":0,"description":"byte offset to start at (default 0)"},` +
			`"limit":{"type":"integer","minimum":1,"description":"bytes to return (default and maximum: the tool output budget)"}},` +
			`"required":["call_id"],"additionalProperties":false}`),
	}
}

func (o toolOutput) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a struct {
		CallID string `json:"call_id"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil || a.CallID == "" {
		return tool.Errorf("read_tool_output: want {\"call_id\": string, \"offset\"?: integer, \"limit\"?: integer}"), nil
	}
	var row *store.Row
	for _, archived := range []bool{false, true} { // the active transcript first: it is smaller
		rows, err := o.s.History(ctx, store.RowQuery{IncludeArchived: archived})
		if err != nil {
			return tool.Result{}, err
		}
		for i := range rows {
			if rows[i].Role == "tool" && rows[i].ToolCallID == a.CallID {
				row = &rows[i] // the newest one with this id
			}
		}
		if row != nil {
			break
		}
	}
	if row == nil {
		return tool.Errorf("read_tool_output: no stored tool result with call_id %q", a.CallID), nil
	}
	budget := o.s.e.cfg.ToolOutputBudget
	if a.Limit <= 0 || a.Limit > budget {
		a.Limit = budget
	}
	n := len(row.Content)
	if a.Offset < 0 || a.Offset > n {
		return tool.Errorf("read_tool_output: offset %d is outside the output (%d bytes)", a.Offset, n), nil
	}
	end := min(n, a.Offset+a.Limit)
	part := validSuffix(validPrefix(row.Content[a.Offset:end]))
	return tool.Result{Content: fmt.Sprintf("[bytes %d–%d of %d of the output of %s (call %s)]\n%s", a.Offset, end, n, row.ToolName, a.CallID, part)}, nil
}
