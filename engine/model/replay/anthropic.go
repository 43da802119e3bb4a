package replay

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/anthropic"
)

// streamAnthropic plays an anthropic cassette: the request goes through the live client (the
// official SDK's encoder, SSE decoder and error mapping, and the client's own retries), whose
// HTTP transport answers each request with the next recorded interaction, body piece by piece.
func (p *Provider) streamAnthropic(ctx context.Context, r model.Request, yield func(model.Chunk, error) bool) {
	text := lastTurnText(r.Messages)
	p.mu.Lock()
	none := p.next(text, 0) < 0
	p.mu.Unlock()
	if none {
		p.mu.Lock()
		err := p.exhausted(text)
		p.mu.Unlock()
		yield(model.Chunk{}, err)
		return
	}
	client := anthropic.New(anthropic.Config{
		BaseURL:    "http://cassette.invalid",
		HTTPClient: &http.Client{Transport: &player{p: p, text: text}},
		// A recording holds the retries the live client made; replay them without waiting.
		Backoff: func(int) time.Duration { return 0 },
	})
	for ch, err := range client.Stream(ctx, r) {
		if !yield(ch, err) || err != nil {
			return
		}
	}
}

// player answers each request with the next unplayed interaction matching text.
type player struct {
	p    *Provider
	text string
}

func (pl *player) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	p := pl.p
	p.mu.Lock()
	i := p.next(pl.text, 0)
	if i < 0 {
		err := p.exhausted(pl.text)
		p.mu.Unlock()
		return nil, err
	}
	p.used[i] = true
	p.played++
	rec := p.c.Interactions[i].Response
	p.mu.Unlock()
	h := rec.header()
	return &http.Response{
		Status:     http.StatusText(rec.Status),
		StatusCode: rec.Status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          io.NopCloser(newPieceReader(rec)),
		Request:       req,
		ContentLength: -1,
	}, nil
}

var _ http.RoundTripper = (*player)(nil)
