package hermes

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"sync"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/stdlib"
)

// FakeModels is the model provider behind hermes.fake_model: each call of fake_model scripts a
// model ("fake:1", "fake:2", …) whose model calls are answered by its replies in order, text or
// a tool call. A test drives a session, and the policy deciding its tool calls, end to end with
// no server and no cassette. Register it with the engine under the provider name "fake".
type FakeModels struct {
	mu      sync.Mutex
	n       int
	scripts map[string]*fakeScript
}

type fakeScript struct {
	replies []fakeReply
	next    int
}

type fakeReply struct {
	text, tool string
	args       string
}

// NewFakeModels returns an empty provider.
func NewFakeModels() *FakeModels { return &FakeModels{scripts: map[string]*fakeScript{}} }

// FakeProvider is the provider name FakeModels is registered under.
const FakeProvider = "fake"

func (f *FakeModels) add(list []any) (string, error) {
	var rs []fakeReply
	for i, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return "", fmt.Errorf("%w: fake_model: reply %d is a %s (want {text} or {tool, args})", stdlib.ErrArgument, i+1, stdlib.TypeName(x))
		}
		var r fakeReply
		for k, v := range m {
			switch k {
			case "text", "tool":
				s, ok := v.(string)
				if !ok {
					return "", fmt.Errorf("%w: fake_model: reply %d: %s must be a string", stdlib.ErrArgument, i+1, k)
				}
				if k == "text" {
					r.text = s
				} else {
					r.tool = s
				}
			case "args":
				b, err := stdlib.Marshal(v, "")
				if err != nil {
					return "", fmt.Errorf("%w: fake_model: reply %d: args: %v", stdlib.ErrArgument, i+1, err)
				}
				r.args = string(b)
			default:
				return "", fmt.Errorf("%w: fake_model: reply %d: unknown field %q (text, tool, args)", stdlib.ErrArgument, i+1, k)
			}
		}
		if (r.text == "") == (r.tool == "") {
			return "", fmt.Errorf("%w: fake_model: reply %d needs text or tool (one of them)", stdlib.ErrArgument, i+1)
		}
		if r.tool != "" && r.args == "" {
			r.args = "{}"
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return "", fmt.Errorf("%w: fake_model: give at least one reply", stdlib.ErrArgument)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	name := strconv.Itoa(f.n)
	f.scripts[name] = &fakeScript{replies: rs}
	return FakeProvider + ":" + name, nil
}

// Stream answers one model call with the model's next scripted reply.
func (f *FakeModels) Stream(ctx context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(model.Chunk{}, err)
			return
		}
		_, name := model.ParseName(r.Model)
		if name == "" {
			name = r.Model
		}
		f.mu.Lock()
		s, ok := f.scripts[name]
		var rep fakeReply
		n := 0
		if ok && s.next < len(s.replies) {
			rep, n = s.replies[s.next], s.next+1
			s.next++
		}
		f.mu.Unlock()
		switch {
		case !ok:
			yield(model.Chunk{}, fmt.Errorf("fake model %q was not made by hermes.fake_model", r.Model))
			return
		case n == 0:
			yield(model.Chunk{}, fmt.Errorf("fake model %s: all %d scripted replies were used; the turn asked for one more", FakeProvider+":"+name, len(s.replies)))
			return
		}
		usage := &model.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}
		if rep.tool != "" {
			yield(model.Chunk{ToolCalls: []model.ToolCallDelta{{Index: 0, ID: "call_fake_" + strconv.Itoa(n), Name: rep.tool, Arguments: rep.args}}, FinishReason: "tool_calls", Usage: usage}, nil)
			return
		}
		yield(model.Chunk{Text: rep.text, FinishReason: "stop", Usage: usage}, nil)
	}
}

var _ model.Provider = (*FakeModels)(nil)
