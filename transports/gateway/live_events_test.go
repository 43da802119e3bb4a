package gateway_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// typesOf lists the event types of sid from index from on, keeping only those in keep.
func typesOf(c *gwclient.Client, from int, sid string, keep ...string) []string {
	var out []string
	for _, ev := range c.Events()[from:] {
		if ev.SessionID == sid && slices.Contains(keep, ev.Type) {
			out = append(out, ev.Type)
		}
	}
	return out
}

// A turn that calls tools reports session.usage as each model call completes and the turn
// goes on: the session's usage so far, the turn's calls included; message.complete then has
// the turn's whole usage.
func TestGatewayUsageTicks(t *testing.T) {
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		tg.srv.Enqueue(
			openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo one"}`}}),
			openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"echo two"}`}}),
			openaitest.Text("done"),
		)
		from := len(c.Events())
		done := turn(t, c, sid, "run two commands")
		got := typesOf(c, from, sid, "session.usage", "tool.start", "tool.complete", "message.complete")
		want := "session.usage,tool.start,tool.complete,session.usage,tool.start,tool.complete,message.complete"
		if strings.Join(got, ",") != want {
			t.Fatalf("events %v, want %s", got, want)
		}
		var ticks []map[string]any
		for _, ev := range c.Events()[from:] {
			if ev.Type == "session.usage" {
				ticks = append(ticks, payload(t, ev)["usage"].(map[string]any))
			}
		}
		per := openaitest.DefaultUsage()
		for i, u := range ticks {
			calls := float64(i + 1)
			if u["calls"] != calls || u["input"] != calls*float64(per.PromptTokens) || u["output"] != calls*float64(per.CompletionTokens) ||
				u["tool_calls"] != float64(i) || u["model"] == "" {
				t.Fatalf("tick %d: %v", i, u)
			}
		}
		if u := done["usage"].(map[string]any); u["calls"] != 3.0 {
			t.Fatalf("message.complete usage %v", u)
		}
		// session.usage (the method) agrees with the last tick once the turn is saved.
		if u := call(t, c, "session.usage", map[string]any{"session_id": sid}); u["calls"] != 3.0 {
			t.Fatalf("session.usage %v", u)
		}
	})
}

// A steer delivered during a turn shows up in inflight.corrections for a client that attaches
// mid-turn; when the turn then fails, inflight keeps it for clients attaching later, with its
// error, status "error", recoverable and error_surface, until the next turn starts.
func TestGatewayInflightCorrectionsAndFailedTurn(t *testing.T) {
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		g1, g2 := openaitest.NewGate(), openaitest.NewGate()
		tg.srv.Enqueue(
			openaitest.Response{Calls: []openaitest.Call{{Name: "terminal", Args: []string{`{"command":"echo x"}`}}}, FaultAt: 1, Gate: g1},
			openaitest.Response{Text: []string{"Using ", "bash"}, FaultAt: 2, Gate: g2, Fault: openaitest.FaultInBandError,
				Error: openaitest.APIError{Message: "upstream overloaded", Type: "server_error"}},
		)
		from := len(c.Events())
		call(t, c, "prompt.submit", map[string]any{"session_id": sid, "text": "list files"})
		<-g1.Reached()
		if r := call(t, c, "session.steer", map[string]any{"session_id": sid, "text": "use bash"}); r["status"] != "queued" {
			t.Fatalf("steer %v", r)
		}
		g1.Release()
		<-g2.Reached()
		waitType(t, c, from, sid, "message.delta") // "Using " has reached the engine

		// A second client attaches mid-turn.
		c2 := open(t, tg, true)
		snap := call(t, c2, "session.activate", map[string]any{"session_id": sid})
		in, _ := snap["inflight"].(map[string]any)
		if in == nil || in["streaming"] != true || in["user"] != "list files" || in["assistant"] != "Using " || in["status"] != nil {
			t.Fatalf("running inflight %v", snap["inflight"])
		}
		if cs, _ := in["corrections"].([]any); len(cs) != 1 || cs[0] != "use bash" {
			t.Fatalf("corrections %v", in)
		}
		if offs, _ := in["correction_offsets"].([]any); len(offs) != 1 || offs[0] != 0.0 {
			t.Fatalf("correction offsets %v", in)
		}

		g2.Release()
		e, _ := waitType(t, c, from, sid, "message.complete")
		if p := payload(t, e); p["status"] != "error" || !strings.Contains(p["error"].(string), "upstream overloaded") {
			t.Fatalf("failed turn %v", p)
		}
		waitType(t, c, from, sid, "session.info") // the session is idle again

		// A client attaching after the failure gets the failed turn.
		c3 := open(t, tg, true)
		for _, m := range []string{"session.activate", "session.resume"} {
			id := sid
			if m == "session.resume" {
				id = snap["stored_session_id"].(string)
			}
			got := call(t, c3, m, map[string]any{"session_id": id})
			in, _ := got["inflight"].(map[string]any)
			surface, _ := in["error_surface"].(map[string]any)
			if in == nil || got["running"] != false || in["streaming"] != false || in["status"] != "error" || in["user"] != "list files" ||
				!strings.Contains(in["error"].(string), "upstream overloaded") || in["recoverable"] != true ||
				surface["layer"] != "provider" || surface["code"] != "provider_error" || surface["retryable"] != true {
				t.Fatalf("%s: failed inflight %v", m, got["inflight"])
			}
			if cs, _ := in["corrections"].([]any); len(cs) != 1 || cs[0] != "use bash" {
				t.Fatalf("%s: failed turn's corrections %v", m, in)
			}
		}

		// The next turn replaces it; once that one completes there is no inflight.
		tg.srv.Enqueue(openaitest.Text("fine now"))
		turn(t, c, sid, "again")
		if got := call(t, c3, "session.activate", map[string]any{"session_id": sid}); got["inflight"] != nil {
			t.Fatalf("inflight after a completed turn: %v", got["inflight"])
		}
	})
}

// A delegated sub-agent is announced to the parent's clients as it goes:
// subagent.spawn_requested, subagent.start, subagent.progress after each of its model calls
// that goes on, subagent.tool for each tool it runs, and subagent.complete with its summary.
func TestGatewaySubagentLifecycle(t *testing.T) {
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		tg.srv.Enqueue(
			openaitest.ToolCalls(openaitest.Call{Name: "delegate_task", Args: []string{`{"goal":"count the files"}`}}),
			openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"ls | wc -l"}`}}), // the child
			openaitest.Text("3 files"), // the child's answer
			openaitest.Text("There are 3 files."),
		)
		from := len(c.Events())
		if done := turn(t, c, sid, "how many files?"); done["text"] != "There are 3 files." {
			t.Fatalf("turn %v", done)
		}
		kinds := []string{"subagent.spawn_requested", "subagent.start", "subagent.progress", "subagent.tool", "subagent.complete"}
		if got := typesOf(c, from, sid, kinds...); strings.Join(got, ",") != strings.Join(kinds, ",") {
			t.Fatalf("sub-agent events %v", got)
		}
		var child string
		for _, ev := range c.Events()[from:] {
			if ev.SessionID != sid || !strings.HasPrefix(ev.Type, "subagent.") {
				continue
			}
			p := payload(t, ev)
			if child == "" {
				child, _ = p["subagent_id"].(string)
			}
			if p["goal"] != "count the files" || p["subagent_id"] != child || child == "" || p["child_session_id"] != child ||
				p["depth"] != 1.0 || p["task_count"] != 1.0 || p["task_index"] != 0.0 || p["model"] == "" {
				t.Fatalf("%s: %v", ev.Type, p)
			}
			switch ev.Type {
			case "subagent.spawn_requested":
				if p["status"] != "queued" {
					t.Fatalf("spawn_requested %v", p)
				}
			case "subagent.start":
				if p["status"] != "running" {
					t.Fatalf("start %v", p)
				}
			case "subagent.progress":
				if p["api_calls"] != 1.0 || p["output_tokens"] != float64(openaitest.DefaultUsage().CompletionTokens) {
					t.Fatalf("progress %v", p)
				}
			case "subagent.tool":
				if p["tool_name"] != "terminal" || p["tool_preview"] != "ls | wc -l" {
					t.Fatalf("tool %v", p)
				}
			case "subagent.complete":
				if p["status"] != "completed" || p["summary"] != "3 files" || p["api_calls"] != 2.0 || p["duration_seconds"] == nil {
					t.Fatalf("complete %v", p)
				}
			}
		}
	})
}

// A background process the terminal tool started streams its output to every client attached
// to the session, after the turn that started it ended, and terminal.close reports its exit.
func TestGatewayBackgroundTerminalOutput(t *testing.T) {
	both(t, func(t *testing.T, tg *target) {
		c := open(t, tg, true)
		sid := create(t, c)
		// The process prints a line, waits for the test to create "go", then prints another.
		cmd := `echo first; while [ ! -f go ]; do sleep 0.05; done; echo second; exit 3`
		tg.srv.Enqueue(
			openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"` + cmd + `","background":true}`}}),
			openaitest.Text("started"),
		)
		from := len(c.Events())
		turn(t, c, sid, "start it")
		e, _ := waitType(t, c, from, sid, "agent.terminal.output")
		p := payload(t, e)
		if p["process_id"] != "proc_1" || p["chunk"] != "first\n" {
			t.Fatalf("first output %v", p)
		}
		c2 := open(t, tg, true)
		call(t, c2, "session.activate", map[string]any{"session_id": sid})
		from2 := len(c2.Events())
		if err := os.WriteFile(filepath.Join(tg.cwd, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cl := range []*gwclient.Client{c, c2} {
			start := from
			if cl == c2 {
				start = from2
			}
			e, i := waitType(t, cl, start, sid, "terminal.close")
			if p := payload(t, e); p["process_id"] != "proc_1" || p["exit_code"] != 3.0 {
				t.Fatalf("terminal.close %v", p)
			}
			var out strings.Builder
			for _, ev := range cl.Events()[start:i] {
				if ev.Type == "agent.terminal.output" && ev.SessionID == sid {
					out.WriteString(payload(t, ev)["chunk"].(string))
				}
			}
			want := "first\nsecond\n"
			if cl == c2 {
				want = "second\n"
			}
			if out.String() != want {
				t.Fatalf("streamed output %q, want %q", out.String(), want)
			}
		}
	})
}
