package openai

import (
	"encoding/json"

	"github.com/hermes-go/hermes/engine/model"
)

// Wire shapes of a request body, in the field order the official SDKs send.
type wireRequest struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Tools         []wireTool    `json:"tools,omitempty"`
	MaxTokens     int           `json:"max_tokens,omitempty"`
	Temperature   *float64      `json:"temperature,omitempty"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role string `json:"role"`
	// Content is a pointer so an assistant turn that only calls tools sends null, the form
	// the spec documents; every other message sends a string, even an empty one.
	// With images it is a list of content parts instead.
	Content    any            `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string           `json:"type"`
	Function wireToolFunction `json:"function"`
}

type wireToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// encodeRequest maps a provider-neutral request onto the wire. Reasoning is never sent back:
// DeepSeek rejects reasoning_content in input, and no server needs it to continue.
func encodeRequest(r model.Request) *wireRequest {
	w := &wireRequest{
		Model:       r.Model,
		Messages:    make([]wireMessage, 0, len(r.Messages)),
		MaxTokens:   r.MaxTokens,
		Temperature: r.Temperature,
		Stream:      true,
	}
	w.StreamOptions.IncludeUsage = true
	for _, m := range r.Messages {
		wm := wireMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		content := m.Content
		switch {
		case len(m.Images) > 0:
			parts := []contentPart{{Type: "text", Text: content}}
			for _, u := range m.Images {
				parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{URL: u}})
			}
			wm.Content = parts
		case !(m.Role == "assistant" && content == "" && len(m.ToolCalls) > 0):
			wm.Content = content
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if args == "" {
				// Several servers parse arguments back into JSON and reject "".
				args = "{}"
			}
			wm.ToolCalls = append(wm.ToolCalls, wireToolCall{
				ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args},
			})
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range r.Tools {
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: wireToolFunction{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters,
		}})
	}
	return w
}
