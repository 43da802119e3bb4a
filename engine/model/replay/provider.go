package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
)

// ErrExhausted is matched (errors.Is) by the error a Provider yields when no recorded
// interaction is left for a request.
var ErrExhausted = errors.New("cassette exhausted")

// Provider plays a cassette's interactions as model calls, one interaction per Stream call in
// recorded order. It is safe for concurrent use; each interaction is played at most once.
type Provider struct {
	c *Cassette

	mu     sync.Mutex
	used   []bool
	played int
}

var _ model.Provider = (*Provider)(nil)

// New returns a provider playing c.
func New(c *Cassette) *Provider {
	return &Provider{c: c, used: make([]bool, len(c.Interactions))}
}

// Remaining is the number of interactions not played yet, so tests can check that a session
// consumed the whole cassette.
func (p *Provider) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.used) - p.played
}

// Stream implements model.Provider. It picks the first unplayed interaction whose match fits the
// request's last user or tool message. On an openai cassette a 2xx body is decoded by
// openai.DecodeStream, anything else becomes openai.ErrorFromResponse, exactly as the live
// client does; an anthropic cassette is played through the live Anthropic client itself, its
// HTTP transport answering from the cassette (anthropic.go). Like the live client,
// a retryable failure followed in the cassette by a retry of the same request (what a recording
// of the client's retries looks like) moves on to that retry.
func (p *Provider) Stream(ctx context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(model.Chunk{}, err)
			return
		}
		if p.c.Provider == "anthropic" {
			p.streamAnthropic(ctx, r, yield)
			return
		}
		resp, err := p.take(lastTurnText(r.Messages))
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		for chunk, err := range openai.DecodeStream(newPieceReader(resp)) {
			if ctxErr := ctx.Err(); ctxErr != nil {
				yield(model.Chunk{}, ctxErr)
				return
			}
			if !yield(chunk, err) || err != nil {
				return
			}
		}
	}
}

// take claims the interaction(s) for one call and returns the 2xx response to stream, or the
// provider error to report.
func (p *Provider) take(text string) (*Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.next(text, 0)
	if i < 0 {
		return nil, p.exhausted(text)
	}
	for retry := 0; ; retry++ {
		p.used[i] = true
		p.played++
		it := &p.c.Interactions[i]
		resp := it.Response
		if resp == nil { // only a cassette built in code can get here; Parse rejects it
			return nil, fmt.Errorf("cassette %s: interactions[%d] has no response", p.c.Name, i)
		}
		if resp.Status >= 200 && resp.Status < 300 {
			return resp, nil
		}
		apiErr := openai.ErrorFromResponse(resp.Status, resp.header(), resp.body())
		if !apiErr.Retryable || retry >= openai.DefaultMaxRetries {
			return nil, apiErr
		}
		j := p.next(text, i+1)
		if j < 0 || !sameJSON(p.c.Interactions[j].Request, it.Request) {
			return nil, apiErr
		}
		i = j
	}
}

// next is the first unplayed interaction at or after from whose match fits text, or -1.
func (p *Provider) next(text string, from int) int {
	for i := from; i < len(p.c.Interactions); i++ {
		if !p.used[i] && strings.Contains(text, p.c.Interactions[i].Match) {
			return i
		}
	}
	return -1
}

func (p *Provider) exhausted(text string) error {
	e := &exhaustedError{name: p.c.Name, played: p.played, unused: len(p.used) - p.played}
	if e.unused > 0 {
		e.text = text
	}
	return e
}

type exhaustedError struct {
	name           string
	played, unused int
	text           string
}

func (e *exhaustedError) Error() string {
	name := e.name
	if name == "" {
		name = "(unnamed)"
	}
	if e.unused > 0 {
		t := e.text
		if r := []rune(t); len(r) > 80 {
			t = string(r[:80]) + "…"
		}
		return fmt.Sprintf("cassette %s: no interaction left matching the last message %q (played %d, %d unused with other matches)", name, t, e.played, e.unused)
	}
	return fmt.Sprintf("cassette %s: no interaction left (played %d)", name, e.played)
}

func (e *exhaustedError) Is(target error) bool { return target == ErrExhausted }

// lastTurnText is the content of the last user or tool message: what a session just said to
// the model, and so what distinguishes one session's call from another's.
func lastTurnText(ms []model.Message) string {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == "user" || ms[i].Role == "tool" {
			return ms[i].Content
		}
	}
	return ""
}

func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// pieceReader returns a recorded body piece by piece, then the recorded transport error (or
// EOF), so the decoder sees the same reads and the same ending as it did live.
type pieceReader struct {
	pieces []Piece
	cur    []byte
	end    error
}

func newPieceReader(r *Response) *pieceReader {
	end := io.EOF
	switch r.Error {
	case "":
	case io.ErrUnexpectedEOF.Error():
		end = io.ErrUnexpectedEOF
	default:
		end = errors.New(r.Error)
	}
	return &pieceReader{pieces: r.Body, end: end}
}

func (r *pieceReader) Read(b []byte) (int, error) {
	for len(r.cur) == 0 {
		if len(r.pieces) == 0 {
			return 0, r.end
		}
		r.cur, r.pieces = r.pieces[0], r.pieces[1:]
	}
	n := copy(b, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
