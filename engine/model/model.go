// Package model defines the provider-neutral request and stream types the engine speaks, and the
// Provider interface every model backend (OpenAI-compatible HTTP, cassette replay) implements.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"
)

// Message is one transcript entry in the shape providers consume.
type Message struct {
	Role       string     `json:"role"` // system | user | assistant | tool
	Content    string     `json:"content"`
	Reasoning  string     `json:"reasoning,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"` // tool name on role "tool"
	// Images are image URLs (https: or data:) sent with a user message as content parts.
	Images []string `json:"images,omitempty"`
	// Thinking holds an assistant message's reasoning blocks as the provider returned them,
	// signatures included, for providers that require them back on the next request of the
	// turn (Anthropic's extended thinking with tool use). Reasoning is their plain text.
	Thinking []ThinkingBlock `json:"thinking,omitempty"`
}

// ThinkingBlock is one signed reasoning block. Redacted blocks carry only Data, the opaque
// encrypted form the provider asks to be sent back unchanged.
type ThinkingBlock struct {
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// ToolCall is a complete function call requested by the model.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // raw JSON text as the model produced it
}

// ToolSpec describes a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON schema object
}

// Request is one model call.
type Request struct {
	Model       string
	Messages    []Message
	Tools       []ToolSpec
	MaxTokens   int
	Temperature *float64
}

// ToolCallDelta is one fragment of a streamed tool call. Index identifies the call within the
// response; ID and Name arrive on the first fragment of a call only.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Usage counts tokens for one model call. PromptTokens is every input token, cached ones
// included: CachedTokens of them were read from the provider's prompt cache and
// CacheWriteTokens written to it.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CachedTokens     int `json:"cached_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
	// CostUSD is what the call cost at the catalogue's prices, 0 when the model has none.
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.PromptTokens += u2.PromptTokens
	u.CompletionTokens += u2.CompletionTokens
	u.TotalTokens += u2.TotalTokens
	u.CachedTokens += u2.CachedTokens
	u.CacheWriteTokens += u2.CacheWriteTokens
	u.ReasoningTokens += u2.ReasoningTokens
	u.CostUSD += u2.CostUSD
}

// Chunk is one streamed fragment. Exactly the fields the provider sent are set; a chunk may
// carry several (text and a finish reason, say).
type Chunk struct {
	Text      string
	Reasoning string
	// Thinking is a completed signed reasoning block (its text already streamed as Reasoning).
	Thinking     *ThinkingBlock
	ToolCalls    []ToolCallDelta
	Usage        *Usage
	FinishReason string
	// Fallback announces that the call moved to another model; it arrives before that
	// model's first chunk.
	Fallback *Fallback
}

// Fallback describes a switch to the next model of a fallback list after a failure.
type Fallback struct {
	From   string `json:"from"`   // provider:model that failed
	To     string `json:"to"`     // provider:model tried next
	Reason string `json:"reason"` // the failure
}

// Provider streams one model call. The sequence ends after the final chunk, or after yielding a
// non-nil error (then it stops). Implementations must honour ctx cancellation promptly.
type Provider interface {
	Stream(ctx context.Context, r Request) iter.Seq2[Chunk, error]
}

// Catalog is an optional Provider ability: the model names it is known to serve, checked
// offline. A provider that cannot enumerate its models does not implement it.
type Catalog interface {
	Models() []string
}

// Checker is an optional Provider ability: whether it can serve a model name at all, checked
// before a session is switched to the name or a turn calls it (the replay provider: whether the
// cassette is one it may open, and loads). An error says why not; it is reported as an invalid
// model, so nothing is switched to a name that could only fail.
type Checker interface {
	CheckModel(name string) error
}

// Error is a provider failure with the HTTP status and the provider's error envelope.
type Error struct {
	Status    int    // HTTP status, 0 when the failure is not an HTTP response (stream error)
	Type      string // provider error type, e.g. invalid_request_error
	Code      string // provider error code, e.g. invalid_api_key
	Message   string
	Retryable bool
	// RetryAfter is the delay the server asked for (Retry-After), 0 when it gave none.
	RetryAfter time.Duration
	// Attempts is how many times the request was sent before giving up; more than one
	// means the retry budget was spent.
	Attempts int
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("model provider error")
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " [%s]", e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (gave up after %d attempts: retry budget spent)", e.Attempts)
	}
	return b.String()
}

// ErrUnknownProvider is returned for a model name whose provider is not configured.
var ErrUnknownProvider = errors.New("unknown model provider")

// ErrUnreachable is matched (errors.Is) by every provider's transport failure: the endpoint
// could not be reached or the connection broke before a response arrived. Like a retryable
// *Error, it is worth trying again or trying another model.
var ErrUnreachable = errors.New("model endpoint unreachable")

// Retryable reports whether err is a failure another attempt may cure: a retryable provider
// error or an unreachable endpoint.
func Retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable || errors.Is(err, ErrUnreachable)
}

// ParseName splits "provider:model". A name without a colon has an empty provider, which
// callers resolve to their default provider.
func ParseName(name string) (provider, model string) {
	if i := strings.IndexByte(name, ':'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// Accumulator assembles streamed chunks into one assistant message. It tolerates providers that
// omit the tool-call index (a new id starts a new call) and ones that send each call whole.
type Accumulator struct {
	Text         strings.Builder
	Reasoning    strings.Builder
	Calls        []ToolCall
	Usage        Usage
	HaveUsage    bool
	FinishReason string
	Thinking     []ThinkingBlock
	byIndex      map[int]int // stream index -> position in Calls
}

// Add folds one chunk in.
func (a *Accumulator) Add(c Chunk) {
	a.Text.WriteString(c.Text)
	a.Reasoning.WriteString(c.Reasoning)
	for _, d := range c.ToolCalls {
		a.addCall(d)
	}
	if c.Usage != nil {
		a.Usage = *c.Usage
		a.HaveUsage = true
	}
	if c.FinishReason != "" {
		a.FinishReason = c.FinishReason
	}
	if c.Thinking != nil {
		a.Thinking = append(a.Thinking, *c.Thinking)
	}
}

func (a *Accumulator) addCall(d ToolCallDelta) {
	if a.byIndex == nil {
		a.byIndex = map[int]int{}
	}
	pos, ok := a.byIndex[d.Index]
	if ok && d.ID != "" && a.Calls[pos].ID != "" && d.ID != a.Calls[pos].ID {
		ok = false // same (or missing) index but a new id: a new call
	}
	if !ok {
		a.Calls = append(a.Calls, ToolCall{ID: d.ID, Name: d.Name})
		pos = len(a.Calls) - 1
		a.byIndex[d.Index] = pos
		a.Calls[pos].Arguments += d.Arguments
		return
	}
	c := &a.Calls[pos]
	if c.ID == "" {
		c.ID = d.ID
	}
	if c.Name == "" {
		c.Name = d.Name
	}
	c.Arguments += d.Arguments
}

// Message returns the assembled assistant message.
func (a *Accumulator) Message() Message {
	return Message{Role: "assistant", Content: a.Text.String(), Reasoning: a.Reasoning.String(), ToolCalls: a.Calls, Thinking: a.Thinking}
}
