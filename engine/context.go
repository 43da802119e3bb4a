package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
)

// Context accounting and budgets (README "Long sessions"):
//
//   - A session's context window is Config.ContextWindows["provider:model"], else the
//     catalogue's context_window for the model, else Config.ContextWindow (default
//     DefaultContextWindow).
//   - The next request's size is the last call's reported usage (prompt plus completion
//     tokens) plus an estimate of the messages added since; with no usage to start from it is
//     the estimate of the whole request (system prompt, tool schemas, history, new prompt).
//   - Before a model call whose estimate crosses CompactThreshold of the window, the turn
//     compacts the transcript (status "compacting"); if the provider still answers
//     context_length_exceeded, it compacts harder and retries the call once.
//   - A tool result over its budget reaches the model truncated with a marker; the stored row
//     keeps the whole output.
const (
	// DefaultContextWindow is the window assumed for a model neither the configuration nor the
	// catalogue knows.
	DefaultContextWindow = 128000
	// DefaultCompactThreshold is the fraction of the window at which a turn compacts first,
	// the reference's default.
	DefaultCompactThreshold = policy.DefaultCompactThreshold
	// DefaultToolOutputBudget is the most bytes of one tool result the model sees.
	DefaultToolOutputBudget = 50000
)

// ErrContextExceeded fails a turn whose smallest possible request (system prompt, tool
// schemas, a summary of the conversation, the prompt and the newest tool exchange) is still
// larger than the model's context window.
var ErrContextExceeded = errors.New("context window exceeded")

// ContextInfo is a session's context use: the estimated size of its next request against the
// model's window. The field names are the gateway's session.usage ones.
type ContextInfo struct {
	Used    int `json:"context_used"`
	Max     int `json:"context_max"`
	Percent int `json:"context_percent"`
	// Estimated is true when Used is an estimate not anchored on a reported usage.
	Estimated bool `json:"context_estimated"`
	// Compressions counts the compactions (automatic and asked for) since the session opened.
	Compressions int `json:"compressions"`
}

// contextMeter is a session's calibration: the tokens the provider reported for the request
// (and answer) made of the first n messages of the transcript. Guarded by Session.mu.
type contextMeter struct {
	tokens, n    int
	used         int // the last estimate, for Info
	window       int
	estimated    bool
	compressions int
	truncated    bool // a tool result was cut to its budget: read_tool_output is offered
}

// contextWindow is the window of the model name ("provider:model").
func (e *Engine) contextWindow(name string) int {
	if w := e.cfg.ContextWindows[name]; w > 0 {
		return w
	}
	prov, m := model.ParseName(name)
	if cm, ok := e.catalog().Lookup(prov, m); ok && cm.ContextWindow > 0 {
		return cm.ContextWindow
	}
	return e.cfg.ContextWindow
}

// estimateTokens is a provider-independent estimate of messages' size in tokens: a quarter
// of their bytes plus a few tokens of framing per message, an image at a flat 800.
func estimateTokens(msgs []model.Message) int {
	n := 0
	for _, m := range msgs {
		b := len(m.Content) + len(m.Reasoning) + len(m.ToolCallID) + len(m.Name)
		for _, c := range m.ToolCalls {
			b += len(c.ID) + len(c.Name) + len(c.Arguments) + 32
		}
		n += 8 + (b+3)/4 + 800*len(m.Images)
	}
	return n
}

// specTokens estimates the tool schemas' share of a request.
func specTokens(specs []model.ToolSpec) int {
	if len(specs) == 0 {
		return 0
	}
	b, _ := json.Marshal(specs)
	return (len(b) + 3) / 4
}

// estimateNext estimates the request made of msgs (with the session's tools when tools is
// set), from the calibration when msgs extends the calibrated transcript.
func (s *Session) estimateNext(msgs []model.Message, tools bool) (int, bool) {
	s.mu.Lock()
	c := s.meter
	s.mu.Unlock()
	if c.n > 0 && c.n <= len(msgs) {
		return c.tokens + estimateTokens(msgs[c.n:]), false
	}
	n := estimateTokens(msgs)
	if tools {
		n += specTokens(s.toolSpecs())
	}
	return n, true
}

// noteContext records the estimate of the next request for Info.
func (s *Session) noteContext(used, window int, estimated bool) {
	s.mu.Lock()
	s.meter.used, s.meter.window, s.meter.estimated = used, window, estimated
	s.mu.Unlock()
}

// calibrate anchors the estimate: the request of msgs[:n] plus its answer took tokens.
func (s *Session) calibrate(tokens, n int) {
	s.mu.Lock()
	s.meter.tokens, s.meter.n = tokens, n
	s.meter.used, s.meter.estimated = tokens, false
	s.mu.Unlock()
}

// uncalibrate drops the anchor after the transcript was rewritten (compaction, rewind).
func (s *Session) uncalibrate() {
	s.mu.Lock()
	s.meter.tokens, s.meter.n = 0, 0
	s.mu.Unlock()
}

// Context reports the session's context use: the estimate made before the last model call
// (anchored on the usage reported since, when there was some), or, for a session that made no
// call since it opened, an estimate of its stored transcript.
func (s *Session) Context() ContextInfo {
	s.mu.Lock()
	c := s.meter
	name := s.rec.Model
	s.mu.Unlock()
	if c.window == 0 {
		if n, err := s.e.canonicalModel(name); err == nil {
			name = n
		}
		c.window = s.e.contextWindow(name)
		// Nothing is used before anything was said (a session stored at birth, not prompted yet).
		if msgs, err := s.loadMessages(context.Background()); err == nil && s.Stored() && !s.Unprompted() {
			c.used, c.estimated = estimateTokens(msgs)+specTokens(s.toolSpecs()), true
			s.noteContext(c.used, c.window, true)
		}
	}
	ci := ContextInfo{Used: c.used, Max: c.window, Estimated: c.estimated, Compressions: c.compressions}
	ci.Percent = percent(ci.Used, ci.Max)
	return ci
}

// canonicalModel resolves a session's model name without building a provider.
func (e *Engine) canonicalModel(name string) (string, error) {
	n, _, err := e.ResolveModel(name)
	return n, err
}

// isContextOverflow reports whether err is a provider refusing a request as too long for the
// model's window: OpenAI's context_length_exceeded, and the wording other providers use.
func isContextOverflow(err error) bool {
	var me *model.Error
	if !errors.As(err, &me) {
		return false
	}
	if me.Code == "context_length_exceeded" || me.Code == "string_above_max_length" {
		return true
	}
	msg := strings.ToLower(me.Message)
	return strings.Contains(msg, "prompt is too long") || strings.Contains(msg, "maximum context length") ||
		strings.Contains(msg, "context window") || strings.Contains(msg, "context length")
}

// budgetToolOutput is what the model sees of a tool result: the whole of it within the tool's
// budget, else its head and tail around a marker saying how much was left out and how to get
// at the rest. The stored row always keeps the whole output.
func (s *Session) budgetToolOutput(toolName, callID, content string) string {
	budget := s.e.cfg.ToolOutputBudget
	if b, ok := s.e.cfg.ToolOutputBudgets[toolName]; ok && b > 0 {
		budget = b
	}
	if len(content) <= budget {
		return content
	}
	s.mu.Lock()
	s.meter.truncated = true // offer read_tool_output from now on
	s.mu.Unlock()
	head, tail := budget*2/3, budget/3
	h, t := validPrefix(content[:head]), validSuffix(content[len(content)-tail:])
	omitted := len(content) - len(h) - len(t)
	return h + fmt.Sprintf("\n\n[tool output truncated: %d of %d bytes omitted here (budget %d bytes). The whole output is stored; read the rest with the %s tool (call_id %q, offset %d).]\n\n", omitted, len(content), budget, ToolOutputName, callID, len(h)) + t
}

// validPrefix drops a UTF-8 sequence cut at the end of s.
func validPrefix(s string) string {
	for i := 0; i < 4 && len(s) > 0 && !isValidEnd(s); i++ {
		s = s[:len(s)-1]
	}
	return s
}

// validSuffix drops UTF-8 continuation bytes at the start of s.
func validSuffix(s string) string {
	for i := 0; i < 4 && len(s) > 0 && s[0]&0xC0 == 0x80; i++ {
		s = s[1:]
	}
	return s
}

func isValidEnd(s string) bool {
	for i := len(s) - 1; i >= 0 && i >= len(s)-4; i-- {
		c := s[i]
		switch {
		case c < 0x80:
			return true
		case c&0xC0 == 0x80:
			continue
		default:
			need := 2
			if c >= 0xF0 {
				need = 4
			} else if c >= 0xE0 {
				need = 3
			}
			return len(s)-i == need
		}
	}
	return true
}

// fitMessages clips the longest contents of msgs (never the first, the system prompt, nor the
// last) until their estimate is within budget tokens or nothing is left to clip. It is used for
// the summarisation request, which must fit the window the conversation outgrew.
func fitMessages(msgs []model.Message, budget int) []model.Message {
	out := append([]model.Message(nil), msgs...)
	for estimateTokens(out) > budget {
		big := -1
		for i := 1; i < len(out)-1; i++ {
			if big < 0 || len(out[i].Content) > len(out[big].Content) {
				big = i
			}
		}
		if big < 0 || len(out[big].Content) < 256 {
			return out
		}
		c := out[big].Content
		keep := len(c) / 4
		out[big].Content = validPrefix(c[:keep]) + fmt.Sprintf("\n[… %d bytes left out of this summary input …]\n", len(c)-2*keep) + validSuffix(c[len(c)-keep:])
	}
	return out
}

// fitContext runs before each model call of a turn: it estimates the request and, when the
// compact policy says so (by default: the estimate crosses the compaction threshold), compacts
// the transcript (gently, then harder if that was not enough) and reloads it. It fails only
// when the request is larger than the whole window and nothing is left to compact.
func (t *turnState) fitContext(name string, msgs []model.Message) ([]model.Message, error) {
	s := t.s
	window := s.e.contextWindow(name)
	est, rough := s.estimateNext(msgs, true)
	s.noteContext(est, window, rough)
	d := t.compactDecision(name, est, window, policy.CompactThreshold)
	if !d.Compact {
		return msgs, nil
	}
	for _, hard := range []bool{false, true} {
		ci := s.Context()
		res, err := s.compact(t.ctx, compaction{hard: hard, kind: "compacting", turnID: t.id, prompt: d.Prompt,
			text: "compacting the conversation to fit the context window", ctx: &ci})
		if err != nil {
			if est <= window { // carry on uncompacted; the provider has the last word
				s.j.append(Event{Type: EvStatus, TurnID: t.id, Data: StatusInfo{Status: StatusWorking, Kind: "compacting", Text: "compaction failed: " + clip(err.Error(), 200)}})
				return msgs, nil
			}
			return msgs, fmt.Errorf("%w: compaction failed: %v", ErrContextExceeded, err)
		}
		if res.Status != "compressed" {
			continue
		}
		if msgs, err = t.s.loadMessages(t.ctx); err != nil {
			return msgs, err
		}
		est, rough = s.estimateNext(msgs, true)
		s.noteContext(est, window, rough)
		t.compacted(res)
		if !(policy.CompactInput{ContextUsed: est, ContextMax: window}).Over(d.Threshold) {
			break
		}
	}
	if est > window {
		return msgs, fmt.Errorf("%w: the smallest request this turn can make is about %d tokens, the model's window is %d", ErrContextExceeded, est, window)
	}
	return msgs, nil
}

// compactHarder answers a provider's context_length_exceeded: the hard compaction, then the
// reloaded transcript for the one retry.
func (t *turnState) compactHarder(name string, msgs []model.Message, cause error) ([]model.Message, error) {
	s := t.s
	window := s.e.contextWindow(name)
	est, _ := s.estimateNext(msgs, true)
	d := t.compactDecision(name, est, window, policy.CompactOverflow)
	if !d.Compact {
		return msgs, fmt.Errorf("%w: %v; the compact policy declined to compact", ErrContextExceeded, cause)
	}
	ci := s.Context()
	res, err := s.compact(t.ctx, compaction{hard: true, kind: "compacting", turnID: t.id, prompt: d.Prompt,
		text: "compacting the conversation: the provider refused the request as too long", ctx: &ci})
	if err != nil {
		return msgs, fmt.Errorf("%w: %v; compaction failed: %v", ErrContextExceeded, cause, err)
	}
	if res.Status != "compressed" {
		return msgs, fmt.Errorf("%w: %v; nothing is left to compact (the prompt alone is too large)", ErrContextExceeded, cause)
	}
	msgs, err = t.s.loadMessages(t.ctx)
	if err == nil {
		after, rough := s.estimateNext(msgs, true)
		s.noteContext(after, window, rough)
		t.compacted(res)
	}
	return msgs, err
}

// compacted announces a finished compaction of the turn: status kind "compacted", whose text
// says how many rows were archived (summarised, or copied behind the summary), with the
// context the compaction left.
func (t *turnState) compacted(res CompressResult) {
	ci := t.s.Context()
	t.s.j.append(Event{Type: EvStatus, TurnID: t.id, Data: StatusInfo{Status: StatusWorking, Kind: "compacted",
		Text: fmt.Sprintf("compacted: %d rows archived behind a summary", res.Removed), Context: &ci}})
}

// compactDecision asks the compact policy whether to compact now and with which prompt. A hook
// that fails (errors, times out, returns garbage) falls back to the configured Go policy; the
// fallback, and a decision other than the built-in one, are recorded as policy.decision events.
func (t *turnState) compactDecision(name string, used, window int, reason string) policy.CompactDecision {
	s := t.s
	in := policy.CompactInput{SessionID: s.id, Model: name, ContextUsed: used, ContextMax: window,
		Percent: percent(used, window), Threshold: s.e.cfg.CompactThreshold, Reason: reason}
	def, _ := policy.Defaults{}.Compact(t.ctx, in)
	hctx, cancel := context.WithTimeout(t.ctx, s.e.cfg.HookTimeout)
	defer cancel()
	hook, fallback := s.e.cfg.Policy.Compact, s.e.cfg.Fallback.Compact // nil: the built-in rule
	if hook == nil {
		hook = policy.Defaults{}
	}
	d, err := hook.Compact(hctx, in)
	if err != nil {
		fd := def
		if fallback != nil {
			if d, ferr := fallback.Compact(context.WithoutCancel(hctx), in); ferr == nil {
				fd = d
			}
		}
		s.j.append(Event{Type: EvPolicyDecision, TurnID: t.id, Data: PolicyDecision{Hook: "compact", Decision: compactWord(fd.Compact), Error: err.Error()}})
		return fd
	}
	if d.Compact != def.Compact || (d.Compact && d.Prompt != "") {
		s.j.append(Event{Type: EvPolicyDecision, TurnID: t.id, Data: PolicyDecision{Hook: "compact", Decision: compactWord(d.Compact),
			Reason: fmt.Sprintf("%s: context %d%% of %d tokens, threshold %g", reason, in.Percent, window, d.Threshold)}})
	}
	return d
}

func compactWord(compact bool) string {
	if compact {
		return "compact"
	}
	return "keep"
}

// percent is used as a whole percentage of window.
func percent(used, window int) int {
	if window <= 0 {
		return 0
	}
	return int(math.Round(100 * float64(used) / float64(window)))
}

// ContextCategory is one share of a session's next request.
type ContextCategory struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Color  string `json:"color"`
	Tokens int    `json:"tokens"`
}

// ContextBreakdown splits the estimate of a session's next request by what it is made of.
type ContextBreakdown struct {
	ContextInfo
	Model      string            `json:"model"`
	Categories []ContextCategory `json:"categories"`
	// EstimatedTotal is the sum of the categories; Used may differ when it is anchored on a
	// reported usage.
	EstimatedTotal int `json:"estimated_total"`
}

// ContextBreakdown estimates the session's next request by category: system prompt, tool
// schemas, conversation summaries, messages, tool results (as the model sees them, within
// their budgets).
func (s *Session) ContextBreakdown(ctx context.Context) (ContextBreakdown, error) {
	msgs, err := s.loadMessages(ctx)
	if err != nil {
		return ContextBreakdown{}, err
	}
	rows, err := s.History(ctx, store.RowQuery{})
	if err != nil {
		return ContextBreakdown{}, err
	}
	cats := []ContextCategory{
		{ID: "system", Label: "System prompt", Color: "#8b5cf6", Tokens: estimateTokens(msgs[:1])},
		{ID: "tools", Label: "Tool schemas", Color: "#f59e0b", Tokens: specTokens(s.toolSpecs())},
		{ID: "summary", Label: "Summaries", Color: "#10b981"},
		{ID: "messages", Label: "Messages", Color: "#3b82f6"},
		{ID: "tool_results", Label: "Tool results", Color: "#ef4444"},
	}
	for i, m := range msgs[1:] {
		k := 3
		switch {
		case i < len(rows) && rows[i].DisplayKind == "summary":
			k = 2
		case m.Role == "tool":
			k = 4
		}
		cats[k].Tokens += estimateTokens(msgs[1+i : 2+i])
	}
	b := ContextBreakdown{ContextInfo: s.Context(), Model: s.Record().Model, Categories: cats}
	for _, c := range cats {
		b.EstimatedTotal += c.Tokens
	}
	return b, nil
}
