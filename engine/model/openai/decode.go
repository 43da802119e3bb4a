package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/hermes-go/hermes/engine/model"
)

// MaxEventBytes bounds one SSE line and one event's data. Real chunks are a few hundred bytes;
// the bound exists so a broken or hostile server cannot make the decoder buffer without limit,
// while leaving room for a provider that sends a large tool call as a single chunk.
const MaxEventBytes = 8 << 20

// DecodeStream decodes a Chat Completions server-sent event stream into chunks.
//
// It accepts LF, CRLF and bare CR line endings, "data:" with or without the space, comment and
// retry/id lines, and multi-line data. It stops after "data: [DONE]" without reading further.
// An in-band {"error":{…}} event yields a *model.Error (Status 0); invalid chunk JSON yields an
// error wrapping ErrMalformedStream that quotes the data; the end of r before [DONE] yields an
// error wrapping ErrIncompleteStream. Chunks that carry nothing (a role-only first delta, an
// empty keep-alive object) are not yielded.
//
// Provider quirks absorbed here: a tool-call delta without "index" counts as index 0 (the
// model.Accumulator then splits calls on a new id), reasoning arrives as reasoning_content,
// reasoning or thinking, and usage details come from OpenAI's *_details objects or DeepSeek's
// prompt_cache_hit_tokens.
func DecodeStream(r io.Reader) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		d := decoder{lines: lineReader{r: bufio.NewReaderSize(r, 32<<10)}}
		d.run(yield)
	}
}

type decoder struct {
	lines   lineReader
	data    []byte // data of the event being assembled, reused across events
	hasData bool
	event   string // the event's "event:" field
	// sawData and stray diagnose a body that is not an event stream at all (a server that
	// ignored stream:true and answered with JSON), which otherwise reads as a bare truncation.
	sawData bool
	stray   []byte
}

func (d *decoder) run(yield func(model.Chunk, error) bool) {
	for {
		line, err := d.lines.next()
		if err != nil {
			if len(line) > 0 {
				if ferr := d.field(line); ferr != nil {
					yield(model.Chunk{}, ferr)
					return
				}
			}
			// The SSE spec discards an event not closed by a blank line at EOF; the one
			// exception we make is an unterminated [DONE], which leaves nothing out.
			if d.hasData && string(bytes.TrimSpace(d.data)) == "[DONE]" {
				return
			}
			yield(model.Chunk{}, d.endError(err))
			return
		}
		if len(line) == 0 {
			chunk, done, err := d.dispatch()
			if err != nil {
				yield(model.Chunk{}, err)
				return
			}
			if done {
				return
			}
			if !isEmpty(&chunk) && !yield(chunk, nil) {
				return
			}
			continue
		}
		if err := d.field(line); err != nil {
			yield(model.Chunk{}, err)
			return
		}
	}
}

// field handles one non-empty line of the current event.
func (d *decoder) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment, often a keep-alive
	}
	name, value, found := bytes.Cut(line, []byte{':'})
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
		if len(d.data) > MaxEventBytes {
			return fmt.Errorf("%w: event data exceeds %d bytes", ErrMalformedStream, MaxEventBytes)
		}
	case "event":
		d.event = string(value)
	case "id", "retry":
	default:
		if d.stray == nil {
			d.stray = []byte(snippet(line))
		}
	}
	return nil
}

// dispatch completes the current event. done reports the [DONE] terminator.
func (d *decoder) dispatch() (c model.Chunk, done bool, err error) {
	data, hasData, event := d.data, d.hasData, d.event
	d.data, d.hasData, d.event = d.data[:0], false, ""
	if !hasData {
		return model.Chunk{}, false, nil
	}
	d.sawData = true
	// Chat Completions streams use unnamed events. A named one (a proxy's "ping", say) is not a
	// chunk; treating its payload as one would fail or, worse, inject content.
	if event != "" && event != "message" && event != "error" {
		return model.Chunk{}, false, nil
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return model.Chunk{}, false, nil
	}
	if string(data) == "[DONE]" {
		return model.Chunk{}, true, nil
	}
	c, err = decodeChunk(data)
	return c, false, err
}

func (d *decoder) endError(err error) error {
	if errors.Is(err, io.EOF) {
		if !d.sawData && d.stray != nil {
			return fmt.Errorf("%w: the response is not an event stream (first line %q)", ErrIncompleteStream, d.stray)
		}
		return ErrIncompleteStream
	}
	if errors.Is(err, errLineTooLong) {
		return fmt.Errorf("%w: %w", ErrMalformedStream, err)
	}
	return fmt.Errorf("%w: %w", ErrIncompleteStream, err)
}

// Wire shapes of one chunk. Only the fields we use are declared; encoding/json skips the rest.
type wireChunk struct {
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type wireChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	FinishReason string    `json:"finish_reason"`
}

type wireDelta struct {
	Content          string              `json:"content"`
	ReasoningContent looseText           `json:"reasoning_content"`
	Reasoning        looseText           `json:"reasoning"`
	Thinking         looseText           `json:"thinking"`
	ToolCalls        []wireToolCallDelta `json:"tool_calls"`
}

type wireToolCallDelta struct {
	Index    int    `json:"index"` // absent (Gemini, older Ollama) decodes as 0 on purpose
	ID       string `json:"id"`
	Function struct {
		Name      string  `json:"name"`
		Arguments argText `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// looseText is a reasoning extension field. These are not in the spec and some servers put
// structured values under the same names; a non-string is ignored rather than failing a chunk
// whose content is fine.
type looseText string

func (t *looseText) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, (*string)(t))
	}
	return nil
}

// argText is a tool call's arguments. The spec says string; a few servers send the JSON object
// itself, which we keep as its JSON text so the call still works.
type argText string

func (t *argText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, (*string)(t))
	case string(b) == "null":
		return nil
	default:
		*t = argText(b)
		return nil
	}
}

func decodeChunk(data []byte) (model.Chunk, error) {
	var w wireChunk
	if err := json.Unmarshal(data, &w); err != nil {
		return model.Chunk{}, fmt.Errorf("%w: invalid chunk %q: %v", ErrMalformedStream, snippet(data), err)
	}
	if e := new(model.Error); fillFromEnvelope(e, w.Error) {
		return model.Chunk{}, e
	}
	var c model.Chunk
	for i := range w.Choices {
		ch := &w.Choices[i]
		if ch.Index != 0 {
			continue // we never ask for n>1; other choices are not part of this answer
		}
		c.Text += ch.Delta.Content
		// Some servers send the same text under two names; take one so it is not doubled.
		switch {
		case ch.Delta.ReasoningContent != "":
			c.Reasoning += string(ch.Delta.ReasoningContent)
		case ch.Delta.Reasoning != "":
			c.Reasoning += string(ch.Delta.Reasoning)
		default:
			c.Reasoning += string(ch.Delta.Thinking)
		}
		for _, tc := range ch.Delta.ToolCalls {
			c.ToolCalls = append(c.ToolCalls, model.ToolCallDelta{
				Index:     tc.Index,
				ID:        tc.ID,
				Name:      tc.Function.Name,
				Arguments: string(tc.Function.Arguments),
			})
		}
		if ch.FinishReason != "" {
			c.FinishReason = ch.FinishReason
		}
	}
	if u := w.Usage; u != nil {
		c.Usage = &model.Usage{
			PromptTokens:     u.PromptTokens,
			CompletionTokens: u.CompletionTokens,
			TotalTokens:      u.TotalTokens,
			CachedTokens:     u.PromptTokensDetails.CachedTokens,
			ReasoningTokens:  u.CompletionTokensDetails.ReasoningTokens,
		}
		if c.Usage.CachedTokens == 0 {
			c.Usage.CachedTokens = u.PromptCacheHitTokens
		}
	}
	return c, nil
}

// isEmpty reports a chunk that carries nothing for the caller.
func isEmpty(c *model.Chunk) bool {
	return c.Text == "" && c.Reasoning == "" && len(c.ToolCalls) == 0 && c.Usage == nil && c.FinishReason == ""
}
