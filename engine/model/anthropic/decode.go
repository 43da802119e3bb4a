package anthropic

import (
	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/hermes-go/hermes/engine/model"
)

// decoder turns the Messages stream events into engine chunks. Usage is held until
// message_stop and sent with the finish reason, as one chunk, so a stream cut short never
// reports a finish.
type decoder struct {
	usage   model.Usage
	stop    string
	stopped bool
	blocks  map[int64]*block // by content block index
	calls   int              // tool_use blocks seen: the engine's tool call index
}

type block struct {
	kind      string // text | thinking | redacted_thinking | tool_use | other
	call      int
	thinking  []byte
	signature string
}

// event returns the chunks one event contributes (often none).
func (d *decoder) event(ev sdk.MessageStreamEventUnion) []model.Chunk {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		d.setUsage(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	case "content_block_start":
		if d.blocks == nil {
			d.blocks = map[int64]*block{}
		}
		cb := ev.ContentBlock
		b := &block{kind: cb.Type}
		d.blocks[ev.Index] = b
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				return []model.Chunk{{Text: cb.Text}}
			}
		case "thinking":
			b.thinking = append(b.thinking, cb.Thinking...)
			b.signature = cb.Signature
			if cb.Thinking != "" {
				return []model.Chunk{{Reasoning: cb.Thinking}}
			}
		case "redacted_thinking":
			return []model.Chunk{{Thinking: &model.ThinkingBlock{Data: cb.Data}}}
		case "tool_use":
			b.call = d.calls
			d.calls++
			return []model.Chunk{{ToolCalls: []model.ToolCallDelta{{Index: b.call, ID: cb.ID, Name: cb.Name}}}}
		}
	case "content_block_delta":
		b := d.blocks[ev.Index]
		if b == nil {
			b = &block{kind: "other"}
		}
		switch dl := ev.Delta; dl.Type {
		case "text_delta":
			if dl.Text != "" {
				return []model.Chunk{{Text: dl.Text}}
			}
		case "thinking_delta":
			b.thinking = append(b.thinking, dl.Thinking...)
			if dl.Thinking != "" {
				return []model.Chunk{{Reasoning: dl.Thinking}}
			}
		case "signature_delta":
			b.signature += dl.Signature
		case "input_json_delta":
			if b.kind == "tool_use" && dl.PartialJSON != "" {
				return []model.Chunk{{ToolCalls: []model.ToolCallDelta{{Index: b.call, Arguments: dl.PartialJSON}}}}
			}
		}
	case "content_block_stop":
		if b := d.blocks[ev.Index]; b != nil && b.kind == "thinking" {
			return []model.Chunk{{Thinking: &model.ThinkingBlock{Text: string(b.thinking), Signature: b.signature}}}
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			d.stop = string(ev.Delta.StopReason)
		}
		// message_delta usage is cumulative; input figures are present when the API
		// revised them (server tools), else zero.
		u := ev.Usage
		d.setUsage(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	case "message_stop":
		d.stopped = true
		u := d.usage
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		return []model.Chunk{{Usage: &u, FinishReason: FinishReason(d.stop)}}
	}
	return nil
}

// setUsage records the non-zero figures of a usage object. PromptTokens counts every input
// token: the uncached ones the API reports as input_tokens plus cache reads and writes.
func (d *decoder) setUsage(input, cacheRead, cacheWrite, output int64) {
	if input != 0 || cacheRead != 0 || cacheWrite != 0 {
		d.usage.PromptTokens = int(input + cacheRead + cacheWrite)
		d.usage.CachedTokens = int(cacheRead)
		d.usage.CacheWriteTokens = int(cacheWrite)
	}
	if output != 0 {
		d.usage.CompletionTokens = int(output)
	}
}

// FinishReason maps a stop_reason onto the engine's finish reasons (the Chat Completions
// vocabulary the outcome record uses): end_turn and stop_sequence are stop, tool_use is
// tool_calls, max_tokens and a full context window are length, refusal is content_filter;
// anything else (pause_turn) passes through.
func FinishReason(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence", "":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "content_filter"
	}
	return stop
}
