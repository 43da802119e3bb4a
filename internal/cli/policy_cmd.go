package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/agent"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/engine/tool/danger"
	"github.com/hermes-go/hermes/scripting"
	"github.com/hermes-go/hermes/stdlib"
)

// policyPath is the policy file in effect: the configured one (HERMES_POLICY, config policy:),
// else $HERMES_HOME/policy.js, policy.ts or policy.lua; "" when there is none.
func policyPath(cfg *config.Config) (string, error) {
	if cfg.Policy != "" {
		return cfg.Policy, nil
	}
	var found []string
	for _, name := range []string{"policy.js", "policy.ts", "policy.lua"} {
		p := filepath.Join(cfg.Home, name)
		if _, err := os.Stat(p); err == nil {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("both %s and %s exist: remove one, or choose with HERMES_POLICY", found[0], found[len(found)-1])
}

// classifier does what the engine does before the approval hook: the tool's guard gives the
// command text and the dangerous-pattern keys.
func classifier(reg *tool.Registry) func(name string, args []byte, cwd string) (string, []string) {
	return func(name string, args []byte, cwd string) (string, []string) {
		t, err := reg.Get(name)
		if err != nil {
			return "", nil
		}
		g, ok := t.(tool.Guard)
		if !ok {
			return "", nil
		}
		v := g.Check(args, &tool.Env{Cwd: cwd})
		return v.Command, v.Patterns
	}
}

// policyOptions are the scripting options the configuration asks for.
func policyOptions(cfg *config.Config, reg *tool.Registry, fallback policy.Set) (scripting.Options, error) {
	cwd := cfg.Cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	grants, err := stdlib.ParseGrants(cfg.Scripts.Grants, cwd)
	if err != nil {
		return scripting.Options{}, fmt.Errorf("config scripts.grants: %w", err)
	}
	mem := int64(cfg.Scripts.MemoryMB) << 20
	return scripting.Options{
		Timeout:     time.Duration(cfg.Scripts.HookTimeout),
		MemoryLimit: mem,
		Workers:     cfg.Scripts.Workers,
		Grants:      grants,
		Logger:      newLogger(os.Stderr, slog.LevelWarn),
		Fallback:    fallback,
		Classify:    classifier(reg),
	}, nil
}

// policyHandle is what build() keeps of the policy: the per-session dispatcher (hermes run
// binds session policies to it) and the VMs to close.
type policyHandle struct {
	sessions *scripting.Sessions
	mu       sync.Mutex
	closers  []io.Closer
}

func (h *policyHandle) add(c io.Closer) {
	h.mu.Lock()
	h.closers = append(h.closers, c)
	h.mu.Unlock()
}

// Close stops every policy's VMs.
func (h *policyHandle) Close() error {
	h.mu.Lock()
	cs := h.closers
	h.closers = nil
	h.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// loadPolicy builds the engine's policy: the policy script in effect (its examples checked),
// with fallback answering the hooks it does not define; fallback alone when there is no
// script. Sessions may later be given their own policy through the returned handle.
func loadPolicy(cfg *config.Config, reg *tool.Registry, fallback policy.Set) (policy.Set, io.Closer, error) {
	path, err := policyPath(cfg)
	if err != nil {
		return policy.Set{}, nil, err
	}
	base, h := fallback, &policyHandle{}
	if path != "" {
		o, err := policyOptions(cfg, reg, fallback)
		if err != nil {
			return policy.Set{}, nil, err
		}
		set, closer, err := scripting.LoadPolicy(path, o)
		if err != nil {
			return policy.Set{}, nil, err
		}
		base = set
		h.add(closer)
	}
	h.sessions = scripting.NewSessions(base, nil)
	return h.sessions.Set(), h, nil
}

// toolRegistry is the registry build() assembles, for commands that only need the guards.
func toolRegistry(cfg *config.Config) *tool.Registry {
	opts := danger.Options{Home: homeDir(), HermesHome: cfg.Home}
	check := func(cmd string) tool.Verdict {
		r := danger.Check(cmd, opts)
		v := tool.Verdict{Blocked: r.Hardline, Reason: r.Reason, Command: cmd}
		for _, m := range r.Matches {
			v.Patterns = append(v.Patterns, m.Key)
		}
		return v
	}
	reg := tool.NewRegistry(builtin.Defaults(check)...)
	reg.Add(agent.Clarify{})
	reg.Add(agent.Delegate{})
	return reg
}

const policyUsage = `usage:
  hermes policy test [-v] [--json] [--watch] FILE...
                                                 check each policy's examples (exit 1 if one fails or a file does not load)
  hermes policy eval FILE --hook NAME --input JSON
                                                 run one hook on one input and print its decision as JSON
  hermes policy replay SESSION --policy FILE     re-decide a stored session's tool calls; print the changes
        [--against FILE] [--all] [--exit-code] [--json]
  hermes policy show                             the policy in effect and the hooks it defines`

func runPolicy(ctx context.Context, args []string, io stdio) int {
	if len(args) == 0 {
		fmt.Fprintln(io.err, policyUsage)
		return 2
	}
	switch args[0] {
	case "test":
		return runPolicyTest(ctx, args[1:], io)
	case "replay":
		return runPolicyReplay(ctx, args[1:], io)
	case "eval":
		return runPolicyEval(ctx, args[1:], io)
	case "show":
		return runPolicyShow(ctx, args[1:], io)
	case "-h", "--help", "help":
		fmt.Fprintln(io.out, policyUsage)
		return 0
	}
	fmt.Fprintf(io.err, "hermes policy: unknown subcommand %q\n%s\n", args[0], policyUsage)
	return 2
}

func runPolicyTest(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("policy test", flag.ContinueOnError)
	fs.SetOutput(io.err)
	verbose := fs.Bool("v", false, "list passing examples too")
	jsonOut := fs.Bool("json", false, "print a JSON object per example (and per file that does not load), then a summary")
	watch := fs.Bool("watch", false, "check again whenever a policy file changes; Ctrl-C stops")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(io.err, "usage: hermes policy test [-v] [--json] [--watch] FILE...")
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	o, err := policyOptions(cfg, toolRegistry(cfg), policy.Set{})
	if err != nil {
		return fail(io, err)
	}
	o.SkipExamples = true
	once := func(ctx context.Context) int {
		return policyTestOnce(ctx, o, fs.Args(), *verbose, *jsonOut, io)
	}
	if *watch {
		return watchLoop(ctx, io, fs.Args(), once)
	}
	return once(ctx)
}

// exampleJSON is one line of policy test --json.
type exampleJSON struct {
	Type   string         `json:"type"` // example, or load_error for a file that does not load
	File   string         `json:"file"`
	Line   int            `json:"line,omitempty"`
	Index  int            `json:"index,omitempty"`
	Name   string         `json:"name,omitempty"`
	Hook   string         `json:"hook,omitempty"`
	Status string         `json:"status"`
	Want   any            `json:"want,omitempty"`
	Got    map[string]any `json:"got,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// policyExamples loads a policy file (o.SkipExamples set: a failing example is a result, not
// a load error) and checks its examples: hermes policy test and hermes doctor.
func policyExamples(ctx context.Context, o scripting.Options, file string) ([]scripting.ExampleResult, error) {
	p, err := scripting.Open(file, o)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.RunExamples(ctx), nil
}

func policyTestOnce(ctx context.Context, o scripting.Options, files []string, verbose, jsonOut bool, io stdio) int {
	enc := json.NewEncoder(io.out)
	enc.SetEscapeHTML(false)
	passed, failed := 0, 0
	for _, file := range files {
		results, err := policyExamples(ctx, o, file)
		if err != nil {
			failed++
			if jsonOut {
				_ = enc.Encode(exampleJSON{Type: "load_error", File: file, Status: "fail", Error: err.Error()})
			} else if strings.HasPrefix(err.Error(), filepath.Base(file)+":") {
				fmt.Fprintf(io.out, "FAIL %v\n", err) // the error names the file already
			} else {
				fmt.Fprintf(io.out, "FAIL %s: %v\n", file, err)
			}
			continue
		}
		if len(results) == 0 {
			fmt.Fprintf(io.err, "%s: loads, but has no examples to check\n", file)
		}
		for _, r := range results {
			if r.Pass {
				passed++
			} else {
				failed++
			}
			if jsonOut {
				line := exampleJSON{Type: "example", File: file, Line: r.Line, Index: r.Index, Name: r.Name, Hook: r.Hook,
					Status: "pass", Want: r.Want, Got: r.Got, Error: r.Problem()}
				if !r.Pass {
					line.Status = "fail"
				}
				if r.Err != nil { // the decision the engine would fall back to is not the hook's
					line.Got, line.Error = nil, r.Err.Error()
				}
				if r.ExpectError {
					line.Want = map[string]any{"error": r.Example.Error}
				}
				_ = enc.Encode(line)
				continue
			}
			if !r.Pass || verbose {
				fmt.Fprintln(io.out, r.String())
			}
		}
	}
	if jsonOut {
		_ = enc.Encode(map[string]any{"type": "summary", "passed": passed, "failed": failed, "ok": failed == 0})
	} else {
		fmt.Fprintf(io.out, "%d passed, %d failed\n", passed, failed)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// runPolicyEval runs one hook of a policy file on one input: opa eval's job for policies.
func runPolicyEval(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("policy eval", flag.ContinueOnError)
	fs.SetOutput(io.err)
	hook := fs.String("hook", scripting.HookApproval, "the hook to run: "+strings.Join(scripting.Hooks, ", "))
	input := fs.String("input", "{}", "the hook's input as a JSON object, written as an example's input (- reads stdin)")
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
	}
	if file == "" {
		fmt.Fprintln(io.err, "usage: hermes policy eval FILE --hook NAME --input JSON")
		return 2
	}
	raw := []byte(*input)
	if *input == "-" {
		var err error
		if raw, err = readAllFrom(io.in); err != nil {
			return fail(io, err)
		}
	}
	if !slices.Contains(scripting.Hooks, *hook) {
		fmt.Fprintf(io.err, "hermes policy eval: unknown hook %q (want %s)\n", *hook, strings.Join(scripting.Hooks, ", "))
		return 2
	}
	var parsed any
	if err := json.Unmarshal(raw, &parsed); err != nil {
		fmt.Fprintln(io.err, "hermes policy eval: --input must be a JSON object:", err)
		return 2
	}
	in, ok := parsed.(map[string]any)
	if !ok {
		b, _ := json.Marshal(parsed)
		fmt.Fprintf(io.err, "hermes policy eval: --input must be a JSON object, not %s\n", b)
		return 2
	}
	// A misspelt or mistyped field would be ignored and the hook would see its default.
	in = stdlibNumbers(in)
	if err := scripting.CheckInput(*hook, in); err != nil {
		fmt.Fprintln(io.err, "hermes policy eval: --input:", err)
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	o, err := policyOptions(cfg, toolRegistry(cfg), policy.Set{})
	if err != nil {
		return fail(io, err)
	}
	o.SkipExamples = true
	p, err := scripting.Open(file, o)
	if err != nil {
		return fail(io, err)
	}
	defer p.Close()
	got, _, err := p.Eval(ctx, *hook, in)
	enc := json.NewEncoder(io.out)
	enc.SetEscapeHTML(false)
	source := "script"
	if !p.Has(*hook) {
		source = "built-in default"
	}
	if err != nil {
		_ = enc.Encode(map[string]any{"hook": *hook, "source": source, "error": err.Error()})
		return 1
	}
	_ = enc.Encode(map[string]any{"hook": *hook, "source": source, "decision": got})
	return 0
}

func runPolicyShow(_ context.Context, _ []string, io stdio) int {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return fail(io, err)
	}
	path, err := policyPath(cfg)
	if err != nil {
		return fail(io, err)
	}
	if path == "" {
		fmt.Fprintf(io.out, "no policy script (built-in Go policy); put one at %s or %s, or set HERMES_POLICY\n",
			filepath.Join(cfg.Home, "policy.js"), filepath.Join(cfg.Home, "policy.lua"))
		return 0
	}
	o, err := policyOptions(cfg, toolRegistry(cfg), policy.Set{})
	if err != nil {
		return fail(io, err)
	}
	p, err := scripting.Open(path, o)
	if err != nil {
		return fail(io, err)
	}
	defer p.Close()
	fmt.Fprintf(io.out, "policy: %s (%s)\n", path, p.Lang())
	for _, h := range scripting.Hooks {
		src := "built-in default"
		if p.Has(h) {
			src = "script"
		}
		fmt.Fprintf(io.out, "  %-10s %s\n", h, src)
	}
	fmt.Fprintf(io.out, "examples: %d, all hold\nlimits: %s per call, %d MiB heap growth, grants %v\n",
		len(p.Examples()), time.Duration(cfg.Scripts.HookTimeout), cfg.Scripts.MemoryMB, cfg.Scripts.Grants)
	return 0
}

// replayCall is one stored tool call with what happened to it.
type replayCall struct {
	n      int
	name   string
	args   json.RawMessage
	ran    bool // false when the stored result says it was blocked or denied
	result string
}

func runPolicyReplay(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("policy replay", flag.ContinueOnError)
	fs.SetOutput(io.err)
	newPath := fs.String("policy", "", "the policy to evaluate (required)")
	against := fs.String("against", "", "compare with this policy (default: the policy in effect, or the built-in one)")
	all := fs.Bool("all", false, "print every decision, not only the changes")
	exitCode := fs.Bool("exit-code", false, "exit 1 when any decision would change, 0 when none, 2 when the replay could not run")
	jsonOut := fs.Bool("json", false, "print a JSON object per tool call (every one, changed or not), then a summary")
	// Accept the session before or after the flags.
	var session string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		session, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if session == "" && fs.NArg() > 0 {
		session = fs.Arg(0)
	}
	// With --exit-code a replay that could not run (no such session, a policy that does not
	// load) exits 2, never 1, which says the decisions changed (as diff does).
	trouble := func(err error) int {
		if code := fail(io, err); !*exitCode {
			return code
		}
		return 2
	}
	if session == "" || *newPath == "" {
		fmt.Fprintln(io.err, "usage: hermes policy replay SESSION --policy FILE [--against FILE] [--all] [--exit-code]")
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return trouble(err)
	}
	reg := toolRegistry(cfg)
	o, err := policyOptions(cfg, reg, policy.Set{})
	if err != nil {
		return trouble(err)
	}
	newPol, err := scripting.Open(*newPath, o)
	if err != nil {
		return trouble(err)
	}
	defer newPol.Close()
	oldSet, oldName := policy.Set{Approver: policy.Defaults{}}, "built-in"
	oldPath := *against
	if oldPath == "" {
		if oldPath, err = policyPath(cfg); err != nil {
			return trouble(err)
		}
	}
	if oldPath != "" {
		oldPol, err := scripting.Open(oldPath, o)
		if err != nil {
			return trouble(err)
		}
		defer oldPol.Close()
		oldSet, oldName = oldPol.Set(), oldPath
	}
	st, err := openStore(cfg)
	if err != nil {
		return trouble(err)
	}
	defer st.Close()
	rec, err := st.GetSession(ctx, session)
	if errors.Is(err, store.ErrNotFound) {
		return trouble(fmt.Errorf("no session %q (hermes sessions lists them)", session))
	}
	if err != nil {
		return trouble(err)
	}
	calls, err := replayCalls(ctx, st, session)
	if err != nil {
		return trouble(err)
	}
	classify := classifier(reg)
	changed := 0
	enc := json.NewEncoder(io.out)
	enc.SetEscapeHTML(false)
	for _, c := range calls {
		cmd, pats := classify(c.name, c.args, rec.Cwd)
		in := policy.ApprovalInput{SessionID: session, Surface: "replay", Tool: c.name, Command: cmd, Args: c.args, Cwd: rec.Cwd, Patterns: pats}
		if len(pats) > 0 {
			in.Pattern = pats[0]
		}
		was, werr := oldSet.Approver.Approve(ctx, in)
		now, nerr := newPol.Set().Approver.Approve(ctx, in)
		wasS, nowS := decisionText(was, werr), decisionText(now, nerr)
		diff := was.Decision != now.Decision || (werr == nil) != (nerr == nil)
		if diff {
			changed++
		}
		if *jsonOut {
			_ = enc.Encode(map[string]any{"type": "call", "n": c.n, "tool": c.name, "command": cmd, "args": c.args,
				"stored": map[bool]string{true: "ran", false: "blocked"}[c.ran], "was": wasS, "now": nowS, "changed": diff})
			continue
		}
		if !diff && !*all {
			continue
		}
		what := cmd
		if what == "" {
			what = clipLine(string(c.args), 100)
		}
		mark := "  "
		if diff {
			mark = "≠ "
		}
		outcome := "ran"
		if !c.ran {
			outcome = "blocked"
		}
		fmt.Fprintf(io.out, "%s#%d %s %s\n     %s → %s   (stored call %s)\n", mark, c.n, c.name, what, wasS, nowS, outcome)
	}
	if *jsonOut {
		_ = enc.Encode(map[string]any{"type": "summary", "session_id": session, "calls": len(calls), "changed": changed, "against": oldName, "policy": *newPath})
	} else {
		fmt.Fprintf(io.out, "%d of %d tool calls would be decided differently (%s → %s)\n", changed, len(calls), oldName, *newPath)
	}
	if *exitCode && changed > 0 {
		return 1
	}
	return 0
}

func decisionText(d policy.ApprovalDecision, err error) string {
	if err != nil {
		return "deny (hook failed: " + err.Error() + ")"
	}
	if d.Reason != "" {
		return d.Decision + " (" + d.Reason + ")"
	}
	return d.Decision
}

// storedCalls lists the tool calls of a transcript in order, with whether each ran.
// replayCalls is every tool call a session ever made, in order: the rows a compaction or a
// rewind archived behind a summary included (they stay in the store as lineage).
func replayCalls(ctx context.Context, st store.Store, session string) ([]replayCall, error) {
	rows, err := st.Rows(ctx, session, store.RowQuery{IncludeArchived: true})
	if err != nil {
		return nil, err
	}
	return storedCalls(rows), nil
}

func storedCalls(rows []store.Row) []replayCall {
	var out []replayCall
	index := map[string]int{}
	for _, r := range rows {
		switch r.Role {
		case "assistant":
			var tcs []model.ToolCall
			if len(r.ToolCalls) == 0 || json.Unmarshal(r.ToolCalls, &tcs) != nil {
				continue
			}
			for _, tc := range tcs {
				args := json.RawMessage(strings.TrimSpace(tc.Arguments))
				if len(args) == 0 || !json.Valid(args) {
					args = json.RawMessage("{}")
				}
				index[tc.ID] = len(out)
				out = append(out, replayCall{n: len(out) + 1, name: tc.Name, args: args, ran: true})
			}
		case "tool":
			if i, ok := index[r.ToolCallID]; ok {
				out[i].result = r.Content
				out[i].ran = !strings.HasPrefix(r.Content, "BLOCKED")
			}
		}
	}
	return out
}

func readAllFrom(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, errors.New("no standard input")
	}
	return io.ReadAll(r)
}

// stdlibNumbers gives JSON numbers the form script values have (whole numbers as int64), so
// an input read from JSON matches one written in a policy file.
func stdlibNumbers(v map[string]any) map[string]any {
	var conv func(any) any
	conv = func(x any) any {
		switch t := x.(type) {
		case float64:
			return stdlib.Number(t)
		case map[string]any:
			for k, e := range t {
				t[k] = conv(e)
			}
		case []any:
			for i, e := range t {
				t[i] = conv(e)
			}
		}
		return x
	}
	return conv(v).(map[string]any)
}
