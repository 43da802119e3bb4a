// Package openai is the model provider for OpenAI-compatible Chat Completions endpoints (OpenAI,
// OpenRouter, Ollama, vLLM, llama.cpp server). It owns the request encoding, the streaming SSE
// decoder, the provider error envelope and the retry policy; it uses net/http only, so the wire
// behaviour is ours to read and test rather than an SDK's.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/redact"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// maxErrorBody bounds how much of a failed response is read to build the error.
const maxErrorBody = 1 << 20

// Config configures a Client.
type Config struct {
	// BaseURL is the API root including the version segment, e.g. https://api.openai.com/v1 or
	// http://localhost:11434/v1. A trailing slash is tolerated. Empty means DefaultBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when non-empty; local servers need none.
	APIKey string
	// Headers are added to every request and win over the defaults, e.g. OpenRouter's
	// HTTP-Referer or an Azure-style api-key header.
	Headers map[string]string
	// HTTPClient sends the requests; nil means http.DefaultClient. Give it no overall Timeout:
	// a stream legitimately lasts minutes, and the caller's ctx bounds it instead.
	HTTPClient *http.Client
	// MaxRetries is the number of retries after the first attempt for retryable failures
	// (408, 409, 429, 5xx, connection failures). Zero means DefaultMaxRetries; negative
	// disables retries.
	MaxRetries int
	// Backoff, when set, replaces the whole delay computation before retry number attempt
	// (1-based), including the server's Retry-After; tests use it to avoid waiting.
	Backoff func(attempt int) time.Duration
}

// Client streams chat completions from one endpoint. It is safe for concurrent use.
type Client struct {
	url        string
	urlErr     error // a BaseURL no request can be sent to, reported by Stream
	apiKey     string
	headers    map[string]string
	http       *http.Client
	maxRetries int
	backoff    func(attempt int) time.Duration
}

var _ model.Provider = (*Client)(nil)

// New returns a client for cfg.
func New(cfg Config) *Client {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	c := &Client{
		url:        base + "/chat/completions",
		apiKey:     cfg.APIKey,
		headers:    cfg.Headers,
		http:       cfg.HTTPClient,
		maxRetries: cfg.MaxRetries,
		backoff:    cfg.Backoff,
	}
	if u, err := url.Parse(c.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Caught here rather than left to the transport, which would report it only after
		// the retries and their backoff.
		c.urlErr = fmt.Errorf("openai: invalid base URL %q: want http(s)://host[:port]/path", redact.String(cfg.BaseURL))
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	return c
}

// Stream implements model.Provider. The request is sent when iteration starts. Failures before
// the response body starts are retried per Config.MaxRetries; once a chunk has been yielded
// nothing is retried, since the caller may already have acted on it. If ctx ends, the sequence
// yields ctx.Err() and stops.
func (c *Client) Stream(ctx context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		if c.urlErr != nil {
			yield(model.Chunk{}, c.urlErr)
			return
		}
		body, err := json.Marshal(encodeRequest(r))
		if err != nil {
			yield(model.Chunk{}, fmt.Errorf("openai: encoding request: %w", err))
			return
		}
		resp, err := c.open(ctx, body)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		defer resp.Body.Close()
		for chunk, err := range DecodeStream(resp.Body) {
			if ctxErr := ctx.Err(); ctxErr != nil {
				// A cancelled request surfaces as a read error or as buffered chunks
				// still arriving; either way the caller asked to stop.
				yield(model.Chunk{}, ctxErr)
				return
			}
			if !yield(chunk, err) || err != nil {
				return
			}
		}
	}
}

// open sends the request and returns a 2xx response, retrying what is worth retrying.
func (c *Client) open(ctx context.Context, body []byte) (*http.Response, error) {
	var lastHeader http.Header // of the failed response being retried, for Retry-After
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, c.delay(attempt, lastHeader)); err != nil {
				return nil, err
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("openai: building request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("User-Agent", "hermes")
		if c.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
		}
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			if attempt < c.maxRetries {
				lastHeader = nil
				continue
			}
			// The transport names the request URL, which may carry a key (?key=) or user
			// info; the error travels to logs, events and clients.
			var ue *url.Error
			if errors.As(err, &ue) {
				ue.URL = redact.String(ue.URL)
			}
			return nil, fmt.Errorf("%w: %w (%d attempts)", ErrUnreachable, err, attempt+1)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		if readErr != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
		}
		apiErr := ErrorFromResponse(resp.StatusCode, resp.Header, data)
		// Some endpoints echo the key they rejected.
		apiErr.Message = redact.String(apiErr.Message)
		if apiErr.Retryable && attempt < c.maxRetries {
			lastHeader = resp.Header
			continue
		}
		if apiErr.Retryable {
			apiErr.Attempts = attempt + 1
			apiErr.RetryAfter, _ = retryAfter(resp.Header, time.Now())
		}
		return nil, apiErr
	}
}

// delay is the wait before retry number attempt (1-based): the server's Retry-After when it
// gave one, else exponential backoff from 0.5s, capped at 8s, with jitter so that many
// clients rate-limited together do not retry in lockstep.
func (c *Client) delay(attempt int, h http.Header) time.Duration {
	if c.backoff != nil {
		return c.backoff(attempt)
	}
	if d, ok := retryAfter(h, time.Now()); ok {
		return d
	}
	d := min(500*time.Millisecond<<min(attempt-1, 5), 8*time.Second)
	return d - time.Duration(rand.Float64()*0.25*float64(d))
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
