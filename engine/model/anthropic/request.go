package anthropic

import (
	"encoding/json"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/hermes-go/hermes/engine/model"
)

// encodeRequest maps a provider-neutral request onto MessageNewParams.
//
// System messages become the system blocks. Tool results become tool_result blocks of a user
// message, and consecutive tool results and user text are merged into one user message, as
// the API wants every result of an assistant turn in the next user message. An assistant
// message sends back its signed thinking blocks when thinking is on (the API requires them
// before the tool_use blocks of a turn in progress), then its text, then its tool_use blocks.
//
// Prompt caching places the four breakpoints the API allows where a conversation's prefix is
// stable: the last tool definition, the last system block and the last block of each of the
// two final messages (the conversation tail), so each request reads the previous one's prefix
// from the cache and writes the new tail.
//
// This SDK version has no temperature field; a temperature is set on the JSON body through the
// returned request options.
func encodeRequest(r model.Request, maxTokens, thinking int) (sdk.MessageNewParams, []option.RequestOption) {
	var opts []option.RequestOption
	p := sdk.MessageNewParams{Model: sdk.Model(r.Model), MaxTokens: int64(maxTokens)}
	if r.MaxTokens > 0 {
		p.MaxTokens = int64(r.MaxTokens)
	}
	if thinking > 0 {
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(thinking))
		if p.MaxTokens <= int64(thinking) {
			p.MaxTokens = int64(thinking) + int64(maxTokens)
		}
	} else if r.Temperature != nil {
		opts = append(opts, option.WithJSONSet("temperature", *r.Temperature)) // refused with thinking
	}
	var msgs []sdk.MessageParam
	// user appends blocks to a trailing user message, or starts one.
	user := func(blocks ...sdk.ContentBlockParamUnion) {
		if n := len(msgs); n > 0 && msgs[n-1].OfUser != nil {
			msgs[n-1].OfUser.Content = append(msgs[n-1].OfUser.Content, blocks...)
			return
		}
		msgs = append(msgs, sdk.NewUserMessage(blocks...))
	}
	for _, m := range r.Messages {
		switch m.Role {
		case "system":
			if m.Content != "" {
				p.System = append(p.System, sdk.TextBlockParam{Text: m.Content})
			}
		case "tool":
			tr := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				tr.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			user(sdk.ContentBlockParamUnion{OfToolResult: &tr})
		case "assistant":
			var blocks []sdk.ContentBlockParamUnion
			if thinking > 0 {
				for _, t := range m.Thinking {
					if t.Data != "" {
						blocks = append(blocks, sdk.NewRedactedThinkingBlock(t.Data))
					} else if t.Signature != "" {
						blocks = append(blocks, sdk.NewThinkingBlock(t.Signature, t.Text))
					}
				}
			}
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, toolInput(c.Arguments), c.Name))
			}
			if len(blocks) > 0 {
				msgs = append(msgs, sdk.NewAssistantMessage(blocks...))
			}
		default: // user
			var blocks []sdk.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, u := range m.Images {
				blocks = append(blocks, imageBlock(u))
			}
			if len(blocks) > 0 {
				user(blocks...)
			}
		}
	}
	p.Messages = msgs
	for _, t := range r.Tools {
		schema := sdk.ToolInputSchemaParam{}
		var obj map[string]any
		if len(t.Parameters) > 0 && json.Unmarshal(t.Parameters, &obj) == nil {
			schema.Properties = obj["properties"]
			if req, ok := obj["required"].([]any); ok {
				for _, x := range req {
					if s, ok := x.(string); ok {
						schema.Required = append(schema.Required, s)
					}
				}
			}
			delete(obj, "type")
			delete(obj, "properties")
			delete(obj, "required")
			if len(obj) > 0 {
				schema.ExtraFields = obj
			}
		}
		tp := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	cacheBreakpoints(&p)
	return p, opts
}

// cacheBreakpoints marks the last tool, the last system block and the last cacheable block of
// the final two messages with an ephemeral cache_control.
func cacheBreakpoints(p *sdk.MessageNewParams) {
	if n := len(p.Tools); n > 0 {
		if cc := p.Tools[n-1].GetCacheControl(); cc != nil {
			*cc = sdk.NewCacheControlEphemeralParam()
		}
	}
	if n := len(p.System); n > 0 {
		p.System[n-1].CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	for i := len(p.Messages) - 1; i >= 0 && i >= len(p.Messages)-2; i-- {
		var blocks []sdk.ContentBlockParamUnion
		switch m := p.Messages[i]; {
		case m.OfUser != nil:
			blocks = m.OfUser.Content
		case m.OfAssistant != nil:
			blocks = m.OfAssistant.Content
		}
		for j := len(blocks) - 1; j >= 0; j-- {
			if blocks[j].OfThinking != nil || blocks[j].OfRedactedThinking != nil {
				continue // thinking blocks cannot carry cache_control
			}
			if cc := blocks[j].GetCacheControl(); cc != nil {
				*cc = sdk.NewCacheControlEphemeralParam()
				break
			}
		}
	}
}

// toolInput is a tool call's arguments as the JSON object tool_use.input must be; arguments
// that are not an object (cut short, empty) are sent as {}.
func toolInput(args string) any {
	raw := json.RawMessage(strings.TrimSpace(args))
	var obj map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil || obj == nil {
		return map[string]any{}
	}
	return raw
}

// imageBlock is an image content block: a data: URL is sent inline as base64, anything else
// as a URL source.
func imageBlock(u string) sdk.ContentBlockParamUnion {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok && strings.HasSuffix(meta, ";base64") {
			return sdk.NewImageBlockBase64(strings.TrimSuffix(meta, ";base64"), data)
		}
	}
	return sdk.NewImageBlock(sdk.URLImageSourceParam{URL: u})
}
