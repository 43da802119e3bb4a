package builtin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

const (
	pollTailLines  = 40  // lines of output a poll shows
	defaultLogTail = 200 // lines a log shows when no offset is given
)

// Process is the `process` tool: it lists, inspects, waits for and kills the background
// processes the terminal tool started in this session (Env.Processes).
type Process struct {
	// OutputCap is the byte budget of one result; 0 means DefaultOutputCap.
	OutputCap int
}

var processSchema = func() *schema {
	tlo, thi := intRange(1, MaxTimeout)
	olo, ohi := intRange(1, 1<<31-1)
	llo, lhi := intRange(1, 100_000)
	return object([]string{"action"}, map[string]*schema{
		"action": {Type: "string", Enum: []string{"list", "poll", "log", "wait", "kill"}, Description: "list: all " +
			"background processes and their status. poll: status and the latest output of one process. log: its " +
			"captured output by line range. wait: block until it exits (or the timeout passes). kill: stop it " +
			"and everything it started."},
		"id":         {Type: "string", Description: "The process id returned by the terminal tool (e.g. \"proc_1\"). Required for every action except list."},
		"session_id": {Type: "string", Description: "Alias of id."},
		"timeout":    {Type: "integer", Minimum: tlo, Maximum: thi, Default: DefaultTimeout, Description: "wait only: seconds to wait before returning while the process still runs."},
		"offset":     {Type: "integer", Minimum: olo, Maximum: ohi, Description: "log only: first line to show (1-based). Without it the last lines are shown."},
		"limit":      {Type: "integer", Minimum: llo, Maximum: lhi, Default: defaultLogTail, Description: "log only: number of lines to show."},
	})
}()

type processArgs struct {
	Action    string `json:"action"`
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Timeout   int    `json:"timeout"`
	Offset    int    `json:"offset"`
	Limit     int    `json:"limit"`
}

// Spec describes the tool to the model.
func (pt *Process) Spec() model.ToolSpec {
	return toolSpec("process",
		"Manage background processes started by the terminal tool with background=true: list them, poll one "+
			"for its status and latest output, read its log, wait for it to exit, or kill it (with everything "+
			"it started).",
		processSchema)
}

// Call performs the action.
func (pt *Process) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a processArgs
	if err := decodeArgs("process", processSchema, c.Args, &a); err != nil {
		return argsResult(err), nil
	}
	if env.Processes == nil {
		return tool.Errorf("background processes are not available in this session"), nil
	}
	if a.Action == "list" {
		return pt.list(env.Processes), nil
	}
	id := a.ID
	if id == "" {
		id = a.SessionID
	}
	if id == "" {
		return tool.Errorf("action %q needs the id of a process (see action \"list\")", a.Action), nil
	}
	p, ok := env.Processes.Get(id)
	if !ok {
		return unknownProcess(env.Processes, id), nil
	}
	meta := map[string]any{"action": a.Action, "process_id": p.ID, "command": p.Command}
	var b strings.Builder
	switch a.Action {
	case "poll":
		fmt.Fprintf(&b, "%s (pid %d) %s\n$ %s\n", p.ID, p.PID, status(p), p.Command)
		b.WriteString(outputBlock(lastLines(p.Output(), pollTailLines), "latest output"))
	case "log":
		b.WriteString(logLines(p.Output(), a.Offset, orDefault(a.Limit, defaultLogTail)))
	case "wait":
		timeout := orDefault(a.Timeout, DefaultTimeout)
		timer := time.NewTimer(time.Duration(timeout) * time.Second)
		select {
		case <-p.Done:
			meta["exit_code"] = p.ExitCode()
		case <-timer.C:
			fmt.Fprintf(&b, "Still running after waiting %ds.\n", timeout)
		case <-ctx.Done():
			timer.Stop()
			return tool.Errorf("interrupted while waiting for %s; it is still running", p.ID), nil
		}
		timer.Stop()
		fmt.Fprintf(&b, "%s (pid %d) %s\n", p.ID, p.PID, status(p))
		b.WriteString(outputBlock(lastLines(p.Output(), pollTailLines), "latest output"))
	case "kill":
		select {
		case <-p.Done:
			fmt.Fprintf(&b, "%s had already exited with code %d.\n", p.ID, p.ExitCode())
		default:
			if err := p.Stop(); err != nil {
				return tool.Errorf("could not stop %s: %v", p.ID, err), nil
			}
			fmt.Fprintf(&b, "Killed %s (pid %d) and its process group; exit code %d.\n", p.ID, p.PID, p.ExitCode())
		}
		b.WriteString(outputBlock(lastLines(p.Output(), pollTailLines), "last output"))
	}
	meta["status"] = status(p)
	text, truncated := capText(b.String(), orDefault(pt.OutputCap, DefaultOutputCap))
	if truncated {
		meta["truncated"] = true
	}
	return tool.Result{Content: text, Meta: meta}, nil
}

func (pt *Process) list(ps *tool.Processes) tool.Result {
	procs := ps.List()
	if len(procs) == 0 {
		return tool.Result{Content: "No background processes.", Meta: map[string]any{"action": "list"}}
	}
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "%s\tpid %d\t%s\t%s\n", p.ID, p.PID, status(p), shorten(p.Command, 120))
	}
	return tool.Result{Content: b.String(), Meta: map[string]any{"action": "list", "count": len(procs)}}
}

func unknownProcess(ps *tool.Processes, id string) tool.Result {
	procs := ps.List()
	if len(procs) == 0 {
		return tool.Errorf("no background process with id %q: there are none in this session", id)
	}
	ids := make([]string, len(procs))
	for i, p := range procs {
		ids[i] = p.ID
	}
	return tool.Errorf("no background process with id %q; known ids: %s", id, strings.Join(ids, ", "))
}

func status(p *tool.Process) string {
	select {
	case <-p.Done:
		return fmt.Sprintf("exited (code %d)", p.ExitCode())
	default:
		return "running"
	}
}

func outputBlock(out, label string) string {
	if out == "" {
		return "(no output yet)\n"
	}
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return "--- " + label + " ---\n" + out
}

// lastLines returns the final n lines of s.
func lastLines(s string, n int) string {
	trimmed := strings.TrimSuffix(s, "\n")
	idx := len(trimmed)
	for i := 0; i < n; i++ {
		j := strings.LastIndexByte(trimmed[:idx], '\n')
		if j < 0 {
			return s
		}
		idx = j
	}
	return s[idx+1:]
}

// logLines shows lines [offset, offset+limit) of out, or its last limit lines when offset is 0,
// with a header saying which.
func logLines(out string, offset, limit int) string {
	if out == "" {
		return "(no output yet)\n"
	}
	lines := strings.SplitAfter(out, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	total := len(lines)
	start := offset - 1
	if offset == 0 {
		start = max(0, total-limit)
	}
	if start >= total {
		return fmt.Sprintf("(offset %d is past the end: the captured output has %d lines)\n", offset, total)
	}
	end := min(total, start+limit)
	body := strings.Join(lines[start:end], "")
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return fmt.Sprintf("--- lines %d-%d of %d captured ---\n%s", start+1, end, total, body)
}

// capText keeps the head and the tail of s within limit bytes.
func capText(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	c := newCapture(limit)
	_, _ = c.Write([]byte(s))
	return c.String()
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
